"""Lifecycle: TTL classes, the merge policy (link, supersede), the conflict log, export and
import, summaries in Recall."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from memoryd.core.errors import InvalidArgument, PermissionDenied
from memoryd.core.lifecycle import MergeSettings
from memoryd.core.policy import AccessPolicy
from memoryd.core.records import Category, Memory, StoreOutcome
from memoryd.core.service import MemoryService, NewMemory, RecallQuery, ServiceLimits
from memoryd.storage.conflict_log import JsonlConflictLog

from ..conftest import prefer


async def put(svc: MemoryService, agent: str, text: str, **kw: object):  # type: ignore[no-untyped-def]
    return await svc.store_memory(NewMemory(agent_id=agent, text=text, **kw))  # type: ignore[arg-type]


async def tea_then_coffee(service: MemoryService) -> tuple[Memory, Memory]:
    """Agent a prefers tea in the morning, then coffee: the pair the merge policies act on."""
    tea = await prefer(service, "tea")
    coffee = await prefer(service, "coffee")
    return tea.memory, coffee.memory


async def test_ttl_classes_set_the_expiry(service: MemoryService, clock) -> None:  # type: ignore[no-untyped-def]
    s = (await put(service, "a", "parking spot today is B12", ttl="session")).memory
    assert s.expires_at == clock.now + timedelta(hours=24)
    short = (await put(service, "a", "the sprint ends next friday", ttl="short")).memory
    assert short.expires_at == clock.now + timedelta(days=14)
    forever = (await put(service, "a", "my birthday is in may", ttl="permanent")).memory
    assert forever.expires_at is None
    with pytest.raises(InvalidArgument, match="not both"):
        await put(service, "a", "x y z", ttl="short", expires_at=clock.now + timedelta(days=1))
    with pytest.raises(InvalidArgument, match="ttl"):
        await put(service, "a", "x y z", ttl="forever")
    clock.advance(days=2)
    assert [m.id for m in service.list("a").memories] != [] and s.id not in {
        m.id for m in service.list("a").memories
    }


async def test_merge_band_links_both_ways_by_default(service: MemoryService) -> None:
    tea, coffee = await tea_then_coffee(service)
    assert coffee.related_ids == (tea.id,)
    assert service.get("a", tea.id).related_ids == (coffee.id,)
    # Another category is not merged.
    fact = (await put(service, "a", "I prefer juice in the morning", category=Category.FACT)).memory
    assert fact.related_ids == ()


async def test_supersede_recalls_only_the_latest_and_keeps_history(
    service: MemoryService,
) -> None:
    service.limits = replace(service.limits, merge=MergeSettings(policy="supersede"))
    tea, coffee = await tea_then_coffee(service)
    assert coffee.supersedes == tea.id
    old = service.get("a", tea.id)
    assert old.superseded_by == coffee.id  # history is kept and readable
    hits = await service.recall(RecallQuery(agent_id="a", query="what do I prefer in the morning"))
    assert [h.memory.id for h in hits] == [coffee.id]
    # Saying the old thing again makes it current again instead of being a "duplicate".
    again = await put(service, "a", "I prefer tea in the morning", category=Category.PREFERENCE)
    assert again.outcome == StoreOutcome.CREATED and again.memory.supersedes == coffee.id
    hits = await service.recall(RecallQuery(agent_id="a", query="what do I prefer in the morning"))
    assert [h.memory.id for h in hits] == [again.memory.id]


@pytest.fixture
def shared(open_repository, embedder, clock, tmp_path: Path) -> MemoryService:  # type: ignore[no-untyped-def]
    policy = AccessPolicy(
        default_read=("agent:{agent_id}", "workspace:team"),
        default_write=("agent:{agent_id}", "workspace:team"),
    )
    return MemoryService(
        open_repository(), embedder, policy, ServiceLimits(), clock,
        conflicts=JsonlConflictLog(tmp_path / "conflicts.jsonl"),
    )  # fmt: skip


async def test_conflicting_decisions_of_two_agents_are_logged(
    shared: MemoryService, tmp_path: Path
) -> None:
    d1 = "we decided to deploy the api on kubernetes next quarter"
    d2 = "we decided to deploy the api on nomad next quarter"
    first = (
        await put(shared, "alice", d1, scope="workspace:team", category=Category.DECISION)
    ).memory
    second = (
        await put(shared, "bob", d2, scope="workspace:team", category=Category.DECISION)
    ).memory
    conflicts = shared.list_conflicts("bob")
    assert len(conflicts) == 1
    c = conflicts[0]
    assert (c.new_id, c.existing_id, c.new_agent_id, c.existing_agent_id) == (
        second.id, first.id, "bob", "alice",
    )  # fmt: skip
    assert 0.7 <= c.score < 0.95 and c.merge_decision == "linked"
    assert shared.list_conflicts("alice") == conflicts
    # An agent that cannot read the shared scope does not see the conflict.
    private_only = MemoryService(
        shared.store, shared.embedder, AccessPolicy(), conflicts=shared.conflicts
    )
    assert private_only.list_conflicts("bob") == []
    line = (tmp_path / "conflicts.jsonl").read_text().strip()
    assert '"new_agent_id": "bob"' in line and '"merge_decision": "linked"' in line
    # The log survives a restart of the log.
    assert JsonlConflictLog(tmp_path / "conflicts.jsonl").recent(5)[0].new_id == second.id
    # Same agent twice is no conflict.
    await put(
        shared,
        "bob",
        "we decided to deploy the api on nomad in q3",
        scope="workspace:team",
        category=Category.DECISION,
    )
    assert len(shared.list_conflicts("bob")) == 1


async def test_export_then_import_round_trips_into_another_store(
    service: MemoryService,
    embedder,
    clock,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    for i, text in enumerate(["alpha bravo", "charlie delta", "echo foxtrot"]):
        await put(service, "a", text, metadata={"i": str(i)}, importance=0.1 * (i + 1))
    exported = service.export("a")
    assert len(exported) == 3
    repo = _fresh(tmp_path, embedder)
    other = MemoryService(repo, embedder, AccessPolicy(), clock=clock)
    results = [await other.import_memory("a", m) for m in exported]
    assert results == [True, True, True]
    assert [await other.import_memory("a", m) for m in exported] == [False, False, False]
    for m in exported:
        got = other.get("a", m.id)
        assert (got.text, got.metadata, got.importance, got.created_at) == (
            m.text, m.metadata, m.importance, m.created_at,
        )  # fmt: skip
    hits = await other.recall(RecallQuery(agent_id="a", query="charlie delta"))
    assert hits[0].memory.text == "charlie delta"
    with pytest.raises(PermissionDenied):
        await other.import_memory("b", exported[0])
    repo.close()


def _fresh(tmp_path: Path, embedder):  # type: ignore[no-untyped-def]
    from memoryd.storage.lance_store import LanceStore
    from memoryd.storage.repository import Repository

    repo = Repository(
        LanceStore(
            str(tmp_path / "other"), table="m", model_name=embedder.model_name, dim=embedder.dim
        )
    )
    repo.open()
    return repo


async def test_links_and_history_are_derived_again_after_restart(
    service: MemoryService,
    open_repository,  # type: ignore[no-untyped-def]
) -> None:
    service.limits = replace(service.limits, merge=MergeSettings(policy="supersede"))
    tea, coffee = await tea_then_coffee(service)
    note = (
        await put(
            service, "a", "we decided to meet in the morning at nine", category=Category.DECISION
        )
    ).memory
    linked = (
        await put(
            service, "a", "we decided to meet in the morning at ten", category=Category.DECISION
        )
    ).memory
    service.store.close()  # type: ignore[attr-defined]
    repo = open_repository()
    assert repo.get(tea.id).superseded_by == coffee.id
    assert repo.get(note.id).related_ids == (linked.id,) and repo.get(linked.id).related_ids == (
        note.id,
    )
    reopened = MemoryService(repo, service.embedder, service.policy, clock=service.clock)
    hits = await reopened.recall(RecallQuery(agent_id="a", query="what do I prefer in the morning"))
    assert tea.id not in [h.memory.id for h in hits]
    # Forgetting the newer memory brings the older one back, and drops the link.
    await reopened.forget_id("a", coffee.id)
    assert reopened.get("a", tea.id).superseded_by == ""
    hits = await reopened.recall(RecallQuery(agent_id="a", query="what do I prefer in the morning"))
    assert hits[0].memory.id == tea.id
    await reopened.forget_id("a", linked.id)
    assert reopened.get("a", note.id).related_ids == ()


async def test_an_agents_memories_share_one_copy_of_its_id_and_scope(
    service: MemoryService,
    open_repository,  # type: ignore[no-untyped-def]
) -> None:
    # The daemon holds every memory's record: the agent's id, its scope and the language,
    # the same in each, are one string each, whether stored now or read back at a start
    # (one per memory was ~170 B a memory at 100k).
    texts = ["the lake trip is in june", "my sister likes rowing", "we rent a cabin there"]
    made = [
        (await put(service, "".join(["agent-", "007"]), text)).memory  # a new str per request
        for text in texts
    ]
    for held in ([service.get("agent-007", m.id) for m in made], None):
        if held is None:
            service.store.close()  # type: ignore[attr-defined]
            repo = open_repository()
            held = [repo.get(m.id) for m in made]
        assert len({id(m.agent_id) for m in held}) == 1
        assert len({id(m.scope) for m in held}) == 1
        assert len({id(m.language) for m in held}) == 1
