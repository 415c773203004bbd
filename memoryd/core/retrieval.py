"""The recall pipeline: hybrid candidates, fusion, rerank, boosts, hard minimum, MMR.

    candidates   union of the best ``pool`` by cosine and the best ``pool`` by BM25 over
                 the caller's scopes (pool = max(pool_min, pool_factor x limit)), every
                 candidate scored exactly on both legs (storage)
    fusion       RRF or weighted score fusion (vector-only / BM25-only for comparison)
    rerank       optional: cross-encoder or late-interaction score blended into the fused
                 score; a reranker that fails or times out leaves fused order, never errors
    boosts       recency bonus, importance, length normalisation, time decay whose
                 half-life grows with access count (formulas in memoryd_native.kernels)
    minimum      the caller's ``min_score`` on the final score, the score it sees
    diversity    MMR with lambda over the survivors, so near-duplicates do not fill the list

Fusion, boosts and the minimum run as one native kernel over the candidate arrays.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from operator import attrgetter
from typing import Protocol
from zoneinfo import ZoneInfo

import numpy as np
from memoryd_native import (
    FUSION_PRESCORED,
    FUSION_RRF,
    FUSION_WEIGHTED,
    N_STAGES,
    P_DECAY_HALF_LIFE,
    P_LENGTH_WEIGHT,
    P_RECENCY_WEIGHT,
    S_DECAY,
    S_FUSED,
    S_IMPORTANCE,
    S_LENGTH,
    S_RECENCY,
    fuse_and_boost,
    make_params,
    maxsim,
    mmr_select,
)

from memoryd.core import tracing
from memoryd.core.errors import FailedPrecondition, InvalidArgument
from memoryd.core.language import detect
from memoryd.core.protocols import Embedder, MemoryReader, Reranker
from memoryd.core.records import Candidates, Category, Explain, Memory, ScoredMemory
from memoryd.core.timewindow import TimeWindow, zone
from memoryd.core.timewindow import resolve as resolve_time

log = logging.getLogger(__name__)

SECONDS_PER_DAY = 86_400.0
UTC_ZONE = ZoneInfo("UTC")


class Fusion(StrEnum):
    RRF = "rrf"
    WEIGHTED = "weighted"
    VECTOR_ONLY = "vector"
    BM25_ONLY = "bm25"


class Rerank(StrEnum):
    NONE = "none"
    CROSS_ENCODER = "cross-encoder"
    LATE_INTERACTION = "late-interaction"


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """Every knob of the pipeline; ``config.RecallSection`` fills it, a request may
    override any field (``RecallOptions``)."""

    fusion: Fusion = Fusion.WEIGHTED
    vector_weight: float = 0.5
    bm25_weight: float = 0.5
    rrf_k: float = 60.0
    bm25_scale: float = 5.0
    recency_weight: float = 0.0
    recency_half_life_days: float = 14.0
    importance_weight: float = 0.3
    length_weight: float = 0.0
    length_anchor_chars: float = 500.0
    decay_half_life_days: float = 0.0
    decay_floor: float = 0.5
    reinforcement: float = 0.5
    mmr_lambda: float = 1.0
    rerank: Rerank = Rerank.NONE
    rerank_weight: float = 0.5
    rerank_top: int = 20
    rerank_timeout_ms: float = 200.0
    pool_min: int = 20
    pool_factor: int = 2
    candidate_pool: int = 0  # 0 = max(pool_min, pool_factor x limit)
    foreign_dense_trust: float = 0.0
    time_boost: float = 0.1

    def pool(self, limit: int) -> int:
        """How many candidates each leg brings for a Recall of ``limit``."""
        return self.candidate_pool or max(self.pool_min, self.pool_factor * limit)

    def with_overrides(self, overrides: Mapping[str, object]) -> RetrievalConfig:
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise InvalidArgument(f"unknown retrieval option(s): {', '.join(sorted(unknown))}")
        cfg = replace(self, **overrides)  # type: ignore[arg-type]
        cfg.validate()
        return cfg

    def validate(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidArgument(f"retrieval option {f.name} must be a finite number")
        if not 0.0 <= self.mmr_lambda <= 1.0:
            raise InvalidArgument(f"mmr_lambda must be in [0, 1], got {self.mmr_lambda}")
        if not 0.0 <= self.rerank_weight <= 1.0:
            raise InvalidArgument(f"rerank_weight must be in [0, 1], got {self.rerank_weight}")
        if not 0.0 <= self.foreign_dense_trust <= 1.0:
            raise InvalidArgument(
                f"foreign_dense_trust must be in [0, 1], got {self.foreign_dense_trust}"
            )
        if not 0.0 <= self.time_boost <= 1.0:
            raise InvalidArgument(f"time_boost must be in [0, 1], got {self.time_boost}")
        if self.candidate_pool > 1000:
            raise InvalidArgument(f"candidate_pool {self.candidate_pool} is over the maximum 1000")
        try:
            self.fusion_params()
            self.boost_params(0.0)
        except ValueError as e:
            raise InvalidArgument(f"retrieval option {e}") from None

    def fusion_params(self) -> np.ndarray:
        """Kernel settings for stage 1 alone: fusion, every boost off."""
        w_vec, w_bm25 = self.vector_weight, self.bm25_weight
        mode = FUSION_RRF if self.fusion == Fusion.RRF else FUSION_WEIGHTED
        if self.fusion == Fusion.VECTOR_ONLY:
            w_vec, w_bm25 = 1.0, 0.0
        elif self.fusion == Fusion.BM25_ONLY:
            w_vec, w_bm25 = 0.0, 1.0
        return make_params(
            mode=mode,
            rrf_k=self.rrf_k,
            w_vec=w_vec,
            w_bm25=w_bm25,
            bm25_scale=self.bm25_scale,
            recency_weight=0.0,
            importance_weight=0.0,
            length_weight=0.0,
            decay_half_life_days=0.0,
        )

    def boost_params(self, min_score: float) -> np.ndarray:
        """Kernel settings for the boosts and the minimum over an already fused score."""
        return make_params(
            mode=FUSION_PRESCORED,
            recency_weight=self.recency_weight,
            recency_half_life_days=self.recency_half_life_days,
            importance_weight=self.importance_weight,
            length_weight=self.length_weight,
            length_anchor=self.length_anchor_chars,
            decay_half_life_days=self.decay_half_life_days,
            decay_floor=self.decay_floor,
            reinforcement=self.reinforcement,
            min_score=min_score,
        )


class Retriever:
    def __init__(
        self,
        store: MemoryReader,
        config: RetrievalConfig,
        rerankers: Mapping[Rerank, Reranker] | None = None,
        dense_languages: frozenset[str] = frozenset(),
        timezone: ZoneInfo | None = None,
        detect_language: Callable[[str], str] = detect,
    ):
        """``dense_languages``: ISO codes of the languages the embedder (and so the vector
        leg and the late-interaction reranker) was trained on; empty = every language."""
        config.validate()
        self.store = store
        self.config = config
        self.rerankers = dict(rerankers or {})
        self.dense_languages = dense_languages
        self.timezone = timezone
        self.language_of = detect_language  # text -> ISO code, as the store analyses it
        # Called with (stage, seconds) after each stage; the daemon feeds its metrics.
        self.observe: Callable[[str, float], None] = _ignore

    def has(self, mode: Rerank) -> bool:
        return mode in self.rerankers

    async def recall(
        self,
        *,
        query_text: str,
        query_vector: np.ndarray,
        scopes: frozenset[str],
        limit: int,
        min_score: float,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        config: RetrievalConfig | None = None,
        explain: bool = False,
        when: TimeArgs | None = None,
        prepared: Prepared | None = None,
        as_of: datetime | None = None,
    ) -> list[ScoredMemory]:
        """``now``: what is visible (a memory expired at ``now`` is not a candidate);
        ``as_of`` (default ``now``): the time recency and decay are judged at.
        ``when.created_after``/``created_before`` filter by created_at; a time
        expression in the query, resolved against ``when.reference_time`` (default ``now``)
        in ``when.timezone`` (default: the retriever's), boosts the memories created in
        its window (``time_boost``). ``prepared``: ``prepare``'s answer for the same
        arguments (the work that needs no query vector, done while it was computed)."""
        time_args = when or TimeArgs()
        created_after, created_before = time_args.created_after, time_args.created_before
        cfg = config or self.config
        pool = cfg.pool(limit)
        window = (
            prepared.window
            if prepared is not None
            else self._window(query_text, cfg, time_args, now)
        )
        t0 = time.perf_counter()
        with tracing.span("candidates", pool=pool) as stage:
            cands = self.store.candidates(
                query_vector,
                query_text,
                scopes,
                pool,
                now=now,
                categories=categories,
                lexical=cfg.fusion != Fusion.VECTOR_ONLY,
                vector=cfg.fusion != Fusion.BM25_ONLY,
                created_after=created_after,
                created_before=created_before,
                prepared=prepared.leg if prepared is not None else None,
            )
            stage.set_attribute("memoryd.candidates", len(cands))
        n = len(cands)
        if n == 0:
            return []
        t1 = time.perf_counter()
        self.observe("candidates", t1 - t0)
        with tracing.span("fuse_rerank", fusion=cfg.fusion.value) as stage:
            trust = self.dense_trust(cfg, cands)
            if trust < 1.0:
                # The weight taken from the vector leg goes to the lexical leg, so scores keep
                # the scale that min_score and hooks.min_score are calibrated on: otherwise a
                # German query's best match scored half its English twin's and auto-recall
                # skipped it. Ranking within the query is unchanged at trust 0.
                cfg = replace(
                    cfg,
                    vector_weight=cfg.vector_weight * trust,
                    bm25_weight=cfg.bm25_weight + cfg.vector_weight * (1.0 - trust),
                    rerank_weight=cfg.rerank_weight * trust
                    if cfg.rerank == Rerank.LATE_INTERACTION
                    else cfg.rerank_weight,
                )
            fused = self._fuse(cfg, cands)
            blended, reranker_name = await self._rerank(cfg, query_text, cands, fused)
            t2 = time.perf_counter()
            if reranker_name:
                self.observe("rerank", t2 - t1)
                stage.set_attribute("memoryd.reranker", reranker_name)
            time_boost = np.zeros(n, dtype=np.float32)
            if window is not None:
                inside = [i for i, m in enumerate(cands.memories) if window.contains(m.created_at)]
                time_boost[inside] = cfg.time_boost
                blended = np.ascontiguousarray(blended + time_boost, dtype=np.float32)
            # From the index's created column and attribute getters, not a datetime
            # subtraction and four list comprehensions per candidate (~3x cheaper at 80);
            # a column only when a boost that reads it is on (by default recency, length
            # and decay are off: the kernel reads neither ages, access counts nor lengths).
            params = _boost_params(cfg, min_score)
            zeros_i = np.zeros(n, np.int64)
            mems = cands.memories
            importance = np.fromiter(map(_IMPORTANCE, mems), np.float32, n)
            decay = params[P_DECAY_HALF_LIFE] > 0.0
            age_days = (
                (((as_of or now).timestamp() - cands.created) / SECONDS_PER_DAY).astype(np.float32)
                if decay or params[P_RECENCY_WEIGHT] != 0.0
                else np.zeros(n, np.float32)
            )
            access = np.fromiter(map(_ACCESS_COUNT, mems), np.int64, n) if decay else zeros_i
            text_len = (
                np.fromiter(map(len, map(_TEXT, mems)), np.int64, n)
                if params[P_LENGTH_WEIGHT] > 0.0
                else zeros_i
            )
            stages = np.zeros((n, N_STAGES), dtype=np.float32)
            keep = np.zeros(n, dtype=np.uint8)
            final, _ = fuse_and_boost(
                blended, zeros_i, np.zeros(n, np.float32), np.full(n, -1, np.int64),
                age_days, importance, access, text_len, params, stages, keep,
            )  # fmt: skip

        t3 = time.perf_counter()
        self.observe("fuse_and_boost", t3 - t2)
        survivors = np.flatnonzero(keep)
        if survivors.size == 0:
            return []
        order = survivors[np.argsort(-final[survivors], kind="stable")]  # ties: lower first
        mmr_pos = np.full(n, -1, dtype=np.int64) if explain else _NO_POSITIONS
        if cfg.mmr_lambda < 1.0 and order.size > 1:
            with tracing.span("mmr"):
                picked = mmr_select(
                    np.ascontiguousarray(cands.vectors[order]),
                    np.ascontiguousarray(final[order]),
                    limit,
                    cfg.mmr_lambda,
                )
            chosen = order[picked]
            if explain:
                mmr_pos[chosen] = np.arange(chosen.size)
            self.observe("mmr", time.perf_counter() - t3)
        else:
            chosen = order[:limit]
        hits = []
        for i in chosen:
            ex = None
            if explain:
                ex = Explain(
                    vector=float(cands.vector_scores[i]),
                    bm25=float(cands.lexical_scores[i]),
                    vector_rank=int(cands.vector_rank[i]),
                    bm25_rank=int(cands.lexical_rank[i]),
                    fused=float(fused[i]),
                    reranked=float(blended[i]),
                    after_recency=float(stages[i, S_RECENCY]),
                    after_importance=float(stages[i, S_IMPORTANCE]),
                    after_length=float(stages[i, S_LENGTH]),
                    after_decay=float(stages[i, S_DECAY]),
                    final=float(final[i]),
                    mmr_position=int(mmr_pos[i]),
                    reranker=reranker_name,
                    query_language=cands.query_language,
                    dense_trust=trust,
                    time_expression=window.expression if window else "",
                    time_window_start=window.start if window else None,
                    time_window_end=window.end if window else None,
                    time_boost=float(time_boost[i]),
                )
            hits.append(ScoredMemory(cands.memories[i], float(final[i]), ex))
        return hits

    def prepare(
        self,
        *,
        query_text: str,
        scopes: frozenset[str],
        limit: int,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        config: RetrievalConfig | None = None,
        when: TimeArgs | None = None,
    ) -> Prepared:
        """The part of ``recall`` that needs the query's text but not its vector: its
        time expression, its analysis and the BM25 leg (``MemoryReader.lexical_leg``).
        A Recall whose embedding is computed runs it meanwhile, on the other core; the
        store checks that nothing it read changed before ``recall`` uses it."""
        time_args = when or TimeArgs()
        cfg = config or self.config
        pool = cfg.pool(limit)
        with tracing.span("prepare", pool=pool):
            window = self._window(query_text, cfg, time_args, now)
            leg = self.store.lexical_leg(
                query_text,
                scopes,
                pool,
                now=now,
                categories=categories,
                lexical=cfg.fusion != Fusion.VECTOR_ONLY,
                created_after=time_args.created_after,
                created_before=time_args.created_before,
            )
        return Prepared(window, leg)

    def _window(
        self, query_text: str, cfg: RetrievalConfig, time_args: TimeArgs, now: datetime
    ) -> TimeWindow | None:
        if not time_args.time_expressions or cfg.time_boost <= 0.0:
            return None
        return resolve_time(
            query_text,
            time_args.reference_time or now,
            time_args.timezone or self.timezone or UTC_ZONE,
        )

    def time_arguments(self, q: TimeQuery) -> TimeArgs:
        """A request's time fields as ``recall``'s ``when``, checked."""
        after = _aware(q.created_after, "created_after")
        before = _aware(q.created_before, "created_before")
        if after is not None and before is not None and after >= before:
            raise InvalidArgument(
                f"created_after ({after.isoformat()}) must be before created_before "
                f"({before.isoformat()})"
            )
        return TimeArgs(
            created_after=after,
            created_before=before,
            reference_time=_aware(q.reference_time, "reference_time") or _aware(q.as_of, "as_of"),
            timezone=zone(q.timezone) if q.timezone else self.timezone,
            time_expressions=q.time_expressions,
        )

    def reads(self, language: str) -> bool:
        """Whether the embedder was trained on ``language``: only then does a high cosine
        mean "says the same thing". MiniLM maps most Thai text to a few nearby vectors
        (measured: 515 of 1,338 XQuAD Thai sentences, all different, came out over the
        0.95 duplicate threshold of an earlier one)."""
        return not self.dense_languages or language in self.dense_languages

    def dense_trust(self, cfg: RetrievalConfig, cands: Candidates) -> float:
        """The share of the vector weight this query's vector leg is trusted with.

        1 when the embedder was trained on the query's language, or when the lexical leg
        matched nothing (then the vector leg is all there is); else ``foreign_dense_trust``.
        Measured on XQuAD (bench/RESULTS.md): with the English MiniLM, the vector leg alone
        ranks Spanish at MRR@10 0.48, Russian 0.19, Arabic 0.06, Thai 0.08, and fusing it
        at full weight made every one of them worse than its lexical leg alone.
        """
        if cfg.fusion in (Fusion.VECTOR_ONLY, Fusion.BM25_ONLY):
            return 1.0
        if not self.dense_languages or cands.query_language in self.dense_languages:
            return 1.0
        if not (cands.lexical_rank >= 0).any():
            return 1.0
        return cfg.foreign_dense_trust

    @staticmethod
    def _fuse(cfg: RetrievalConfig, cands: Candidates) -> np.ndarray:
        n = len(cands)
        stages = np.zeros((n, N_STAGES), dtype=np.float32)
        zeros_f, zeros_i = np.zeros(n, np.float32), np.zeros(n, np.int64)
        fuse_and_boost(
            cands.vector_scores, cands.vector_rank, cands.lexical_scores, cands.lexical_rank,
            zeros_f, zeros_f, zeros_i, zeros_i, _fusion_params(cfg), stages,
            np.zeros(n, np.uint8),
        )  # fmt: skip
        return np.ascontiguousarray(stages[:, S_FUSED])

    async def _rerank(
        self, cfg: RetrievalConfig, query: str, cands: Candidates, fused: np.ndarray
    ) -> tuple[np.ndarray, str]:
        """The fused scores with the reranker blended in, and which reranker ran.

        Only the best ``rerank_top`` by fused score are reranked (the model is the costly
        part); the others keep their fused score, capped just below the lowest reranked
        one so they never jump ahead. Any failure returns the fused scores unchanged.
        """
        if cfg.rerank == Rerank.NONE or cfg.rerank_weight == 0.0:
            return fused, ""
        reranker = self.rerankers.get(cfg.rerank)
        if reranker is None:
            return fused, f"fallback:{cfg.rerank.value} is not configured"
        n = len(cands)
        top = np.argsort(-fused, kind="stable")[: cfg.rerank_top]  # ties: the lower index first
        try:
            # A deadline on this task, not wait_for's task of its own: the in-process
            # reranker answers without suspending, and a task costs a loop round.
            async with asyncio.timeout(cfg.rerank_timeout_ms / 1000.0):
                scores = await reranker.score(query, [cands.memories[i] for i in top])
        except TimeoutError:
            log.warning("reranker %s timed out; using fused order", cfg.rerank.value)
            return fused, "fallback:timeout"
        except FailedPrecondition as e:  # expected, e.g. memories stored without tokens
            # (debug: every Recall among memories stored without token vectors, or while a
            # start writes its token file, would log it; explain.reranker says it)
            log.debug("reranker %s cannot run (%s); using fused order", cfg.rerank.value, e)
            return fused, f"fallback:{e}"
        except Exception:
            log.exception("reranker %s failed; using fused order", cfg.rerank.value)
            return fused, "fallback:error"
        scores = np.asarray(scores, dtype=np.float32)
        if scores.shape != (len(top),) or not np.isfinite(scores).all():
            log.warning("reranker %s returned unusable scores; using fused order", cfg.rerank)
            return fused, "fallback:bad-scores"
        w = cfg.rerank_weight
        reranked = (1.0 - w) * fused[top] + w * np.clip(scores, 0.0, 1.0)
        if n > top.size:  # the others, capped just below the lowest reranked score
            floor = np.float32(reranked.min())
            blended = np.minimum(fused, np.nextafter(floor, np.float32(-np.inf)))
        else:
            blended = fused.copy()
        blended[top] = reranked
        return np.ascontiguousarray(blended, dtype=np.float32), cfg.rerank.value


_IMPORTANCE = attrgetter("importance")
_ACCESS_COUNT = attrgetter("access_count")
_TEXT = attrgetter("text")
_NO_POSITIONS = np.zeros(0, dtype=np.int64)  # MMR positions, kept only for explain


# The kernel settings of a configuration, packed once: packing and checking them cost more
# than the fusion itself. Shared arrays: fuse_and_boost only reads its params.
@lru_cache(maxsize=256)
def _fusion_params(cfg: RetrievalConfig) -> np.ndarray:
    return cfg.fusion_params()


@lru_cache(maxsize=1024)
def _boost_params(cfg: RetrievalConfig, min_score: float) -> np.ndarray:
    return cfg.boost_params(min_score)


def options_to_overrides(options: Mapping[str, object]) -> dict[str, object]:
    """Drop unset values; map enum strings to the config's enums."""
    out: dict[str, object] = {}
    for key, value in options.items():
        if value is None:
            continue
        if key == "fusion":
            value = Fusion(str(value))
        elif key == "rerank":
            value = Rerank(str(value))
        out[key] = value
    return out


class LateInteractionReranker:
    """MaxSim between the query's token vectors and each memory's stored token vectors
    (both from the built-in embedder: the query's come from the embedder's cache, filled
    by the recall's own model pass, the memories' were stored at write time).

    score = mean over query tokens of the best cosine with any of the memory's tokens,
    clipped to [0, 1]. A memory stored without token vectors (``recall.token_vectors``
    was off when it was written) cannot be scored: the whole rerank then falls back.
    """

    def __init__(self, store: MemoryReader, embedder: Embedder):
        self.store = store
        self.embedder = embedder

    async def score(self, query: str, memories: Sequence[Memory]) -> np.ndarray:
        _, q_tokens = await self.embedder.embed_query_with_tokens(query)
        docs = self.store.tokens_of_many([m.id for m in memories])
        if docs is None:
            raise FailedPrecondition("no-token-vectors")
        flat, offsets = docs
        # Stored token vectors are int8 (value * 127): score them as they are against the
        # query scaled by 1/127 instead of converting every candidate's tokens to float.
        scaled = np.ascontiguousarray(q_tokens, dtype=np.float32) * np.float32(1.0 / 127.0)
        scores = maxsim(scaled, flat, offsets)
        return np.clip(scores, 0.0, 1.0)


class TimeQuery(Protocol):
    """The time fields of a request (``service.RecallQuery``)."""

    @property
    def as_of(self) -> datetime | None: ...
    @property
    def created_after(self) -> datetime | None: ...
    @property
    def created_before(self) -> datetime | None: ...
    @property
    def reference_time(self) -> datetime | None: ...
    @property
    def timezone(self) -> str: ...
    @property
    def time_expressions(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class TimeArgs:
    created_after: datetime | None = None
    created_before: datetime | None = None
    reference_time: datetime | None = None
    timezone: ZoneInfo | None = None
    time_expressions: bool = True


@dataclass(frozen=True, slots=True)
class Prepared:
    """``Retriever.prepare``'s answer: the query's time window and the store's lexical
    leg (opaque here: the store checks it)."""

    window: TimeWindow | None
    leg: object


def _aware(value: datetime | None, name: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise InvalidArgument(f"{name} must carry a time zone")
    return value


def _ignore(stage: str, seconds: float) -> None:
    pass
