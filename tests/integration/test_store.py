"""Store: what is written, what is refused (and then nothing is written), duplicates,
idempotency keys."""

from __future__ import annotations

import asyncio
import time
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from memoryd_client import AsyncMemoryClient, MemoryClient, pb

pytestmark = pytest.mark.integration

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def test_store_returns_the_new_memory_and_get_reads_it_back(client, new_agent, content):
    agent = new_agent()
    r = client.store(
        agent,
        "  The user prefers dark mode in the code editor.\r\n",
        metadata={"source": "chat", "turn": "12"},
    )
    assert r.outcome == pb.STORE_OUTCOME_CREATED
    assert not r.duplicate_of
    m = r.memory
    assert str(uuid.UUID(m.id)) == m.id
    assert m.agent_id == agent
    assert m.scope == f"agent:{agent}"
    assert m.text == "The user prefers dark mode in the code editor."
    assert m.summary
    assert m.category == pb.CATEGORY_PREFERENCE  # detected from the text
    assert m.importance == pytest.approx(0.7)  # the documented default
    assert dict(m.metadata) == {"source": "chat", "turn": "12"}
    assert m.HasField("created_at") and m.HasField("updated_at")
    assert not m.HasField("expires_at")
    assert content(client.get(agent, m.id)) == content(m)


def test_store_keeps_explicit_category_importance_and_times(client, new_agent):
    agent = new_agent()
    created = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    expires = datetime.now(UTC) + timedelta(days=30)
    r = client.store(
        agent,
        "Our production database runs PostgreSQL 16.",
        category=pb.CATEGORY_DECISION,
        importance=0.25,
        created_at=created,
        expires_at=expires,
    )
    m = client.get(agent, r.memory.id)
    assert m.category == pb.CATEGORY_DECISION
    assert m.importance == pytest.approx(0.25)
    assert m.created_at.ToDatetime(tzinfo=UTC) == created
    assert m.expires_at.ToDatetime(tzinfo=UTC) == expires


@pytest.mark.parametrize(
    ("kw", "mentions"),
    [
        pytest.param({"text": ""}, ["text", "empty"], id="empty-text"),
        pytest.param({"text": " \n\t\r\n  "}, ["text", "empty"], id="whitespace-text"),
        pytest.param(
            {"text": "x" * 10_001},
            ["10001", "10000", "store.max_chars"],
            id="text-over-limit",
        ),
        pytest.param(
            {"text": "A valid memory.", "importance": 1.5},
            ["importance", "between 0 and 1", "1.5"],
            id="importance-above-1",
        ),
        pytest.param(
            {"text": "A valid memory.", "importance": -0.1},
            ["importance", "between 0 and 1"],
            id="importance-below-0",
        ),
        pytest.param(
            {"text": "A valid memory.", "importance": float("nan")},
            ["importance", "nan"],
            id="importance-nan",
        ),
        pytest.param(
            {"text": "A valid memory.", "category": 42},
            ["category", "42", "not a known Category"],
            id="unknown-category",
        ),
        pytest.param(
            {"text": "A valid memory.", "scope": "has spaces"},
            ["scope", "has spaces"],
            id="malformed-scope",
        ),
        pytest.param(
            {"text": "A valid memory.", "metadata": {f"k{i}": "v" for i in range(65)}},
            ["metadata", "65", "store.max_metadata_entries"],
            id="too-much-metadata",
        ),
        pytest.param(
            {"text": "A valid memory.", "metadata": {"note": "v" * 2049}},
            ["note", "2049", "store.max_metadata_value_chars"],
            id="metadata-value-too-long",
        ),
        pytest.param(
            {"text": "A valid memory.", "idempotency_key": "k" * 129},
            ["idempotency_key", "129", "store.max_idempotency_key_chars"],
            id="idempotency-key-too-long",
        ),
        pytest.param(
            {"text": "A valid memory.", "expires_at": datetime(2020, 1, 1, tzinfo=UTC)},
            ["expires_at", "past"],
            id="expiry-in-the-past",
        ),
    ],
)
def test_invalid_store_is_refused_and_writes_nothing(
    client, new_agent, rejects, snapshot, kw, mentions
):
    agent = new_agent()
    client.store(agent, "The user is allergic to peanuts.")
    before = snapshot(agent)
    text = kw.pop("text")
    rejects(INVALID, client.store, agent, text, mentions=mentions, **kw)
    assert snapshot(agent) == before


