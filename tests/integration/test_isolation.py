"""Isolation: agent B can neither see nor change agent A's ``agent:`` memories, through
any RPC, by id or by query, unary or through Stream."""

from __future__ import annotations

import grpc
import pytest
from memoryd_client import pb
from memoryd_client.client import recall_request, store_request, update_request

pytestmark = pytest.mark.integration

NOT_FOUND = grpc.StatusCode.NOT_FOUND
DENIED = grpc.StatusCode.PERMISSION_DENIED

SECRET = "Alice's door code is 4417."


@pytest.fixture
def owned(client, new_agent):
    """Agent A with one memory, and agent B who has never written anything."""
    a, b = new_agent(), new_agent()
    memory = client.store(a, SECRET, idempotency_key="door", metadata={"k": "v"}).memory
    return a, b, memory


def _a_is_untouched(client, a, memory, content):
    assert content(client.get(a, memory.id)) == content(memory)
    assert client.stats(a).total == 1
    assert content(client.recall(a, SECRET, limit=1).results[0].memory) == content(memory)


def test_other_agent_cannot_read_it(client, owned, rejects, content):
    a, b, memory = owned
    rejects(NOT_FOUND, client.get, b, memory.id, mentions=["not found"])
    listed = client.list(b)
    assert list(listed.memories) == [] and listed.total_size == 0
    assert client.stats(b).total == 0
    assert client.recall(b, SECRET, limit=100).results == []
    rejects(DENIED, client.recall, b, SECRET, scopes=[f"agent:{a}"], mentions=[f"agent:{a}"])
    rejects(DENIED, client.list, b, scopes=[f"agent:{a}"], mentions=[f"agent:{a}"])
    _a_is_untouched(client, a, memory, content)


def test_not_found_does_not_reveal_that_the_memory_exists(client, owned, rejects):
    _, b, memory = owned
    other = client.store(b, "Something of B's own.").memory
    client.forget(b, id=other.id)
    hidden = rejects(NOT_FOUND, client.get, b, memory.id)
    absent = rejects(NOT_FOUND, client.get, b, other.id)
    assert hidden.replace(memory.id, "ID") == absent.replace(other.id, "ID")


def test_other_agent_cannot_change_or_delete_it(client, owned, rejects, content):
    a, b, memory = owned
    rejects(NOT_FOUND, client.update, b, memory.id, text="Overwritten by B.")
    rejects(NOT_FOUND, client.update, b, memory.id, importance=0.01)
    rejects(NOT_FOUND, client.forget, b, id=memory.id)
    r = client.forget(b, query=SECRET)
    assert not r.deleted_ids
    assert not r.candidates  # not even shown as a candidate
    rejects(DENIED, client.store, b, "Planted by B.", scope=f"agent:{a}")
    _a_is_untouched(client, a, memory, content)


def test_other_agent_gets_its_own_memory_for_the_same_text_and_key(client, owned, content):
    a, b, memory = owned
    r = client.store(b, SECRET, idempotency_key="door")
    assert r.outcome == pb.STORE_OUTCOME_CREATED
    assert r.memory.id != memory.id
    assert r.memory.agent_id == b
    assert not r.duplicate_of
    _a_is_untouched(client, a, memory, content)


async def test_other_agent_cannot_reach_it_through_stream(client, owned, run_stream, content):
    a, b, memory = owned
    answers = await run_stream(
        [
            pb.StreamRequest(request_id="recall", recall=recall_request(b, SECRET, limit=100)),
            pb.StreamRequest(
                request_id="recall-scope",
                recall=recall_request(b, SECRET, scopes=[f"agent:{a}"]),
            ),
            pb.StreamRequest(
                request_id="update", update=update_request(b, memory.id, text="Overwritten.")
            ),
            pb.StreamRequest(
                request_id="forget-id", forget=pb.ForgetRequest(agent_id=b, id=memory.id)
            ),
            pb.StreamRequest(
                request_id="forget-query", forget=pb.ForgetRequest(agent_id=b, query=SECRET)
            ),
            pb.StreamRequest(
                request_id="store-into-a",
                store=store_request(b, "Planted by B.", scope=f"agent:{a}"),
            ),
        ]
    )
    assert answers["recall"].recall.results == []
    assert answers["recall-scope"].error.code_name == "PERMISSION_DENIED"
    assert answers["update"].error.code_name == "NOT_FOUND"
    assert answers["forget-id"].error.code_name == "NOT_FOUND"
    forget = answers["forget-query"].forget
    assert not forget.deleted_ids and not forget.candidates
    assert answers["store-into-a"].error.code_name == "PERMISSION_DENIED"
    _a_is_untouched(client, a, memory, content)
