"""The recall pipeline's contract: hybrid legs, fusion, boosts, hard minimum, MMR, rerank
fallback, explain, and a text index that can never be stale."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pytest

from memoryd.core.errors import InvalidArgument
from memoryd.core.records import Memory
from memoryd.core.retrieval import Rerank, RetrievalConfig, Retriever
from memoryd.core.service import MemoryPatch, MemoryService, NewMemory, RecallQuery

FILLER = [
    "the team discussed the quarterly roadmap in the planning meeting",
    "the roadmap meeting moved to thursday afternoon",
    "planning notes for the quarterly roadmap review",
    "meeting summary about roadmap priorities and planning",
    "thursday planning meeting covered the roadmap",
]


async def put(service: MemoryService, text: str, agent: str = "a", **kw: object) -> Memory:
    r = await service.store_memory(NewMemory(agent_id=agent, text=text, **kw))  # type: ignore[arg-type]
    return r.memory


async def recall(service: MemoryService, query: str, **kw: object) -> list:  # type: ignore[type-arg]
    return await service.recall(RecallQuery(agent_id="a", query=query, **kw))  # type: ignore[arg-type]


async def test_tag_and_rare_term_queries_find_the_memory_carrying_them(
    service: MemoryService,
) -> None:
    for text in FILLER:
        await put(service, text)
    tagged = await put(service, "proj:atlas deadline is the end of march")
    hits = await recall(service, "proj:atlas", limit=3)
    assert hits[0].memory.id == tagged.id
    hits = await recall(service, "what is the atlas deadline", limit=3)
    assert hits[0].memory.id == tagged.id


async def test_each_leg_alone_and_fused(service: MemoryService) -> None:
    lexical = await put(service, "zebra crossing near the office entrance")
    await put(service, "the office entrance has a revolving door")
    only_bm25 = await recall(service, "zebra", options={"fusion": "bm25"}, explain=True)
    assert [h.memory.id for h in only_bm25] == [lexical.id]  # BM25 returns only term matches
    assert only_bm25[0].explain.bm25 > 0 and only_bm25[0].explain.vector_rank == -1
    only_vec = await recall(service, "office entrance", options={"fusion": "vector"}, explain=True)
    assert all(h.explain.bm25_rank == -1 for h in only_vec)
    fused = await recall(service, "zebra office entrance", explain=True)
    e = fused[0].explain
    assert fused[0].memory.id == lexical.id
    expected = 0.5 * max(e.vector, 0) + 0.5 * math.tanh(e.bm25 / 10.0)
    assert e.fused == pytest.approx(expected, rel=1e-5)
    assert e.after_importance == pytest.approx(e.after_recency * (0.7 + 0.3 * 0.7), rel=1e-5)
    assert fused[0].score == pytest.approx(e.final)


async def test_min_score_applies_to_the_score_the_caller_sees(
    service: MemoryService,
    clock,  # type: ignore[no-untyped-def]
) -> None:
    for i, text in enumerate(FILLER):
        await put(service, text, created_at=clock.now - timedelta(days=100 * i))
    strong_decay = {"decay_half_life_days": 10.0, "decay_floor": 0.1}
    everything = await recall(service, "roadmap planning meeting", limit=10, options=strong_decay)
    cut = sorted(h.score for h in everything)[2]
    kept = await recall(
        service, "roadmap planning meeting", limit=10, min_score=cut, options=strong_decay
    )
    assert kept and all(h.score >= cut for h in kept)
    assert len(kept) == sum(h.score >= cut for h in everything)


async def test_each_results_time_decay_follows_its_own_age(
    service: MemoryService,
    clock,  # type: ignore[no-untyped-def]
) -> None:
    """The decay stage uses each memory's own created_at, also after a Forget moved the
    index's rows around and an Update rewrote one: after_decay / after_length is
    2^(-age / half-life) with floor and reinforcement at 0."""
    ages = {}
    made = []
    for i, text in enumerate(FILLER):
        m = await put(service, text, created_at=clock.now - timedelta(days=7 * i + 0.5))
        ages[m.id] = 7 * i + 0.5
        made.append(m)
    await service.forget_id("a", made[1].id)  # the last row moves into its place
    del ages[made[1].id]
    await service.update(MemoryPatch(agent_id="a", id=made[3].id, importance=0.9))
    clock.advance(days=2)
    options = {"decay_half_life_days": 10.0, "decay_floor": 0.0, "reinforcement": 0.0}
    hits = await recall(
        service, "roadmap planning meeting", limit=10, options=options, explain=True
    )
    assert sorted(h.memory.id for h in hits) == sorted(ages)
    for h in hits:
        age = ages[h.memory.id] + 2
        want = 2.0 ** (-age / 10.0)
        assert h.explain.after_decay == pytest.approx(h.explain.after_length * want, rel=1e-4)


async def test_length_and_reinforced_decay_follow_each_results_own_text_and_accesses(
    service: MemoryService,
    clock,  # type: ignore[no-untyped-def]
) -> None:
    """The length stage divides by 1 + w * log2(chars / anchor) past the anchor, by each
    memory's own text; the decay's half-life stretches with each memory's own access
    count (reinforcement). Both columns are read only when their stage is on."""
    short = await put(service, "roadmap planning", created_at=clock.now)
    long = await put(service, "roadmap planning " + "and more words " * 11, created_at=clock.now)
    for _ in range(3):  # the short one is recalled (touched) three times more
        await recall(service, "roadmap planning", limit=1, options={"fusion": "bm25"})
    clock.advance(days=10)
    options = {
        "length_weight": 0.5,
        "length_anchor_chars": 50.0,
        "decay_half_life_days": 10.0,
        "decay_floor": 0.0,
        "reinforcement": 1.0,
    }
    hits = await recall(service, "roadmap planning", limit=2, options=options, explain=True)
    by_id = {h.memory.id: h for h in hits}
    assert set(by_id) == {short.id, long.id}
    s, lg = by_id[short.id].explain, by_id[long.id].explain
    assert s.after_length == pytest.approx(s.after_importance, rel=1e-6)  # under the anchor
    ratio = len(long.text) / 50.0
    assert lg.after_length == pytest.approx(
        lg.after_importance / (1 + 0.5 * math.log2(ratio)), rel=1e-5
    )
    for hit, e in ((by_id[short.id], s), (by_id[long.id], lg)):
        counted = hit.memory.access_count  # as ranked (this Recall's own touch is not in it)
        half_life = 10.0 * (1 + math.log1p(counted))
        assert e.after_decay == pytest.approx(e.after_length * 2.0 ** (-10.0 / half_life), rel=1e-4)
    assert by_id[short.id].memory.access_count > by_id[long.id].memory.access_count


async def test_scores_are_best_first_and_limit_is_a_bound(service: MemoryService) -> None:
    for text in FILLER:
        await put(service, text)
    hits = await recall(service, "roadmap", limit=3)
    assert len(hits) == 3
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(s >= 0 for s in scores)


async def test_mmr_keeps_near_duplicates_from_filling_the_list(service: MemoryService) -> None:
    await put(service, "berlin office address is alexanderplatz 1 berlin")
    await put(service, "berlin office address alexanderplatz 1 in berlin germany")
    await put(service, "our berlin office address is alexanderplatz 1")
    other = await put(service, "berlin office wifi network is called guest")
    plain = await recall(service, "berlin office address", limit=2)
    assert other.id not in [h.memory.id for h in plain]
    diverse = await recall(
        service, "berlin office address", limit=2, options={"mmr_lambda": 0.3}, explain=True
    )
    assert other.id in [h.memory.id for h in diverse]
    assert [h.explain.mmr_position for h in diverse] == [0, 1]


async def test_recency_and_importance_boosts_change_the_order(
    service: MemoryService,
    clock,  # type: ignore[no-untyped-def]
) -> None:
    old = await put(service, "standup is at nine", created_at=clock.now - timedelta(days=300))
    new = await put(service, "standup is at nine thirty now", created_at=clock.now)
    boosted = await recall(service, "standup", options={"recency_weight": 0.5})
    assert boosted[0].memory.id == new.id
    important = await put(service, "standup notes are in the wiki", importance=1.0)
    await service.update(MemoryPatch(agent_id="a", id=new.id, importance=0.0))
    ranked = await recall(service, "standup", options={"importance_weight": 1.0}, limit=3)
    assert ranked[0].memory.id == important.id and ranked[-1].memory.id == new.id
    assert old.id in [h.memory.id for h in ranked]


async def test_text_index_is_never_stale(service: MemoryService, open_repository) -> None:  # type: ignore[no-untyped-def]
    m = await put(service, "the quokka enclosure opens at noon")
    gone = await put(service, "the axolotl tank is cleaned on mondays")
    await service.update(
        MemoryPatch(agent_id="a", id=m.id, text="the wombat enclosure opens at noon")
    )
    await service.forget_id("a", gone.id)
    bm25 = {"fusion": "bm25"}
    assert await recall(service, "quokka", options=bm25) == []
    assert await recall(service, "axolotl", options=bm25) == []
    assert [h.memory.id for h in await recall(service, "wombat", options=bm25)] == [m.id]
    service.store.close()  # type: ignore[attr-defined]
    reopened = MemoryService(
        open_repository(), service.embedder, service.policy, clock=service.clock
    )
    assert [h.memory.id for h in await recall(reopened, "wombat", options=bm25)] == [m.id]
    assert await recall(reopened, "quokka", options=bm25) == []


async def test_recall_counts_accesses(service: MemoryService) -> None:
    m = await put(service, "the printer on floor two needs toner")
    await recall(service, "printer toner")
    await recall(service, "printer toner")
    got = service.get("a", m.id)
    assert got.access_count == 2 and got.last_accessed_at == service.clock()


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"mmr_lambda": 1.5}, "mmr_lambda"),
        ({"rerank_weight": -0.1}, "rerank_weight"),
        ({"vector_weight": float("nan")}, "finite"),
        ({"bm25_scale": 0.0}, "bm25_scale"),
        ({"candidate_pool": 5000}, "candidate_pool"),
    ],
)
async def test_bad_options_are_invalid_argument(
    service: MemoryService, options: dict[str, object], fragment: str
) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        await recall(service, "anything", options=options)


class _Broken:
    async def score(self, query: str, memories: Sequence[Memory]) -> np.ndarray:
        raise RuntimeError("model crashed")


class _Slow:
    async def score(self, query: str, memories: Sequence[Memory]) -> np.ndarray:
        await asyncio.sleep(5)
        return np.ones(len(memories), np.float32)


class _Prefers:
    """Scores 1 for memories containing a word, else 0."""

    def __init__(self, word: str):
        self.word = word

    async def score(self, query: str, memories: Sequence[Memory]) -> np.ndarray:
        return np.array([float(self.word in m.text) for m in memories], np.float32)


@pytest.mark.parametrize(
    ("reranker", "reason"), [(_Broken(), "fallback:error"), (_Slow(), "fallback:timeout")]
)
async def test_failing_reranker_falls_back_to_fused_order(
    service: MemoryService, reranker: object, reason: str
) -> None:
    for text in FILLER:
        await put(service, text)
    plain = await recall(service, "roadmap planning", limit=5)
    config = RetrievalConfig(rerank=Rerank.CROSS_ENCODER, rerank_timeout_ms=50)
    service.retriever = Retriever(service.store, config, {Rerank.CROSS_ENCODER: reranker})  # type: ignore[dict-item]
    hits = await recall(service, "roadmap planning", limit=5, explain=True)
    assert [h.memory.id for h in hits] == [h.memory.id for h in plain]
    assert {h.explain.reranker for h in hits} == {reason}


async def test_reranker_blends_into_the_order_and_explain_shows_it(service: MemoryService) -> None:
    for text in FILLER:
        await put(service, text)
    config = RetrievalConfig(rerank=Rerank.CROSS_ENCODER, rerank_weight=0.9)
    service.retriever = Retriever(
        service.store, config, {Rerank.CROSS_ENCODER: _Prefers("thursday")}
    )
    hits = await recall(service, "roadmap planning", limit=5, explain=True)
    assert {h.memory.text for h in hits[:2]} == {t for t in FILLER if "thursday" in t}
    assert hits[0].explain.reranker == "cross-encoder"
    assert hits[0].explain.reranked != hits[0].explain.fused
    unconfigured = await recall(
        service, "roadmap", options={"rerank": "late-interaction"}, explain=True
    )
    assert unconfigured[0].explain.reranker.startswith("fallback:")
