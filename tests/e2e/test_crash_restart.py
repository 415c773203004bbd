"""Durability: what the daemon acknowledged survives kill -9, and what it forgot stays
forgotten after a restart on the same data dir."""

from __future__ import annotations

import asyncio

import pytest
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb

pytestmark = pytest.mark.e2e

# Distinct memories (no two are near duplicates), so every store is CREATED.
TEXTS = (
    "The user prefers dark mode in the code editor.",
    "Our production database runs PostgreSQL 16.",
    "The team meets every Monday at 10am for planning.",
    "Alice is the tech lead of the payments squad.",
    "The user is allergic to peanuts.",
    "Deployments happen through GitHub Actions on merge to main.",
    "The office wifi password rotates every quarter.",
    "Bob's birthday is on the 14th of March.",
    "The company was founded in Lisbon in 2015.",
    "We decided to drop support for Python 3.9.",
    "The user drinks green tea without sugar.",
    "Invoices are sent on the first business day of the month.",
    "The staging cluster lives in eu-west-1.",
    "Carol owns the mobile app release process.",
    "The user's cat is called Miso.",
    "Error budgets are reviewed in the monthly SRE sync.",
    "The marketing site is built with Astro.",
    "The user runs a half marathon every October.",
    "Our API rate limit is 600 requests per minute per key.",
    "The user speaks Portuguese and Japanese.",
    "Backups are kept for thirty days in cold storage.",
    "The design system uses the Inter typeface.",
    "Dave prefers code reviews over pair programming.",
    "The quarterly offsite will be held in Porto.",
    "Support tickets older than a week escalate automatically.",
    "The user's favourite film is Spirited Away.",
    "We chose Rust for the ingestion service.",
    "The data warehouse is Snowflake.",
    "Eve is on parental leave until September.",
    "The user commutes by bicycle.",
    "Feature flags are managed with LaunchDarkly.",
    "The user is learning to play the cello.",
    "Security patches must ship within 48 hours.",
    "The analytics dashboard refreshes every hour.",
    "Frank handles vendor contracts and procurement.",
    "The user keeps a vegetarian diet.",
    "The legacy billing system is written in COBOL.",
    "On-call rotations last one week each.",
    "The user lives in a flat near the river.",
    "Customer churn dropped by four percent last quarter.",
    "The search service uses Elasticsearch 8.",
    "Grace maintains the internal documentation wiki.",
    "The user dislikes phone calls and prefers chat.",
    "Our logo was redesigned last spring.",
    "The iOS app targets iOS 17 and newer.",
    "Henry is allergic to cats.",
    "The user plans to visit Kyoto next April.",
    "All secrets are stored in HashiCorp Vault.",
    "The user's laptop is a ThinkPad X1 Carbon.",
    "Weekly metrics are emailed on Friday afternoons.",
    "The load balancer terminates TLS 1.3 only.",
    "Ivy wrote the onboarding checklist for new hires.",
    "The user enjoys hiking in the Alps.",
    "We use Terraform to manage cloud infrastructure.",
)
N = 50
# What a memory is, as opposed to how often it was read (access tracking changes on
# every Recall).
CONTENT_FIELDS = (
    "id",
    "agent_id",
    "scope",
    "text",
    "summary",
    "category",
    "importance",
    "metadata",
    "created_at",
    "updated_at",
    "expires_at",
)
SEQUENTIAL = 20


def _content(m: pb.Memory) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in CONTENT_FIELDS:
        value = getattr(m, name)
        if name == "metadata":
            value = dict(value)
        elif name.endswith("_at"):
            value = value.ToJsonString() if m.HasField(name) else None
        out[name] = value
    return out


def _absent(client: MemoryClient, agent: str, memory: pb.Memory) -> None:
    with pytest.raises(MemorydError) as caught:
        client.get(agent, memory.id)
    assert caught.value.code.name == "NOT_FOUND"
    assert memory.id not in {m.id for m in client.list_all(agent)}
    assert memory.id not in {h.memory.id for h in client.recall(agent, memory.text).results}


async def test_acknowledged_writes_survive_kill_9(make_daemon, new_agent):
    daemon = make_daemon().start()
    agent = new_agent()
    kept_texts, doomed_texts = TEXTS[:N], TEXTS[N : N + 3]
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
    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        for memory in stored.values():
            assert _content(c.get(agent, memory.id)) == _content(memory)
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
        assert _content(again.memory) == _content(stored[again.duplicate_of])
        replay = c.store(agent, kept_texts[3], idempotency_key="seq-3", metadata={"n": "3"})
        assert _content(replay.memory) == _content(stored[replay.memory.id])
        assert replay.memory.text == kept_texts[3]
        assert c.stats(agent).total == N

        # Forget one more, then a clean shutdown (SIGTERM, exit 0) and another start:
        # both generations of deletes stay deleted.
        last = stored.pop(replay.memory.id)
        assert list(c.forget(agent, query=last.text).deleted_ids) == [last.id]
        doomed.append(last)
    assert daemon.stop() == 0
    daemon.start()
    with MemoryClient(daemon.address, retries=0, timeout=30) as c:
        for memory in doomed:
            _absent(c, agent, memory)
        assert {m.id for m in c.list_all(agent)} == set(stored)
        assert c.stats(agent).total == N - 1
