"""``core.protocols.MemoryStore`` over LanceDB (durable) and the hot index (reads).

Writes go to LanceDB first; only once the commit is on disk does the hot index change,
so every read sees exactly the acknowledged writes. Reads never touch LanceDB.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from datetime import datetime

import numpy as np

from memoryd.core.records import Candidates, Category, KeyRecord, Memory
from memoryd.storage.hot_index import HotIndex
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.lexical import Analyzer

log = logging.getLogger(__name__)


class Repository:
    def __init__(
        self,
        durable: LanceStore,
        analyzer: Analyzer | None = None,
        max_tokens: int = 64,
        *,
        ann_threshold: int = 200_000,
        ann_ef_search: int = 128,
        ann_build_threads: int = 1,
    ):
        self.durable = durable
        self.max_tokens = max_tokens  # token vectors kept per memory (late interaction)
        self.index = HotIndex(
            durable.dim,
            analyzer,
            ann_threshold=ann_threshold,
            ann_ef_search=ann_ef_search,
            ann_build_threads=ann_build_threads,
        )
        self._touched: set[str] = set()
        self._keys: dict[tuple[str, str], KeyRecord] = {}

    def open(self) -> float:
        """Load every stored memory into the hot index, start the writer; returns seconds."""
        start = time.perf_counter()
        with self.index.bulk_load():
            for memory, vector, tokens in self.durable.scan():
                self.index.put(memory, vector, tokens)
        for record in self.durable.read_keys():
            self._keys[(record.agent_id, record.key)] = record
        self.durable.start()
        took = time.perf_counter() - start
        log.info("loaded %d memories into the hot index in %.2fs", len(self.index), took)
        return took

    def close(self) -> None:
        self.index.close()
        self.durable.close()

    async def add(
        self, memory: Memory, vector: np.ndarray, tokens: np.ndarray | None = None
    ) -> None:
        tokens = quantize_tokens(tokens, self.max_tokens)
        if not memory.language:
            memory.language = self.index.analyzer.detect(memory.text)
        await self.durable.add([(memory, vector, tokens)])
        self.index.put(memory, vector, tokens)

    async def replace(
        self, memory: Memory, vector: np.ndarray | None, tokens: np.ndarray | None = None
    ) -> None:
        if vector is None:  # text unchanged: keep the vector and token vectors
            vector = self.index.vector_of(memory.id)
            if vector is None:
                raise KeyError(memory.id)
            tokens = self.index.tokens_of(memory.id)
        else:  # a new text: its language again (a copied record may carry the old one)
            memory.language = self.index.analyzer.detect(memory.text)
        tokens = quantize_tokens(tokens, self.max_tokens)
        await self.durable.update([(memory, vector, tokens)])
        # A delete that committed while this update waited wins: never resurrect.
        if self.index.get(memory.id) is not None:
            self.index.put(memory, vector, tokens)

    async def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        await self.durable.delete(ids)
        for memory_id in ids:
            self.index.remove(memory_id)

    def get(self, memory_id: str) -> Memory | None:
        return self.index.get(memory_id)

    def vector_of(self, memory_id: str) -> np.ndarray | None:
        return self.index.vector_of(memory_id)

    def tokens_of(self, memory_id: str) -> np.ndarray | None:
        return self.index.tokens_of(memory_id)

    def find_by_hash(self, scope: str, content_hash: str) -> Memory | None:
        return self.index.find_by_hash(scope, content_hash)

    def key_record(self, agent_id: str, key: str) -> KeyRecord | None:
        return self._keys.get((agent_id, key))

    async def record_key(self, record: KeyRecord) -> None:
        await self.durable.record_keys([record])
        self._keys[(record.agent_id, record.key)] = record

    def find_by_idempotency_key(self, agent_id: str, key: str) -> Memory | None:
        return self.index.find_by_idempotency_key(agent_id, key)

    def search(
        self,
        query: np.ndarray,
        scopes: Iterable[str],
        k: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
    ) -> list[tuple[Memory, float]]:
        return self.index.search(query, scopes, k, now=now, categories=categories)

    def candidates(
        self,
        query: np.ndarray,
        query_text: str,
        scopes: Iterable[str],
        pool: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        lexical: bool = True,
        vector: bool = True,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> Candidates:
        return self.index.candidates(
            query, query_text, scopes, pool, now=now, categories=categories,
            lexical=lexical, vector=vector, created_after=created_after,
            created_before=created_before,
        )  # fmt: skip

    def touch(self, ids: Sequence[str], now: datetime) -> None:
        for memory_id in ids:
            memory = self.index.get(memory_id)
            if memory is not None:
                memory.access_count += 1
                memory.last_accessed_at = now
                self._touched.add(memory_id)

    async def flush_access_counts(self) -> int:
        """Persist the access counts changed since the last flush (one append to the
        access log, not a rewrite of the memories' rows)."""
        ids, self._touched = self._touched, set()
        entries = []
        for memory_id in ids:
            memory = self.index.get(memory_id)
            if memory is not None:
                entries.append((memory_id, memory.access_count, memory.last_accessed_at))
        if entries:
            try:
                await self.durable.record_access(entries)
            except BaseException:
                self._touched |= ids  # kept for the next flush (say, once space is freed)
                raise
        return len(entries)

    def visible(
        self,
        scopes: Iterable[str],
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
    ) -> list[Memory]:
        return self.index.visible(scopes, now=now, categories=categories)

    def count_visible(
        self, scopes: Iterable[str], *, now: datetime
    ) -> tuple[dict[str, int], dict[Category, int]]:
        return self.index.count_visible(scopes, now=now)

    def count_expired(self, scopes: Iterable[str], *, now: datetime) -> int:
        return self.index.count_expired(scopes, now=now)

    def scopes(self) -> list[str]:
        return sorted(self.index.scope_sizes())

    def expired_ids(self, *, now: datetime) -> list[str]:
        return self.index.expired_ids(now=now)

    def index_bytes(self, scopes: Iterable[str] | None = None) -> int:
        return self.index.nbytes(scopes)

    def row_count(self, scopes: Iterable[str] | None = None) -> int:
        return len(self.index) if scopes is None else self.index.rows_in(scopes)


def quantize_tokens(tokens: np.ndarray | None, max_tokens: int) -> np.ndarray | None:
    """Unit-length token vectors as int8 (x 127), at most ``max_tokens`` rows: a quarter of
    float32's memory; the cosine error is about 0.005, far below what reranking notices."""
    if tokens is None or tokens.dtype == np.int8:
        return tokens
    clipped = np.clip(np.asarray(tokens[:max_tokens], dtype=np.float32), -1.0, 1.0)
    return np.ascontiguousarray(np.rint(clipped * 127.0), dtype=np.int8)
