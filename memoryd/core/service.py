"""The memory service: the domain's operations, independent of the wire.

``api`` converts requests into these calls; ``storage`` and ``inference`` provide the
store and embedder through ``core.protocols``. Each operation takes the same steps, as
qdrant's handlers do: who calls, and what that agent may read and write (``access``);
the input checked completely (``core.validate``: a bad request changes nothing and
never reaches the model); the scopes it touches checked against those rights; then the
work, delegated:

    core.validate      every request checked once, into a frozen validated request
    core.ingest        Store, Import, Update: dedupe, merge, summaries, conflict log
    core.retrieval     Recall's pipeline (this module embeds the query and hands it on)
    core.page_token    List's page tokens
    core.singleflight  concurrent twins of one piece of work run once
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from memoryd.core import principals, tracing, validate
from memoryd.core.ingest import Ingest, visible
from memoryd.core.page_token import encode as encode_page_token
from memoryd.core.policy import Access, AccessPolicy, validate_agent_id
from memoryd.core.protocols import ConflictLog, Embedder, MemoryStore, TextModel
from memoryd.core.records import (
    Category,
    Conflict,
    ForgetResult,
    Memory,
    ScoredMemory,
    StoreResult,
)
from memoryd.core.requests import (
    AgentStats,
    MemoryPatch,
    NewMemory,
    Page,
    RecallQuery,
    ServiceLimits,
)
from memoryd.core.retrieval import Rerank, RetrievalConfig, Retriever, TimeArgs

__all__ = [
    "AgentStats",
    "MemoryPatch",
    "MemoryService",
    "NewMemory",
    "Page",
    "RecallQuery",
    "ServiceLimits",
]


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
        # Ingest reads the collaborators above from this service at each use, so one
        # replaced here is replaced there too.
        self._ingest = Ingest(self)
        self._update_locks: dict[str, _IdLock] = {}

    def access(self, agent_id: str) -> Access:
        """What ``agent_id`` may read and write, for the calling principal: refused when the
        principal may not act for that agent, before anything else is looked at."""
        validate_agent_id(agent_id)
        principals.current().check_agent(agent_id)
        principals.set_tenant(agent_id)
        return self.policy.access(agent_id)

    # -- Store, Import ---------------------------------------------------------------

    async def store_memory(self, new: NewMemory) -> StoreResult:
        access = self.access(new.agent_id)
        request = validate.store_request(new, self.limits, self.clock())
        access.check_write(request.scope)
        return await self._ingest.store(access, request)

    async def import_memory(self, agent_id: str, memory: Memory) -> bool:
        """Store an exported memory as it was (see ``Ingest.import_memory``); False when
        it (or its text in its scope) exists."""
        access = self.access(agent_id)
        request = validate.import_request(memory, agent_id, self.limits)
        access.check_write(request.scope)
        return await self._ingest.import_memory(access, request)

    # -- Recall ------------------------------------------------------------------------

    async def recall(self, q: RecallQuery) -> list[ScoredMemory]:
        access = self.access(q.agent_id)
        request = validate.recall_request(q, self.limits, self.retriever)
        scopes = access.readable(request.scopes)
        now = self.clock()
        hits = await self._ranked(
            request.query,
            scopes,
            request.limit,
            min_score=request.min_score,
            config=request.config,
            now=now,  # what is visible (expiry): the real time, whatever as_of says
            as_of=request.as_of,
            categories=request.categories,
            explain=request.explain,
            when=request.when,
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
        as_of: datetime | None = None,
    ) -> list[ScoredMemory]:
        """The recall pipeline over ``scopes``: the scores Recall shows. ``now`` decides
        what is visible (expired memories are not); ``as_of`` (default ``now``) is the
        time recency and decay are judged at."""
        started = time.perf_counter()
        # One model pass gives the token vectors too; the reranker reads them from the
        # embedder's cache.
        tokens = config.rerank == Rerank.LATE_INTERACTION and self.retriever.has(
            Rerank.LATE_INTERACTION
        )
        prepared = None
        with tracing.span("embed", kind="query"):
            begin = getattr(self.embedder, "begin_query", None)  # (BatchingEmbedder's)
            if begin is not None:
                pending = begin(query, tokens=tokens)
                if not pending.ready:
                    # The model runs on its own thread (and core): meanwhile the query's
                    # text is analysed and its BM25 leg found here, not after it.
                    prepared = self.retriever.prepare(
                        query_text=query,
                        scopes=scopes,
                        limit=limit,
                        now=now,
                        categories=categories,
                        config=config,
                        when=when,
                    )
                vector = (await pending)[0]
            elif tokens:
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
            prepared=prepared,
            as_of=as_of,
        )

    # -- Forget ------------------------------------------------------------------------

    async def forget_id(self, agent_id: str, memory_id: str) -> ForgetResult:
        access = self.access(agent_id)
        validate.check_memory_id(memory_id)
        memory = visible(self.store, access, memory_id, self.clock())
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
        text = validate.forget_query(query, self.limits)
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

    async def sweep_expired(self) -> int:
        """Delete every memory whose expiry has passed; returns how many (the sweeper)."""
        expired = self.store.expired_ids(now=self.clock())
        if expired:
            await self.store.delete(expired)
        return len(expired)

    # -- Update ------------------------------------------------------------------------

    async def update(self, patch: MemoryPatch) -> Memory:
        access = self.access(patch.agent_id)
        request = validate.patch_request(patch, self.limits, self.clock())
        # Updates of one memory run one at a time, so a merge of metadata never works
        # from a state another update is about to replace.
        async with self.locked([request.id]):
            return await self._ingest.update(access, request)

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

    # -- Get, Stats, Export, ListConflicts, List ---------------------------------------

    def get(self, agent_id: str, memory_id: str) -> Memory:
        access = self.access(agent_id)
        validate.check_memory_id(memory_id)
        return visible(self.store, access, memory_id, self.clock())

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
            by_category={c.wire_name: n for c, n in by_category.items()},
            expired_pending=self.store.count_expired(access.read, now=now),
            embedding_model=self.embedder.model_name,
            embedding_dim=self.embedder.dim,
            index_bytes=self.store.index_bytes(sized),
            store_rows=self.store.row_count(sized),
        )

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

    def list_conflicts(self, agent_id: str, limit: int = 0) -> list[Conflict]:
        """Conflicts whose two memories are still there and the agent may both read,
        newest first, with their texts as they are now. The log keeps each entry's texts
        as they were; served from it as such, an entry showed a memory after a Forget, its
        expiry or an Update that redacted it (helper-66's review)."""
        access = self.access(agent_id)
        limit = validate.conflicts_limit(limit, self.limits)
        if self.conflicts is None:
            return []
        now = self.clock()
        shown: list[Conflict] = []
        for c in self.conflicts.recent(self.limits.conflicts_max * 10, access.read):
            if len(shown) >= limit:
                break
            new, existing = self.store.get(c.new_id), self.store.get(c.existing_id)
            if any(
                m is None or m.scope not in access.read or m.is_expired(now)
                for m in (new, existing)
            ):
                continue
            assert new is not None and existing is not None
            shown.append(
                replace(
                    c,
                    new_text=new.text,
                    existing_text=existing.text,
                    scope=new.scope,
                    existing_scope=existing.scope,
                )
            )
        return shown

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
        request = validate.list_request(
            self.limits,
            page_size=page_size,
            page_token=page_token,
            scopes=scopes,
            categories=categories,
            oldest_first=oldest_first,
        )
        listing = self.store.page(
            access.readable(request.scopes),
            now=self.clock(),
            limit=request.page_size,
            after=request.after,
            oldest_first=request.oldest_first,
            categories=request.categories,
        )
        page = listing.memories
        token = encode_page_token(page[-1]) if listing.more and page else ""
        return Page(page, token, listing.total)
