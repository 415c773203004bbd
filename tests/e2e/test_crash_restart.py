"""Durability: what the daemon acknowledged survives kill -9, and what it forgot stays
forgotten after a restart on the same data dir."""

from __future__ import annotations

import asyncio
import time

import pytest
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb
from memoryd_testing.memories import FACTS, memory_content

pytestmark = pytest.mark.e2e

N = 50
SEQUENTIAL = 20


def _absent(client: MemoryClient, agent: str, memory: pb.Memory) -> None:
    with pytest.raises(MemorydError) as caught:
        client.get(agent, memory.id)
    assert caught.value.code.name == "NOT_FOUND"
    assert memory.id not in {m.id for m in client.list_all(agent)}
    assert memory.id not in {h.memory.id for h in client.recall(agent, memory.text).results}


async def test_acknowledged_writes_survive_kill_9(make_daemon, new_agent):
    daemon = make_daemon().start()
    agent = new_agent()
    kept_texts, doomed_texts = FACTS[:N], FACTS[N : N + 3]
    stored: dict[str, pb.Memory] = {}

    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        for i, text in enumerate(kept_texts[:SEQUENTIAL]):
            r = c.store(agent, text, idempotency_key=f"seq-{i}", metadata={"n": str(i)})
            assert r.outcome == pb.STORE_OUTCOME_CREATED
            stored[r.memory.id] = r.memory
        doomed = [c.store(agent, t).memory for t in doomed_texts]
        target = next(iter(stored.values()))
        updated = c.update(
            agent, target.id, text="The user switched to light mode.", importance=0.9
        ).memory
        stored[updated.id] = updated
        assert list(c.forget(agent, id=doomed[0].id).deleted_ids) == [doomed[0].id]
        assert list(c.forget(agent, id=doomed[1].id).deleted_ids) == [doomed[1].id]
        assert list(c.forget(agent, query=doomed[2].text).deleted_ids) == [doomed[2].id]

    # The last replies come from concurrent stores; kill -9 as soon as they are in.
    async with AsyncMemoryClient(daemon.address, retries=0, timeout=30) as ac:
        results = await asyncio.gather(*(ac.store(agent, t) for t in kept_texts[SEQUENTIAL:]))
        daemon.kill()
    for r in results:
        assert r.outcome == pb.STORE_OUTCOME_CREATED
        stored[r.memory.id] = r.memory
    assert len(stored) == N

    daemon.start()
    # No clean shutdown, so no map vouches for the token file: it was written afresh.
    assert "token file rewritten (no map" in daemon.log_text()
    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        for memory in stored.values():
            assert memory_content(c.get(agent, memory.id)) == memory_content(memory)
        assert c.list(agent).total_size == N
        assert c.stats(agent).total == N
        for memory in doomed:
            _absent(c, agent, memory)

        hits = c.recall(agent, "Has the user switched to light mode?").results
        assert hits[0].memory.id == target.id
        assert hits[0].memory.text == "The user switched to light mode."
        top = c.recall(agent, "Who leads the payments squad?").results[0]
        assert top.memory.text == "Alice is the tech lead of the payments squad."

        # The dedupe and idempotency indexes came back too.
        again = c.store(agent, kept_texts[5])
        assert again.outcome == pb.STORE_OUTCOME_DUPLICATE
        assert memory_content(again.memory) == memory_content(stored[again.duplicate_of])
        replay = c.store(agent, kept_texts[3], idempotency_key="seq-3", metadata={"n": "3"})
        assert memory_content(replay.memory) == memory_content(stored[replay.memory.id])
        assert replay.memory.text == kept_texts[3]
        assert c.stats(agent).total == N

        # Forget one more, then a clean shutdown (SIGTERM, exit 0) and another start:
        # both generations of deletes stay deleted.
        last = stored.pop(replay.memory.id)
        assert list(c.forget(agent, query=last.text).deleted_ids) == [last.id]
        doomed.append(last)
    assert daemon.stop() == 0
    daemon.start()
    # After a clean shutdown the token file is reused (the store's token vectors unread),
    # and the late-interaction rerank still finds what it found before.
    assert "token file reused" in daemon.log_text()
    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        hits = c.recall(agent, "Has the user switched to light mode?").results
        assert hits[0].memory.id == target.id
        for memory in doomed:
            _absent(c, agent, memory)
        assert {m.id for m in c.list_all(agent)} == set(stored)
        assert c.stats(agent).total == N - 1


SAVED_WHILE_SERVING = "saved the token file's map while serving"


def test_a_kill_9_restart_reads_from_the_table_only_what_changed_since_the_saved_map(
    make_daemon, new_agent
):
    """The daemon saves its token file's map while serving (the upkeep, ~30 s after a
    start that found none); a kill -9 after more writes then costs the restart only those
    rows' token vectors from the table, not the whole column (minutes at a million
    memories), and every Recall reranks with the right ones."""
    daemon = make_daemon().start()
    agent = new_agent()
    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        stored = [c.store(agent, text).memory for text in FACTS[:20]]
    deadline = time.monotonic() + 90
    while SAVED_WHILE_SERVING not in daemon.log_text():
        assert time.monotonic() < deadline, daemon.log_tail()
        time.sleep(0.5)
    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        later = [c.store(agent, text).memory for text in FACTS[20:24]]
        target = stored[3]
        updated = c.update(agent, target.id, text="The user now keeps goats on a farm.").memory
        forgotten = stored[5]
        assert list(c.forget(agent, id=forgotten.id).deleted_ids) == [forgotten.id]
    daemon.kill()

    daemon.start()
    text = daemon.log_text()
    assert "token file reused (its map of table version" in text, daemon.log_tail()
    assert "5 rows read from the table" in text, daemon.log_tail()  # 4 new, 1 updated
    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        hits = c.recall(agent, "What animals does the user keep on the farm?").results
        assert hits[0].memory.id == updated.id
        assert hits[0].memory.text == "The user now keeps goats on a farm."
        for memory in later + stored[6:10]:
            assert c.recall(agent, memory.text).results[0].memory.id == memory.id
        _absent(c, agent, forgotten)
        assert c.stats(agent).total == 23
    assert "does not hold memory" not in daemon.log_text()  # no record read was another's
