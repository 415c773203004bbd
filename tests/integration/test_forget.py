"""Forget by id and by query, and that a forgotten memory never comes back."""

from __future__ import annotations

import time
import uuid

import grpc
import pytest
from memoryd_client import MemoryClient, pb

pytestmark = pytest.mark.integration

NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def test_forget_by_id_deletes_it_from_every_read(client, new_agent, seed, facts, rejects, content):
    agent = new_agent()
    memories = seed(agent, facts[:4])
    gone, kept = memories[1], [m for i, m in enumerate(memories) if i != 1]

    r = client.forget(agent, id=gone.id)
    assert list(r.deleted_ids) == [gone.id]
    assert not r.candidates

    rejects(NOT_FOUND, client.get, agent, gone.id, mentions=[gone.id])
    listed = client.list(agent)
    assert [m.id for m in listed.memories if m.id == gone.id] == []
    assert listed.total_size == 3
    hits = client.recall(agent, gone.text, limit=10).results
    assert gone.id not in {h.memory.id for h in hits}
    assert client.stats(agent).total == 3
    for m in kept:
        assert content(client.get(agent, m.id)) == content(m)
    # Gone for good: a second forget and an update find nothing either.
    rejects(NOT_FOUND, client.forget, agent, id=gone.id, mentions=[gone.id])
    rejects(NOT_FOUND, client.update, agent, gone.id, importance=0.1)


def test_forgotten_text_can_be_stored_again_as_a_new_memory(client, new_agent):
    agent = new_agent()
    first = client.store(agent, "The user's laptop is a ThinkPad X1 Carbon.")
    client.forget(agent, id=first.memory.id)
    again = client.store(agent, "The user's laptop is a ThinkPad X1 Carbon.")
    assert again.outcome == pb.STORE_OUTCOME_CREATED
    assert again.memory.id != first.memory.id


def test_forget_by_id_of_an_absent_memory_is_not_found(client, new_agent, rejects, snapshot):
    agent = new_agent()
    client.store(agent, "The user speaks Portuguese and Japanese.")
    before = snapshot(agent)
    missing = str(uuid.uuid4())
    rejects(NOT_FOUND, client.forget, agent, id=missing, mentions=[missing, "not found"])
    assert snapshot(agent) == before


def test_forget_by_malformed_id_is_refused(client, new_agent, rejects, snapshot):
    agent = new_agent()
    client.store(agent, "The user speaks Portuguese and Japanese.")
    before = snapshot(agent)
    rejects(INVALID, client.forget, agent, id="not-a-uuid", mentions=["not-a-uuid", "UUID"])
    assert snapshot(agent) == before


def test_forget_without_a_target_is_refused(client, stub, new_agent, raw_rejects):
    raw_rejects(
        INVALID,
        stub.Forget,
        pb.ForgetRequest(agent_id=new_agent()),
        mentions=["id", "query"],
    )


def test_forget_by_query_deletes_the_single_strong_match(client, new_agent, seed):
    agent = new_agent()
    green, blue, other = seed(
        agent,
        [
            "The user's favourite colour is green.",
            "The user's favourite colour is blue.",
            "Our API rate limit is 600 requests per minute per key.",
        ],
    )
    # blue matches too, but green leads it by more than forget.margin.
    r = client.forget(agent, query="The user's favourite colour is green.")
    assert list(r.deleted_ids) == [green.id]
    assert not r.candidates
    remaining = {m.id for m in client.list(agent).memories}
    assert remaining == {blue.id, other.id}


def test_forget_by_a_few_words_deletes_the_memory_alone_in_its_store(client, new_agent):
    """The README's "Try it": one memory, forgotten by two of its words."""
    agent = new_agent()
    kept = client.store(agent, "The user prefers dark mode in every editor").memory
    r = client.forget(agent, query="dark mode")
    assert list(r.deleted_ids) == [kept.id]
    assert client.list(agent).total_size == 0
    assert client.recall(agent, "dark mode").results == []