@pytest.mark.parametrize(
    ("agent_id", "mentions"),
    [("", ["agent_id", "required"]), ("no spaces", ["agent_id", "A-Z a-z 0-9"])],
)
def test_store_with_a_bad_agent_id_is_refused(client, rejects, agent_id, mentions):
    rows = client.stats("observer").store_rows
    rejects(INVALID, client.store, agent_id, "The user is allergic to peanuts.", mentions=mentions)
    assert client.stats("observer").store_rows == rows


@pytest.mark.parametrize(
    ("field", "value", "mentions"),
    [
        ("created_at", Timestamp(seconds=1, nanos=-5), ["created_at", "nanos"]),
        ("created_at", Timestamp(seconds=10**15), ["created_at", "out of range"]),
        ("expires_at", Timestamp(seconds=10**15), ["expires_at", "out of range"]),
    ],
)
def test_store_with_a_malformed_timestamp_is_refused(
    client, stub, new_agent, raw_rejects, snapshot, field, value, mentions
):
    agent = new_agent()
    before = snapshot(agent)
    request = pb.StoreRequest(agent_id=agent, text="The user commutes by bicycle.")
    getattr(request, field).CopyFrom(value)
    raw_rejects(INVALID, stub.Store, request, mentions=mentions)
    assert snapshot(agent) == before


def test_store_into_a_scope_the_agent_may_not_write_is_denied(client, new_agent, rejects, snapshot):
    owner, intruder = new_agent(), new_agent()
    before = snapshot(owner)
    for scope in (f"agent:{owner}", "global"):
        rejects(
            grpc.StatusCode.PERMISSION_DENIED,
            client.store,
            intruder,
            "The user is allergic to peanuts.",
            scope=scope,
            mentions=[scope, intruder],
        )
    assert snapshot(owner) == before
    assert client.stats(intruder).total == 0


ORIGINAL = "Café crème is the user's usual order.\nNo sugar, please."


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(unicodedata.normalize("NFD", ORIGINAL), id="nfd"),
        pytest.param(ORIGINAL.replace("\n", "\r\n"), id="crlf"),
        pytest.param(ORIGINAL.replace("\n", "\r"), id="cr"),
        pytest.param(f"\n\t  {ORIGINAL}   \n\n", id="outer-whitespace"),
        pytest.param(ORIGINAL.replace("\n", "   \n") + "  ", id="trailing-spaces"),
    ],
)
def test_exact_duplicate_returns_the_existing_memory(client, new_agent, content, variant):
    agent = new_agent()
    assert unicodedata.is_normalized("NFC", ORIGINAL)
    first = client.store(agent, ORIGINAL)
    assert first.outcome == pb.STORE_OUTCOME_CREATED
    again = client.store(agent, variant, importance=0.1, metadata={"other": "meta"})
    assert again.outcome == pb.STORE_OUTCOME_DUPLICATE
    assert again.duplicate_of == first.memory.id
    assert again.duplicate_score == pytest.approx(1.0)
    assert content(again.memory) == content(first.memory)  # the existing one, untouched
    assert client.stats(agent).total == 1


def test_near_duplicate_returns_the_existing_memory(client, new_agent):
    agent = new_agent()
    first = client.store(agent, "The user prefers dark mode in every editor.")
    again = client.store(agent, "the user prefers dark mode in every editor")
    assert again.outcome == pb.STORE_OUTCOME_DUPLICATE
    assert again.duplicate_of == first.memory.id
    assert 0.95 <= again.duplicate_score < 1.0
    assert again.memory.text == "The user prefers dark mode in every editor."
    assert client.stats(agent).total == 1


def test_related_but_different_memories_are_both_kept(client, new_agent):
    agent = new_agent()
    green = client.store(agent, "The user's favourite colour is green.")
    blue = client.store(agent, "The user's favourite colour is blue.")
    assert green.outcome == blue.outcome == pb.STORE_OUTCOME_CREATED
    assert green.memory.id != blue.memory.id
    assert client.stats(agent).total == 2


def test_duplicates_are_per_scope_not_across_agents(client, new_agent):
    a, b = new_agent(), new_agent()
    text = "The user's cat is called Miso."
    ra, rb = client.store(a, text), client.store(b, text)
    assert ra.outcome == rb.outcome == pb.STORE_OUTCOME_CREATED
    assert ra.memory.id != rb.memory.id
    assert rb.memory.agent_id == b


