"""Get, List (paging, newest first, filters) and Stats."""

from __future__ import annotations

import base64
import json
import random
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from memoryd_client import pb

pytestmark = pytest.mark.integration

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def test_get_absent_or_malformed_id(client, new_agent, rejects):
    agent = new_agent()
    missing = str(uuid.uuid4())
    rejects(grpc.StatusCode.NOT_FOUND, client.get, agent, missing, mentions=[missing])
    rejects(INVALID, client.get, agent, "12345", mentions=["'12345'", "UUID"])
    rejects(INVALID, client.get, agent, "", mentions=["UUID"])


def test_list_pages_newest_first(client, new_agent, facts):
    agent = new_agent()
    base = datetime(2025, 1, 1, tzinfo=UTC)
    order = list(range(7))
    random.Random(7).shuffle(order)  # stored out of time order
    ids_by_hour = {}
    for hour in order:
        r = client.store(agent, facts[hour], created_at=base + timedelta(hours=hour))
        ids_by_hour[hour] = r.memory.id
    newest_first = [ids_by_hour[h] for h in sorted(ids_by_hour, reverse=True)]

    pages, token = [], ""
    while True:
        page = client.list(agent, page_size=3, page_token=token)
        assert page.total_size == 7
        pages.append([m.id for m in page.memories])
        token = page.next_page_token
        if not token:
            break
        assert len(pages) < 5, "paging does not end"
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [i for p in pages for i in p] == newest_first


def test_list_pages_through_memories_created_at_the_same_instant(client, new_agent, facts):
    agent = new_agent()
    when = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)
    ids = {client.store(agent, t, created_at=when).memory.id for t in facts[10:15]}
    seen = [m.id for m in client.list_all(agent, page_size=2)]
    assert sorted(seen) == sorted(ids)  # each exactly once


def test_list_default_page_and_category_filter(client, new_agent, seed):
    agent = new_agent()
    seed(agent, ["The user prefers tea over coffee."], category=pb.CATEGORY_PREFERENCE)
    facts = seed(
        agent,
        ["Bob's birthday is on the 14th of March.", "The data warehouse is Snowflake."],
        category=pb.CATEGORY_FACT,
    )
    everything = client.list(agent)
    assert everything.total_size == 3
    assert len(everything.memories) == 3
    assert not everything.next_page_token
    only = client.list(agent, categories=[pb.CATEGORY_FACT])
    assert only.total_size == 2
    assert {m.id for m in only.memories} == {m.id for m in facts}


def _token(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("kw", "mentions"),
    [
        pytest.param({"page_size": 501}, ["501", "500", "max_page_size"], id="page-size"),
        pytest.param({"page_token": "garbage!"}, ["page_token"], id="not-base64"),
        pytest.param({"page_token": _token([1, 2, 3])}, ["page_token"], id="wrong-shape"),
        pytest.param({"page_token": _token("x")}, ["page_token"], id="wrong-type"),
        pytest.param({"categories": [77]}, ["categories", "77"], id="unknown-category"),
        pytest.param({"scopes": ["no spaces"]}, ["scope"], id="bad-scope"),
    ],
)
def test_bad_list_is_refused(client, new_agent, rejects, kw, mentions):
    rejects(INVALID, client.list, new_agent(), mentions=mentions, **kw)


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(_token([1e400, str(uuid.uuid4())]), id="infinite-time"),
        pytest.param(_token([10**20, str(uuid.uuid4())]), id="time-out-of-range"),
    ],
)
def test_forged_page_token_is_invalid_argument(client, new_agent, rejects, token):
    # A page token is caller input: any token not issued by List is INVALID_ARGUMENT.
    rejects(INVALID, client.list, new_agent(), page_token=token, mentions=["page_token"])


def test_stats_counts_what_the_agent_can_read(client, new_agent):
    agent = new_agent()
    client.store(agent, "The user prefers light mode.", category=pb.CATEGORY_PREFERENCE)
    client.store(agent, "The staging cluster lives in eu-west-1.", category=pb.CATEGORY_FACT)
    gone = client.store(agent, "Alice is the tech lead.", category=pb.CATEGORY_ENTITY)
    s = client.stats(agent)
    assert s.total == 3
    assert dict(s.by_scope) == {f"agent:{agent}": 3}
    assert dict(s.by_category) == {
        "CATEGORY_PREFERENCE": 1,
        "CATEGORY_FACT": 1,
        "CATEGORY_ENTITY": 1,
    }
    assert s.expired_pending == 0
    assert s.embedding_model
    assert s.embedding_dim > 0
    assert s.index_bytes > 0
    assert s.uptime_seconds > 0
    assert s.version
    assert s.store_rows >= 3

    client.forget(agent, id=gone.memory.id)
    after = client.stats(agent)
    assert after.total == 2
    assert "CATEGORY_ENTITY" not in after.by_category
    assert after.store_rows == s.store_rows - 1


def test_stats_of_a_new_agent_is_empty(client, new_agent):
    s = client.stats(new_agent())
    assert s.total == 0
    assert not s.by_scope
    assert not s.by_category
