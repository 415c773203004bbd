"""The memory service: the domain's operations, independent of the wire.

``api`` converts requests into these calls; ``storage`` and ``inference`` provide the
store and embedder through ``core.protocols``. Every operation first resolves what the
calling agent may read and write (``core.policy``) and validates its input completely,
so a bad request changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from memoryd.core import principals
from memoryd.core.categorize import detect_category
from memoryd.core.errors import InvalidArgument, NotFound
from memoryd.core.injection import detect_injection
from memoryd.core.lifecycle import (
    MERGE_SYSTEM,
    SUMMARY_SYSTEM,
    MergePlan,
    MergeSettings,
    TtlSettings,
    expiry_for,
    in_band,
    merge_prompt,
    plan_merge,
)
from memoryd.core.policy import (
    Access,
    AccessPolicy,
    agent_scope,
    validate_agent_id,
    validate_scope,
)
from memoryd.core.protocols import ConflictLog, Embedder, MemoryStore, TextModel
from memoryd.core.records import (
    PROVENANCE_KEY,
    TRUSTED_ASSERTERS,
    Category,
    Conflict,
    ForgetResult,
    KeyRecord,
    Memory,
    ScoredMemory,
    StoreOutcome,
    StoreResult,
)
from memoryd.core.retrieval import (
    Rerank,
    RetrievalConfig,
    Retriever,
    TimeArgs,
    options_to_overrides,
)
from memoryd.core.summarize import count_words, extractive_summary
from memoryd.core.text import content_hash, is_blank, normalize_text

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServiceLimits:
    """Limits and thresholds; ``config.Settings`` fills these from the settings file."""

    max_chars: int = 10_000
    default_importance: float = 0.7
    duplicate_threshold: float = 0.95
    summary_max_words: int = 150
    max_metadata_entries: int = 64
    max_metadata_key_chars: int = 128
    max_metadata_value_chars: int = 2048
    max_idempotency_key_chars: int = 128
    recall_default_limit: int = 5
    recall_max_limit: int = 100
    forget_strong_score: float = 0.5  # on the final score; see ForgetSettings
    forget_candidate_score: float = 0.3
    forget_margin: float = 0.15
    forget_max_candidates: int = 10
    list_default_page_size: int = 50
    list_max_page_size: int = 500
    reject_injection: bool = True
    token_vectors: bool = False  # store token vectors at write time (late interaction)
    merge: MergeSettings = field(default_factory=MergeSettings)
    ttl: TtlSettings = field(default_factory=TtlSettings)
    conflicts_max: int = 1000
    summarizer: str = "extractive"  # or "llm" (needs a text model)


@dataclass(frozen=True, slots=True)
class NewMemory:
    agent_id: str
    text: str
    category: Category = Category.UNSPECIFIED
    importance: float | None = None
    scope: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    idempotency_key: str = ""
    created_at: datetime | None = None
    expires_at: datetime | None = None
    ttl: str = ""  # "", "permanent", "session", "short"


@dataclass(frozen=True, slots=True)
class RecallQuery:
    agent_id: str
    query: str
    limit: int = 0
    min_score: float = 0.0
    categories: frozenset[Category] = frozenset()
    scopes: tuple[str, ...] = ()
    options: Mapping[str, object] = field(default_factory=dict)  # RetrievalConfig overrides
    explain: bool = False
    as_of: datetime | None = None  # judge recency/decay as of this time (default now)
    created_after: datetime | None = None  # only memories created in [after, before)
    created_before: datetime | None = None
    reference_time: datetime | None = None  # time expressions resolve against (as_of/now)
    timezone: str = ""  # IANA name; "" = the retriever's default (recall.timezone)
    time_expressions: bool = True  # resolve "last week" etc. in the query


@dataclass(frozen=True, slots=True)
class MemoryPatch:
    agent_id: str
    id: str
    text: str | None = None
    importance: float | None = None
    category: Category = Category.UNSPECIFIED
    metadata: Mapping[str, str] = field(default_factory=dict)
    replace_metadata: bool = False
    remove_metadata_keys: tuple[str, ...] = ()
    expires_at: datetime | None = None
    clear_expires_at: bool = False


@dataclass(frozen=True, slots=True)
class Page:
    memories: list[Memory]
    next_page_token: str
    total_size: int


@dataclass(frozen=True, slots=True)
class AgentStats:
    total: int
    by_scope: dict[str, int]
    by_category: dict[str, int]
    expired_pending: int
    embedding_model: str
    embedding_dim: int
    index_bytes: int
    store_rows: int


@dataclass(slots=True)
class _Pending:
    scope: str
    hash: str
    vector: np.ndarray
    done: asyncio.Future[StoreResult]


@dataclass(slots=True)
class _IdLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def _utcnow() -> datetime:
    return datetime.now(UTC)


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        policy: AccessPolicy,
        limits: ServiceLimits | None = None,
        clock: Callable[[], datetime] = _utcnow,
        retriever: Retriever | None = None,
        conflicts: ConflictLog | None = None,
        text_model: TextModel | None = None,
    ):
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.limits = limits or ServiceLimits()
        self.clock = clock
        self.retriever = retriever or Retriever(store, RetrievalConfig())
        self.conflicts = conflicts
        self.text_model = text_model
        # Stores between their duplicate check and their commit, so concurrent twins
        # (same key, same text, or near-same vector) resolve to one memory.
        self._pending: list[_Pending] = []
        self._pending_keys: dict[tuple[str, str], tuple[str, str, asyncio.Future[StoreResult]]] = {}
        self._update_locks: dict[str, _IdLock] = {}

    def access(self, agent_id: str) -> Access:
        """What ``agent_id`` may read and write, for the calling principal: refused when the
        principal may not act for that agent, before anything else is looked at."""
        validate_agent_id(agent_id)
        principals.current().check_agent(agent_id)
        principals.set_tenant(agent_id)
        return self.policy.access(agent_id)

    # -- Store -------------------------------------------------------------------------

    async def store_memory(self, new: NewMemory) -> StoreResult:
        lim = self.limits
        access = self.access(new.agent_id)
        text = self._check_text(new.text, "text")
        if lim.reject_injection and (why := detect_injection(text)) is not None:
            raise InvalidArgument(
                f"text was not stored: it {why} and looks like a prompt injection "
                "(store.reject_injection)"
            )
        importance = self._check_importance(
            lim.default_importance if new.importance is None else new.importance
        )
        scope = validate_scope(new.scope) if new.scope else agent_scope(new.agent_id)
        access.check_write(scope)
        metadata = self._check_metadata(dict(new.metadata))
        key = new.idempotency_key
        if len(key) > lim.max_idempotency_key_chars:
            raise InvalidArgument(
                f"idempotency_key is {len(key)} chars; the limit is "
                f"{lim.max_idempotency_key_chars} (store.max_idempotency_key_chars)"
            )
        now = self.clock()
        created = _aware(new.created_at, "created_at") or now
        expires = _aware(new.expires_at, "expires_at")
        if expires is not None and expires <= now:
            raise InvalidArgument("expires_at is in the past; a memory must expire later than now")
        if new.ttl:
            if expires is not None:
                raise InvalidArgument("set ttl or expires_at, not both")
            expires = expiry_for(new.ttl, now, lim.ttl)
        category = new.category
        if category == Category.UNSPECIFIED:
            category = detect_category(text)
        digest = content_hash(text)

        if key:
            replay = await self._idempotent_replay(access, key, digest, scope)
            if replay is not None:
                return replay
            own: asyncio.Future[StoreResult] = asyncio.get_running_loop().create_future()
            self._pending_keys[(new.agent_id, key)] = (digest, scope, own)
        try:
            result = await self._store_new(
                access, scope, text, digest, category, importance, metadata, key, created, expires
            )
            if key and result.outcome != StoreOutcome.CREATED:
                # Nothing new holds the key: record the answer so a retry replays it.
                await self.store.record_key(
                    KeyRecord(
                        new.agent_id,
                        key,
                        result.memory.id,
                        result.outcome,
                        digest,
                        scope,
                        result.duplicate_score,
                        self.clock(),
                    )
                )
        except BaseException as e:
            if key:
                self._pending_keys.pop((new.agent_id, key), None)
                if not own.done():
                    own.set_exception(e)
                    own.exception()  # retrieved: a failed twin must not log "never retrieved"
            raise
        if key:
            self._pending_keys.pop((new.agent_id, key), None)
            own.set_result(result)
        return result

    async def _idempotent_replay(
        self, access: Access, key: str, digest: str, scope: str
    ) -> StoreResult | None:
        """The first answer given for ``key``, if the key was used: while that Store is in
        flight, its answer; then the memory it created, or the one it named (DUPLICATE,
        MERGED) as long as that memory exists and the agent may still read it."""
        agent_id = access.agent_id
        first: StoreResult | None = None
        in_flight = self._pending_keys.get((agent_id, key))
        if in_flight is not None:
            used_hash, used_scope, future = in_flight
            first = await asyncio.shield(future)
        elif (
            (record := self.store.key_record(agent_id, key)) is not None
            and (named := self.store.get(record.memory_id)) is not None
            and named.scope in access.read
        ):
            used_hash, used_scope = record.content_hash, record.scope
            first = StoreResult(named, record.outcome, named.id, record.score)
        elif (found := self.store.find_by_idempotency_key(agent_id, key)) is not None:
            used_hash, used_scope = found.content_hash, found.scope
            first = StoreResult(found, StoreOutcome.CREATED)
        if first is None:
            return None
        if used_hash != digest or used_scope != scope:
            raise InvalidArgument(
                f"idempotency_key {key!r} was already used for a different memory "
                f"({first.memory.id}); use a new key for new content"
            )
        return first

    async def _store_new(
        self,
        access: Access,
        scope: str,
        text: str,
        digest: str,
        category: Category,
        importance: float,
        metadata: dict[str, str],
        key: str,
        created: datetime,
        expires: datetime | None,
    ) -> StoreResult:
        # Dedupe and merge compare with what the scope holds, so they only run where the
        # caller may read: in a write-only scope (a drop box) an answer of DUPLICATE, or a
        # link, would reveal memories the caller cannot see.
        readable = scope in access.read
        exact = self._exact_duplicate(scope, digest) if readable else None
        if exact is not None:
            return StoreResult(exact, StoreOutcome.DUPLICATE, exact.id, 1.0)
        vector, tokens = await self._embed_document(text)
        now = self.clock()
        # Re-check after the await: the world may have changed while the model ran.
        exact = self._exact_duplicate(scope, digest) if readable else None
        if exact is not None:
            return StoreResult(exact, StoreOutcome.DUPLICATE, exact.id, 1.0)
        near = self.store.search(vector, [scope], 5, now=now) if readable else []
        language = self.retriever.language_of(text)
        vector_reads = self.retriever.reads(language)
        if not vector_reads:  # its cosine cannot tell this language's texts apart: exact only
            near = []
        if near and near[0][1] >= self.limits.duplicate_threshold:
            twin, score = near[0]
            return StoreResult(twin, StoreOutcome.DUPLICATE, twin.id, float(score))
        for p in self._pending:
            if p.scope != scope or not readable:
                continue
            if p.hash == digest:
                score = 1.0
            else:
                score = float(np.dot(p.vector, vector)) if vector_reads else 0.0
            if score >= self.limits.duplicate_threshold:
                first = await asyncio.shield(p.done)
                return StoreResult(first.memory, StoreOutcome.DUPLICATE, first.memory.id, score)

        plan = plan_merge(self.limits.merge, category, self.limits.duplicate_threshold, near)
        if plan.merge_into:
            merged = await self._llm_merge(plan.merge_into, text, importance)
            if merged is not None:
                score = next((s for m, s in near if m.id == plan.merge_into), 0.0)
                return StoreResult(merged, StoreOutcome.MERGED, merged.id, float(score))
            plan = MergePlan(related=(plan.merge_into,), decision="linked")
        memory = Memory(
            id=str(uuid.uuid4()),
            agent_id=access.agent_id,
            scope=scope,
            text=text,
            summary=await self._summary(text),
            category=category,
            importance=importance,
            created_at=created,
            updated_at=now,
            expires_at=expires,
            metadata=metadata,
            content_hash=digest,
            idempotency_key=key,
            language=language,
            related_ids=list(plan.related),
            supersedes=plan.supersedes,
        )
        pending = _Pending(scope, digest, vector, asyncio.get_running_loop().create_future())
        self._pending.append(pending)
        try:
            memory = await self.store.add(memory, vector, tokens)
        except BaseException as e:
            pending.done.set_exception(e)
            pending.done.exception()
            raise
        finally:
            self._pending.remove(pending)
        result = StoreResult(memory, StoreOutcome.CREATED)
        pending.done.set_result(result)
        if category == Category.DECISION and self.conflicts is not None:
            await self._log_conflicts(access, memory, vector, plan)
        return result

    async def _summary(self, text: str) -> str:
        """Extractive by default; with ``store.summarizer = "llm"`` and an endpoint, an LLM
        summary of long texts (at most ``summary_max_words``), extractive on any failure."""
        words = self.limits.summary_max_words
        extractive = extractive_summary(text, words)
        if self.limits.summarizer != "llm" or self.text_model is None or extractive == text:
            return extractive
        try:
            summary = await self.text_model.complete(
                SUMMARY_SYSTEM.format(words=words), text, max_tokens=words * 3
            )
        except Exception as e:
            log.warning("LLM summary failed (%s); using the extractive one", e)
            return extractive
        return summary if count_words(summary) <= words else extractive_summary(summary, words)

    async def _llm_merge(self, target_id: str, text: str, importance: float) -> Memory | None:
        """Fold ``text`` into memory ``target_id`` with the LLM; None if that is not possible
        (no endpoint, endpoint failure, or a merged text that fails the store's checks)."""
        existing = self.store.get(target_id)
        if self.text_model is None or existing is None:
            return None
        try:
            merged = await self.text_model.complete(MERGE_SYSTEM, merge_prompt(existing.text, text))
            merged = self._check_text(merged, "merged text")
            if self.limits.reject_injection and detect_injection(merged):
                raise InvalidArgument("the merged text looks like a prompt injection")
            vector, tokens = await self._embed_document(merged)
        except Exception as e:
            log.warning("LLM merge failed (%s); linking the memories instead", e)
            return None
        current = self.store.get(target_id)
        if current is None:  # deleted while the model ran
            return None
        updated = replace(
            current,
            text=merged,
            content_hash=content_hash(merged),
            summary=await self._summary(merged),
            importance=max(current.importance, importance),
            updated_at=self.clock(),
        )
        return await self.store.replace(updated, vector, tokens)

    def _exact_duplicate(self, scope: str, digest: str) -> Memory | None:
        found = self.store.find_by_hash(scope, digest)
        # Storing again what was superseded makes it current again: not a duplicate.
        return None if found is None or found.superseded_by else found

    async def _log_conflicts(
        self, access: Access, memory: Memory, vector: np.ndarray, plan: MergePlan
    ) -> None:
        assert self.conflicts is not None
        lim = self.limits
        hits = self.store.search(
            vector, access.read, 5, now=self.clock(), categories=frozenset({Category.DECISION})
        )
        for other, score in hits:
            if other.agent_id == memory.agent_id or not in_band(
                score, lim.merge.band_low, lim.duplicate_threshold
            ):
                continue
            decision = (
                "superseded"
                if plan.supersedes == other.id
                else ("linked" if other.id in plan.related else "kept")
            )
            conflict = Conflict(
                at=memory.updated_at, new_id=memory.id, existing_id=other.id,
                new_agent_id=memory.agent_id, existing_agent_id=other.agent_id,
                new_text=memory.text, existing_text=other.text, score=float(score),
                category=Category.DECISION, merge_decision=decision, scope=memory.scope,
                existing_scope=other.scope,
            )  # fmt: skip
            try:
                await asyncio.to_thread(self.conflicts.append, conflict)
            except Exception:  # the log must never block or fail a store
                log.exception("could not append to the conflict log")

    def list_conflicts(self, agent_id: str, limit: int = 0) -> list[Conflict]:
        """Conflicts whose two memories the agent may both read, newest first."""
        access = self.access(agent_id)
        limit = limit or 50
        if limit > self.limits.conflicts_max:
            raise InvalidArgument(f"limit {limit} is over the maximum {self.limits.conflicts_max}")
        if self.conflicts is None:
            return []
        visible = [
            c
            for c in self.conflicts.recent(self.limits.conflicts_max * 10)
            if c.scope in access.read and c.existing_scope in access.read
        ]
        return visible[:limit]

    # -- Export / Import ----------------------------------------------------------------

    def export(
        self, agent_id: str, scopes: tuple[str, ...] = (), *, all_scopes: bool = False
    ) -> list[Memory]:
        """Every unexpired memory the agent may read (including superseded history), or
        with ``all_scopes`` (operators only) every unexpired memory of every scope."""
        access = self.access(agent_id)
        if all_scopes:
            principals.current().check_operator("Export of all scopes")
            return self.store.visible(self.store.scopes(), now=self.clock())
        return self.store.visible(access.readable(scopes), now=self.clock())

    async def import_memory(self, agent_id: str, memory: Memory) -> bool:
        """Store an exported memory, keeping its id, times and fields, re-embedded with
        this daemon's model. Returns False when it (or its text in its scope) exists.

        What a file says is not trusted: the importing agent owns every row; links and
        supersession are kept only towards memories of the same scope that the agent may
        read and write (others are dropped alike, whether they exist or not); an id taken
        by a memory the agent cannot read gets a fresh id. So an import reveals nothing of
        memories the agent cannot read, and changes none of them.
        """
        access = self.access(agent_id)
        if memory.id:
            _check_uuid(memory.id)
        else:  # a row with only a text: made as Store makes one
            memory = replace(memory, id=str(uuid.uuid4()))
        scope = validate_scope(memory.scope or agent_scope(agent_id))
        access.check_write(scope)
        text = self._check_text(memory.text, "text")
        self._check_importance(memory.importance)
        metadata = self._check_metadata(dict(memory.metadata))
        if memory.category == Category.UNSPECIFIED:
            memory = replace(memory, category=detect_category(text))
        created_at = _aware(memory.created_at, "created_at")
        updated_at = _aware(memory.updated_at, "updated_at")
        expires_at = _aware(memory.expires_at, "expires_at")
        digest = content_hash(text)
        readable = scope in access.read
        if self._seen_by(access, memory.id) or (
            readable and self._exact_duplicate(scope, digest) is not None
        ):
            return False
        vector, tokens = await self._embed_document(text)
        if self._seen_by(access, memory.id):
            return False
        memory_id = memory.id if self.store.get(memory.id) is None else str(uuid.uuid4())
        now = self.clock()
        linkable = {
            i for i in (*memory.related_ids, memory.supersedes) if self._linkable(access, scope, i)
        }
        imported = Memory(
            id=memory_id,
            agent_id=access.agent_id,
            scope=scope,
            text=text,
            summary=memory.summary or await self._summary(text),
            category=memory.category,
            importance=memory.importance,
            created_at=created_at or now,
            updated_at=updated_at or now,
            expires_at=expires_at,
            metadata=metadata,
            content_hash=digest,
            access_count=max(0, memory.access_count),
            last_accessed_at=_aware(memory.last_accessed_at, "last_accessed_at"),
            related_ids=sorted(i for i in memory.related_ids if i in linkable),
            supersedes=memory.supersedes if memory.supersedes in linkable else "",
        )
        await self.store.add(imported, vector, tokens)
        # The memory that replaced this one may have been imported first (exports list
        # newest first): its ``supersedes`` was dropped then, so restore the chain now.
        newer = memory.superseded_by
        if newer and self._linkable(access, scope, newer):
            current = self.store.get(newer)
            if current is not None and not current.supersedes:
                await self.store.replace(replace(current, supersedes=imported.id), None)
        return True

    def _seen_by(self, access: Access, memory_id: str) -> bool:
        found = self.store.get(memory_id)
        return found is not None and found.scope in access.read

    def _linkable(self, access: Access, scope: str, memory_id: str) -> bool:
        """Whether an imported memory of ``scope`` may link to ``memory_id``: a memory of
        the same scope, which the caller may read and write."""
        if not memory_id or scope not in access.read or scope not in access.write:
            return False
        target = self.store.get(memory_id)
        return target is not None and target.scope == scope

    # -- Recall ------------------------------------------------------------------------

    async def recall(self, q: RecallQuery) -> list[ScoredMemory]:
        access = self.access(q.agent_id)
        scopes = access.readable(q.scopes)
        query = self._check_text(q.query, "query")
        limit = self._check_limit(q.limit)
        if math.isnan(q.min_score) or not 0.0 <= q.min_score <= 1.0:
            raise InvalidArgument(f"min_score must be between 0 and 1, got {q.min_score}")
        config = self.retriever.config
        if q.options:
            config = config.with_overrides(options_to_overrides(q.options))
        now = self.clock()
        hits = await self._ranked(
            query,
            scopes,
            limit,
            min_score=q.min_score,
            config=config,
            now=_aware(q.as_of, "as_of") or now,
            categories=q.categories,
            explain=q.explain,
            when=self.retriever.time_arguments(q),
        )
        self.store.touch([h.memory.id for h in hits], now)
        return hits

    async def _ranked(
        self,
        query: str,
        scopes: frozenset[str],
        limit: int,
        *,
        min_score: float,
        config: RetrievalConfig,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        explain: bool = False,
        when: TimeArgs | None = None,
    ) -> list[ScoredMemory]:
        """The recall pipeline over ``scopes``: the scores Recall shows."""
        started = time.perf_counter()
        if config.rerank == Rerank.LATE_INTERACTION and self.retriever.has(Rerank.LATE_INTERACTION):
            # One model pass gives the token vectors too; the reranker reads them from
            # the embedder's cache.
            vector, _ = await self.embedder.embed_query_with_tokens(query)
        else:
            vector = await self.embedder.embed_query(query)
        self.retriever.observe("embed", time.perf_counter() - started)
        return await self.retriever.recall(
            query_text=query,
            query_vector=vector,
            scopes=scopes,
            limit=limit,
            min_score=min_score,
            now=now,
            categories=categories,
            config=config,
            explain=explain,
            when=when,
        )

    # -- Forget ------------------------------------------------------------------------

    async def forget_id(self, agent_id: str, memory_id: str) -> ForgetResult:
        access = self.access(agent_id)
        memory = self._visible(access, memory_id)
        access.check_write(memory.scope)
        await self.store.delete([memory.id])
        return ForgetResult([memory.id], [])

    async def forget_query(self, agent_id: str, query: str) -> ForgetResult:
        """Delete the one memory a query singles out, judged on the score Recall shows.

        The best match is deleted only when it is strong (``forget_strong_score``) and
        leads the runner-up by ``forget_margin``; otherwise nothing is deleted and the
        matches over ``forget_candidate_score`` come back as candidates. The floors were
        chosen from the scores of bench/calibrate.py (see the README).
        """
        access = self.access(agent_id)
        text = self._check_text(query, "query")
        lim = self.limits
        # What it shows must be readable and what it deletes writable: both rights.
        scopes = access.read & access.write
        hits = await self._ranked(
            text, scopes, lim.forget_max_candidates, min_score=0.0,
            config=self.retriever.config, now=self.clock(),
        )  # fmt: skip
        # A query in a language the embedder cannot read never deletes: its scores cannot
        # single one memory out (core.language); the candidates are still listed.
        decisive = self.retriever.reads(self.retriever.language_of(text))
        if decisive and hits and hits[0].score >= lim.forget_strong_score:
            runner_up = hits[1].score if len(hits) > 1 else 0.0
            if hits[0].score - runner_up >= lim.forget_margin:
                await self.store.delete([hits[0].memory.id])
                return ForgetResult([hits[0].memory.id], [])
        return ForgetResult([], [h for h in hits if h.score >= lim.forget_candidate_score])

    # -- Update, Get, List -----------------------------------------------------------

    async def update(self, patch: MemoryPatch) -> Memory:
        # Updates of one memory run one at a time, so a merge of metadata never works
        # from a state another update is about to replace.
        async with self.locked([patch.id]):
            return await self._update(patch)

    @contextlib.asynccontextmanager
    async def locked(self, ids: Sequence[str]) -> AsyncIterator[None]:
        """Hold the per-memory locks of ``ids`` (taken in sorted order, so two holders of
        overlapping sets never deadlock): Update and review Apply of one memory never
        interleave."""
        ordered = sorted(set(ids))
        entries = []
        for memory_id in ordered:
            entry = self._update_locks.setdefault(memory_id, _IdLock())
            entry.users += 1
            entries.append((memory_id, entry))
        taken = 0
        try:
            for _, entry in entries:
                await entry.lock.acquire()
                taken += 1
            yield
        finally:
            for _, entry in entries[:taken]:
                entry.lock.release()
            for memory_id, entry in entries:
                entry.users -= 1
                if entry.users == 0:
                    del self._update_locks[memory_id]

    async def _update(self, patch: MemoryPatch) -> Memory:
        access = self.access(patch.agent_id)
        memory = self._visible(access, patch.id)
        access.check_write(memory.scope)
        changes: dict[str, object] = {}
        vector = None
        if patch.text is not None:
            text = self._check_text(patch.text, "text")
            if text != memory.text:
                changes.update(
                    text=text,
                    content_hash=content_hash(text),
                    summary=await self._summary(text),
                )
        if patch.importance is not None:
            changes["importance"] = self._check_importance(patch.importance)
        if patch.category != Category.UNSPECIFIED:
            changes["category"] = patch.category
        if patch.metadata or patch.replace_metadata or patch.remove_metadata_keys:
            meta = {} if patch.replace_metadata else dict(memory.metadata)
            meta.update(patch.metadata)
            for k in patch.remove_metadata_keys:
                meta.pop(k, None)
            changes["metadata"] = self._check_metadata(meta)
        if patch.expires_at is not None and patch.clear_expires_at:
            raise InvalidArgument("set expires_at or clear_expires_at, not both")
        now = self.clock()
        if patch.expires_at is not None:
            expires = _aware(patch.expires_at, "expires_at")
            if expires is not None and expires <= now:
                raise InvalidArgument("expires_at is in the past")
            changes["expires_at"] = expires
        if patch.clear_expires_at:
            changes["expires_at"] = None
        if not changes:
            raise InvalidArgument(
                "the update changes nothing: set text, importance, category, metadata or expiry"
            )
        meta_now = changes.get("metadata", memory.metadata)
        assert isinstance(meta_now, dict)
        if (
            "text" in changes
            and PROVENANCE_KEY not in patch.metadata
            and meta_now.get(PROVENANCE_KEY) in TRUSTED_ASSERTERS
        ):
            # New words nobody vouched for: what a person said is no longer what it holds
            # (else a model's update of a user's memory could be promoted as the user's).
            changes["metadata"] = {**meta_now, PROVENANCE_KEY: "assistant"}
        tokens = None
        if "text" in changes:
            vector, tokens = await self._embed_document(str(changes["text"]))
            # The memory may have been deleted while the model ran.
            memory = self._visible(access, patch.id)
        updated = replace(memory, updated_at=now, **changes)  # type: ignore[arg-type]
        updated = await self.store.replace(updated, vector, tokens)
        if self.store.get(updated.id) is None:
            raise NotFound(f"memory {updated.id} was deleted while it was being updated")
        return updated

    def get(self, agent_id: str, memory_id: str) -> Memory:
        return self._visible(self.access(agent_id), memory_id)

    def list(
        self,
        agent_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        scopes: tuple[str, ...] = (),
        categories: frozenset[Category] = frozenset(),
        oldest_first: bool = False,
    ) -> Page:
        """One page of the visible memories, newest first (or oldest first); a page token
        names the last row shown, so pages never repeat or skip rows while others write."""
        access = self.access(agent_id)
        visible_scopes = access.readable(scopes)
        lim = self.limits
        size = page_size or lim.list_default_page_size
        if size > lim.list_max_page_size:
            raise InvalidArgument(
                f"page_size {size} is over the maximum {lim.list_max_page_size} "
                "(listing.max_page_size)"
            )
        listing = self.store.page(
            visible_scopes,
            now=self.clock(),
            limit=size,
            after=_decode_token(page_token) if page_token else None,
            oldest_first=oldest_first,
            categories=categories,
        )
        page = listing.memories
        token = _encode_token(page[-1]) if listing.more and page else ""
        return Page(page, token, listing.total)

    def stats(self, agent_id: str, *, daemon_wide: bool = False) -> AgentStats:
        """The agent's counts. ``index_bytes`` and ``store_rows`` cover the scopes it may
        read, so another agent's writes never move them; ``daemon_wide`` (operators only)
        reports them for the whole daemon instead."""
        access = self.access(agent_id)
        if daemon_wide:
            principals.current().check_operator("daemon-wide Stats")
        sized = None if daemon_wide else access.read
        now = self.clock()
        by_scope, by_category = self.store.count_visible(access.read, now=now)
        return AgentStats(
            total=sum(by_scope.values()),
            by_scope=by_scope,
            by_category={f"CATEGORY_{c.name}": n for c, n in by_category.items()},
            expired_pending=self.store.count_expired(access.read, now=now),
            embedding_model=self.embedder.model_name,
            embedding_dim=self.embedder.dim,
            index_bytes=self.store.index_bytes(sized),
            store_rows=self.store.row_count(sized),
        )

    # -- helpers ---------------------------------------------------------------------

    async def _embed_document(self, text: str) -> tuple[np.ndarray, np.ndarray | None]:
        if self.limits.token_vectors:
            return await self.embedder.embed_one_with_tokens(text)
        return await self.embedder.embed_one(text), None

    def _visible(self, access: Access, memory_id: str) -> Memory:
        _check_uuid(memory_id)
        memory = self.store.get(memory_id)
        # Absent, not readable, or expired all look the same: no existence leaks.
        if memory is None or memory.scope not in access.read or memory.is_expired(self.clock()):
            raise NotFound(f"memory {memory_id} not found")
        return memory

    def _check_text(self, raw: str, name: str) -> str:
        text = normalize_text(raw)
        if is_blank(text):
            raise InvalidArgument(
                f"{name} is empty (it holds no visible character, only spaces, controls "
                "such as NUL, or invisible characters)"
            )
        if len(text) > self.limits.max_chars:
            raise InvalidArgument(
                f"{name} is {len(text)} chars; the limit is {self.limits.max_chars} "
                "(store.max_chars)"
            )
        return text

    @staticmethod
    def _check_importance(value: float) -> float:
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise InvalidArgument(f"importance must be between 0 and 1, got {value}")
        return float(np.float32(value))  # what the store keeps (and the wire carries)

    def _check_limit(self, limit: int) -> int:
        if limit == 0:
            return self.limits.recall_default_limit
        if limit > self.limits.recall_max_limit:
            raise InvalidArgument(
                f"limit {limit} is over the maximum {self.limits.recall_max_limit} "
                "(recall.max_limit)"
            )
        return limit

    def _check_metadata(self, meta: dict[str, str]) -> dict[str, str]:
        lim = self.limits
        if len(meta) > lim.max_metadata_entries:
            raise InvalidArgument(
                f"metadata has {len(meta)} entries; the limit is {lim.max_metadata_entries} "
                "(store.max_metadata_entries)"
            )
        for k, v in meta.items():
            if not k or len(k) > lim.max_metadata_key_chars:
                raise InvalidArgument(
                    f"metadata key {k[:40]!r} must be 1-{lim.max_metadata_key_chars} chars"
                )
            if len(v) > lim.max_metadata_value_chars:
                raise InvalidArgument(
                    f"metadata value of {k!r} is {len(v)} chars; the limit is "
                    f"{lim.max_metadata_value_chars} (store.max_metadata_value_chars)"
                )
        return meta

    async def sweep_expired(self) -> int:
        """Delete every memory whose expiry has passed; returns how many (the sweeper)."""
        expired = self.store.expired_ids(now=self.clock())
        if expired:
            await self.store.delete(expired)
        return len(expired)


def _aware(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise InvalidArgument(f"{name} must carry a timezone")
    return value.astimezone(UTC)


def _check_uuid(memory_id: str) -> None:
    try:
        uuid.UUID(memory_id)
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument(f"id {memory_id[:64]!r} is not a UUID") from None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _encode_token(last: Memory) -> str:
    raw = json.dumps([(last.created_at - _EPOCH) // _MICROSECOND, last.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        micros, memory_id = json.loads(raw)
        return _EPOCH + int(micros) * _MICROSECOND, str(memory_id)
    except (ValueError, TypeError, OverflowError, RecursionError):
        # RecursionError: json.loads of a deeply nested forged token.
        raise InvalidArgument("page_token is invalid; pass next_page_token as returned") from None
