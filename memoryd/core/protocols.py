"""What the domain needs from the outside, stated as small protocols.

``storage`` and ``inference`` implement these; ``server.py`` wires the concrete classes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Protocol

import numpy as np

from memoryd.core.records import Candidates, Category, Conflict, KeyRecord, Listing, Memory


class Embedder(Protocol):
    @property
    def model_name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    async def embed_query(self, text: str) -> np.ndarray:
        """An L2-normalised float32 vector for a query (may be cached)."""
        ...

    async def embed_document(self, text: str) -> np.ndarray:
        """An L2-normalised float32 vector for a document to store."""
        ...

    async def embed_query_with_tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The query vector and its L2-normalised token vectors [t, dim] (cached)."""
        ...

    async def embed_document_with_tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """A document's vector and token vectors, from one model pass."""
        ...


class Reranker(Protocol):
    async def score(self, query: str, memories: Sequence[Memory]) -> np.ndarray:
        """Relevance of each memory to the query, float32 in [0, 1], higher is better."""
        ...


class MemoryReader(Protocol):
    """Reads of the stored memories, answered from memory (the hot index), never from disk.

    They see exactly the acknowledged writes. Every read that takes scopes never returns a
    row outside them. A record handed out never changes afterwards (``records.Memory``).
    """

    def get(self, memory_id: str) -> Memory | None: ...

    def vector_of(self, memory_id: str) -> np.ndarray | None: ...

    def tokens_of(self, memory_id: str) -> np.ndarray | None:
        """The memory's stored token vectors (int8 = unit vector x 127, [t, dim]), if any."""
        ...

    def tokens_of_many(self, memory_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """``tokens_of`` of each, back to back: (int8 [t, dim], starts int64 [n + 1]);
        None if any has none."""
        ...

    def find_by_hash(self, scope: str, content_hash: str) -> Memory | None: ...

    def find_by_idempotency_key(self, agent_id: str, key: str) -> Memory | None: ...

    def key_record(self, agent_id: str, key: str) -> KeyRecord | None:
        """The recorded answer of a keyed Store that created nothing, if any."""
        ...

    def search(
        self,
        query: np.ndarray,
        scopes: Iterable[str],
        k: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
    ) -> list[tuple[Memory, float]]:
        """Exact cosine top-k over the given scopes' unexpired memories, best first."""
        ...

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
        prepared: object = None,
    ) -> Candidates:
        """Hybrid candidates (best ``pool`` by cosine and by BM25), scored on both legs;
        only memories created in [created_after, created_before) when those are given.
        ``Candidates.query_language`` is the language the query was analysed in.
        ``prepared``: ``lexical_leg``'s answer for the same arguments, used when nothing
        it read has changed since (else worked out again)."""
        ...

    def lexical_leg(
        self,
        query_text: str,
        scopes: Iterable[str],
        pool: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        lexical: bool = True,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> object:
        """What ``candidates`` needs of the query's text alone (analysis, filters, the
        best ``pool`` by BM25), worked out ahead: opaque, for ``candidates``' ``prepared``."""
        ...

    def page(
        self,
        scopes: Iterable[str],
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        oldest_first: bool = False,
        categories: frozenset[Category] = frozenset(),
    ) -> Listing:
        """Up to ``limit`` unexpired memories of the scopes in creation order, (created_at,
        id) descending (ascending with ``oldest_first``), starting after the key ``after``:
        a later page never repeats or skips a row that exists throughout."""
        ...

    def visible(
        self, scopes: Iterable[str], *, now: datetime, categories: frozenset[Category] = frozenset()
    ) -> list[Memory]:
        """All unexpired memories in the scopes, newest first (ties by id): for exports and
        reviews that want every one; a listing pages with ``page``."""
        ...

    def count_visible(
        self, scopes: Iterable[str], *, now: datetime
    ) -> tuple[dict[str, int], dict[Category, int]]:
        """How many unexpired memories the scopes hold, by scope and by category (what
        ``visible`` would list, counted without listing)."""
        ...

    def count_expired(self, scopes: Iterable[str], *, now: datetime) -> int: ...

    def scopes(self) -> list[str]:
        """Every scope that holds a memory (for operators' daemon-wide views)."""
        ...

    def expired_ids(self, *, now: datetime, scopes: Iterable[str] | None = None) -> list[str]:
        """Every memory whose expiry has passed, in ``scopes`` (default: every scope, for
        the sweeper)."""
        ...

    def index_bytes(self, scopes: Iterable[str] | None = None) -> int:
        """Memory the index holds for ``scopes`` (default: every scope)."""
        ...

    def row_count(self, scopes: Iterable[str] | None = None) -> int:
        """Rows stored in ``scopes`` (default: every scope), expired ones included."""
        ...


class MemoryWriter(Protocol):
    """Writes, each durable before it returns: the writer owns the order "disk, then the
    index", so a read never sees a write that a crash could undo. Each returns the record
    as readers now see it (its language detected, its links derived)."""

    async def add(
        self, memory: Memory, vector: np.ndarray, tokens: np.ndarray | None = None
    ) -> Memory:
        """Durably write a new memory; returns once it survives a crash."""
        ...

    async def replace(
        self, memory: Memory, vector: np.ndarray | None, tokens: np.ndarray | None = None
    ) -> Memory:
        """Durably overwrite a memory (same id); ``vector`` None keeps the old vector and
        token vectors. A memory deleted meanwhile stays deleted."""
        ...

    async def delete(self, ids: Sequence[str]) -> None:
        """Durably delete memories."""
        ...

    async def tokens_to_copy(self, memory_id: str) -> np.ndarray | None:
        """The memory's token vectors for a write that carries them over to another record
        (``tokens_of``, else the stored ones when the index cannot give them: its token
        file damaged, or still being written after a start)."""
        ...

    async def record_key(self, record: KeyRecord) -> None:
        """Durably record the answer of a keyed Store that created nothing."""
        ...

    def touch(self, ids: Sequence[str], now: datetime) -> None:
        """Count an access (a recall returned them); persisted in the background."""
        ...

    async def claim_key(self, agent_id: str, key: str, memory_id: str) -> str:
        """Across daemons over one store, make ``memory_id`` (written already) the answer
        of idempotency key ``key`` unless a Store on another daemon claimed it first; returns
        the memory id the key names (``memory_id`` itself with a single daemon)."""
        ...

    async def catch_up(self) -> None:
        """Apply to the index what other daemons over the same store committed up to now
        (before deciding that a Store is new: its key and its exact text are then checked
        against them too); nothing to do for a daemon that is its store's only writer."""
        ...


class MemoryStore(MemoryReader, MemoryWriter, Protocol):
    """Both sides, for the service that reads and writes; readers (retrieval, reranking)
    take a ``MemoryReader`` only."""


class TextModel(Protocol):
    """A language model behind an OpenAI-compatible endpoint (optional)."""

    async def complete(self, system: str, user: str, *, max_tokens: int = 400) -> str: ...


class ConflictLog(Protocol):
    """Append-only log of conflicting decisions."""

    def append(self, conflict: Conflict) -> None: ...

    def recent(self, limit: int, scopes: Collection[str] | None = None) -> list[Conflict]:
        """The newest ``limit`` entries, newest first, of those logged between memories
        of ``scopes`` (None: any); their texts may be left out."""
        ...
