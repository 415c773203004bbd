"""A daemon started with non-default settings from the environment: a small
store.max_chars, and a policy that lets every agent write two scopes of its own."""

from __future__ import annotations

import uuid

import grpc
import pytest
from memoryd_client import MemoryClient, pb

pytestmark = pytest.mark.integration

INVALID = grpc.StatusCode.INVALID_ARGUMENT
MAX_CHARS = 60


@pytest.fixture(scope="module")
def configured_address(start_daemon):
    daemon = start_daemon(
        env={
            "MEMORYD_STORE__MAX_CHARS": str(MAX_CHARS),
            "MEMORYD_POLICY__DEFAULT_WRITE": '["agent:{agent_id}", "project:{agent_id}"]',
            "MEMORYD_POLICY__DEFAULT_READ": '["agent:{agent_id}", "project:{agent_id}"]',
        }
    )
    return daemon.address


@pytest.fixture
def cfg_client(configured_address):
    with MemoryClient(configured_address, retries=0) as c:
        yield c


def _agent() -> str:
    return f"cfg-{uuid.uuid4().hex[:12]}"


def test_max_chars_from_the_environment_is_enforced(cfg_client, rejects, content):
    agent = _agent()
    at_limit = "The user keeps a vegetarian diet and loves lentil soups.."
    at_limit = at_limit + "!" * (MAX_CHARS - len(at_limit))
    assert len(at_limit) == MAX_CHARS
    over = at_limit + "!"
    rejects(
        INVALID,
        cfg_client.store,
        agent,
        over,
        mentions=[f"{MAX_CHARS + 1} chars", f"limit is {MAX_CHARS}", "store.max_chars"],
    )
    assert cfg_client.stats(agent).total == 0
    assert cfg_client.stats(agent).store_rows == cfg_client.stats(_agent()).store_rows

    stored = cfg_client.store(agent, at_limit)
    assert stored.outcome == pb.STORE_OUTCOME_CREATED
    # The limit counts the normalised text: surrounding whitespace does not count.
    padded = cfg_client.store(_agent(), f"\n   {at_limit}   \n")
    assert padded.outcome == pb.STORE_OUTCOME_CREATED
    assert padded.memory.text == at_limit

    rejects(
        INVALID,
        cfg_client.update,
        agent,
        stored.memory.id,
        text=over,
        mentions=["store.max_chars"],
    )
    assert content(cfg_client.get(agent, stored.memory.id)) == content(stored.memory)


def test_forget_by_query_with_two_strong_matches_deletes_nothing(cfg_client):
    agent = _agent()
    text = "The user's cat is called Miso."
    own = cfg_client.store(agent, text).memory
    shared = cfg_client.store(agent, text, scope=f"project:{agent}").memory
    assert own.id != shared.id  # duplicates are detected per scope
    assert cfg_client.store(agent, "Our logo was redesigned last spring.").outcome == (
        pb.STORE_OUTCOME_CREATED
    )

    r = cfg_client.forget(agent, query=text)
    assert not r.deleted_ids
    assert {c.memory.id for c in r.candidates} == {own.id, shared.id}
    assert all(c.score >= 0.5 for c in r.candidates)  # both strong: neither leads by the margin
    assert cfg_client.stats(agent).total == 3

    # Once only one strong match is left, the same query deletes it.
    cfg_client.forget(agent, id=shared.id)
    r = cfg_client.forget(agent, query=text)
    assert list(r.deleted_ids) == [own.id]
    assert cfg_client.stats(agent).total == 1