async def test_concurrent_identical_stores_make_one_memory(address, new_agent):
    agent = new_agent()
    text = "The user runs a half marathon every October."
    async with AsyncMemoryClient(address, timeout=30.0, retries=0) as c:
        results = await asyncio.gather(*(c.store(agent, text) for _ in range(8)))
        created = [r for r in results if r.outcome == pb.STORE_OUTCOME_CREATED]
        assert len(created) == 1
        assert {r.memory.id for r in results} == {created[0].memory.id}
        dups = [r for r in results if r.outcome == pb.STORE_OUTCOME_DUPLICATE]
        assert all(r.duplicate_of == created[0].memory.id for r in dups)
        assert (await c.stats(agent)).total == 1


def test_repeated_idempotency_key_returns_the_first_result(client, new_agent, content):
    agent = new_agent()
    text = "We decided to drop support for Python 3.9."
    first = client.store(agent, text, idempotency_key="req-1", importance=0.9)
    again = client.store(agent, text, idempotency_key="req-1", importance=0.9)
    assert first.outcome == again.outcome == pb.STORE_OUTCOME_CREATED
    assert content(again.memory) == content(first.memory)
    assert client.stats(agent).total == 1


def test_idempotency_key_reused_for_other_content_is_refused(client, new_agent, rejects, snapshot):
    agent = new_agent()
    first = client.store(agent, "The data warehouse is Snowflake.", idempotency_key="req-7")
    before = snapshot(agent)
    rejects(
        INVALID,
        client.store,
        agent,
        "The search service uses Elasticsearch 8.",
        idempotency_key="req-7",
        mentions=["idempotency_key", "req-7", first.memory.id, "new key"],
    )
    assert snapshot(agent) == before


async def test_concurrent_repeats_of_an_idempotency_key_store_once(address, new_agent):
    agent = new_agent()
    async with AsyncMemoryClient(address, timeout=30.0, retries=0) as c:
        results = await asyncio.gather(
            *(
                c.store(
                    agent,
                    "Code freeze begins two weeks before each release.",
                    idempotency_key="retry-me",
                )
                for _ in range(6)
            )
        )
        assert len({r.memory.id for r in results}) == 1
        assert (await c.stats(agent)).total == 1


def test_a_key_answered_duplicate_lapses_after_idempotency_days(start_daemon, new_agent, rejects):
    """Within store.idempotency_days a key answered DUPLICATE replays that answer and
    refuses other text; after it the key is free: the Store is judged afresh. A key that
    created a memory keeps holding it."""
    window = 2.0  # seconds
    daemon = start_daemon(env={"MEMORYD_STORE__IDEMPOTENCY_DAYS": str(window / 86400)})
    agent = new_agent()
    text = "The staging cluster runs in eu-west-1."
    other = "The production cluster runs in us-east-2."
    with MemoryClient(daemon.address, timeout=30.0) as c:
        first = c.store(agent, text, idempotency_key="made")
        dup = c.store(agent, text, idempotency_key="dup")
        assert dup.outcome == pb.STORE_OUTCOME_DUPLICATE
        assert dup.memory.id == first.memory.id
        assert c.store(agent, text, idempotency_key="dup").outcome == pb.STORE_OUTCOME_DUPLICATE
        rejects(INVALID, c.store, agent, other, idempotency_key="dup", mentions=["'dup'"])
        time.sleep(window + 0.5)
        taken = c.store(agent, other, idempotency_key="dup")
        assert taken.outcome == pb.STORE_OUTCOME_CREATED
        assert taken.memory.text == other
        rejects(INVALID, c.store, agent, other, idempotency_key="made", mentions=["'made'"])
        assert c.stats(agent).total == 2


def test_idempotency_keys_belong_to_one_agent(client, new_agent):
    a, b = new_agent(), new_agent()
    text = "The user keeps a vegetarian diet."
    ra = client.store(a, text, idempotency_key="shared-key")
    rb = client.store(b, text, idempotency_key="shared-key")
    assert rb.outcome == pb.STORE_OUTCOME_CREATED
    assert rb.memory.id != ra.memory.id
    assert rb.memory.agent_id == b