def test_forget_scores_as_recall_does(client, new_agent, seed):
    """Candidates carry the score Recall shows for the same query (not bare cosine)."""
    agent = new_agent()
    seed(agent, ["The user's favourite colour is green.", "The user's favourite colour is blue."])
    query = "the user's favourite colour"
    recalled = {h.memory.id: h.score for h in client.recall(agent, query, limit=10).results}
    r = client.forget(agent, query=query)
    assert {c.memory.id: c.score for c in r.candidates} == pytest.approx(recalled)


def test_forget_by_ambiguous_query_returns_candidates_and_deletes_nothing(
    client, new_agent, seed, snapshot
):
    agent = new_agent()
    green, blue, _ = seed(
        agent,
        [
            "The user's favourite colour is green.",
            "The user's favourite colour is blue.",
            "Our API rate limit is 600 requests per minute per key.",
        ],
    )
    before = snapshot(agent)
    r = client.forget(agent, query="the user's favourite colour")
    assert not r.deleted_ids
    # Both are strong (over forget.strong_score 0.5), neither leads by forget.margin.
    assert [c.memory.id for c in r.candidates][:2] in ([green.id, blue.id], [blue.id, green.id])
    assert all(c.score >= 0.5 for c in r.candidates[:2])
    assert abs(r.candidates[0].score - r.candidates[1].score) < 0.15
    assert snapshot(agent) == before


def test_forget_by_query_without_matches_deletes_nothing(client, new_agent, seed, facts, snapshot):
    agent = new_agent()
    seed(agent, facts[:5])
    before = snapshot(agent)
    r = client.forget(agent, query="the rules of competitive underwater hockey")
    assert not r.deleted_ids
    assert not r.candidates
    assert snapshot(agent) == before


@pytest.mark.parametrize(
    "query",
    ["forget my shoe size", "What is the user's favourite board game?", "golf handicap"],
)
def test_forget_about_nothing_stored_deletes_nothing(
    client, new_agent, seed, facts, snapshot, query
):
    agent = new_agent()
    seed(agent, facts[:20])
    before = snapshot(agent)
    r = client.forget(agent, query=query)
    assert not r.deleted_ids
    assert snapshot(agent) == before


def test_forget_by_empty_query_is_refused(client, new_agent, rejects):
    rejects(INVALID, client.forget, new_agent(), query="   ", mentions=["query", "empty"])


def test_a_forgotten_text_leaves_the_disk_within_storage_purge_every_seconds(start_daemon):
    """``storage.purge_every_seconds`` bounds how long a forgotten memory's text stays in
    the store's data files (a purge rewrites the files holding it; the first Forget after
    a start is purged at once, later ones once the interval has passed since the last
    purge): at 2 s, a second Forget's text is gone within seconds, where the default
    keeps it for the hour."""
    daemon = start_daemon(
        {
            "MEMORYD_STORAGE__PURGE_EVERY_SECONDS": "2",
            "MEMORYD_STORAGE__COMPACT_EVERY_WRITES": "2",
        }
    )
    table = daemon.data_dir / "lancedb" / "memories.lance"
    secrets = ["The alarm code is 4417.", "The safe code is 9052."]

    def on_disk(text: str) -> bool:
        return any(text.encode() in f.read_bytes() for f in table.rglob("*") if f.is_file())

    with MemoryClient(daemon.address, retries=0) as c:
        memories = [c.store("main", t).memory for t in [*secrets, "The user likes tea."]]
        time.sleep(3)  # idle: the compaction merges the three into one data file
        for secret, memory in zip(secrets, memories, strict=False):
            c.forget("main", id=memory.id)  # the file holds memories still kept
            deadline = time.monotonic() + 40
            while on_disk(secret) and time.monotonic() < deadline:
                time.sleep(0.25)
            assert not on_disk(secret), secret
        assert on_disk("The user likes tea.")
        assert [m.text for m in c.list_all("main")] == ["The user likes tea."]
