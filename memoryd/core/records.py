"""The domain's plain records: a memory, its category, the results of operations.

These are what ``core`` works on; ``api/convert.py`` turns them into protobuf messages
and back, ``storage`` into Arrow rows and back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from datetime import datetime

import numpy as np

# Metadata memoryd reads itself: who asserted a memory's text (``user``, ``operator``,
# ``assistant``; see core.review), and the memory a promoted copy was made from.
PROVENANCE_KEY = "asserted_by"
PROMOTED_FROM_KEY = "promoted_from"
TRUSTED_ASSERTERS = frozenset({"user", "operator"})


class Category(enum.IntEnum):
    """Mirrors ``memoryd.v1.Category``; the numbers are the wire numbers. The daemon's one
    list of categories: settings and ``memoryd ctl`` spell one by its ``label``
    ("preference"), Stats and ``--json`` by its ``wire_name`` ("CATEGORY_PREFERENCE")."""

    UNSPECIFIED = 0
    PREFERENCE = 1
    FACT = 2
    DECISION = 3
    ENTITY = 4
    OTHER = 5

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def wire_name(self) -> str:
        return f"CATEGORY_{self.name}"

    @classmethod
    def from_label(cls, label: str) -> Category:
        """The category called ``label``; ValueError naming the known labels otherwise."""
        for c in cls:
            if c is not cls.UNSPECIFIED and c.label == label:
                return c
        raise ValueError(f"{label!r} is not a category ({', '.join(CATEGORY_LABELS)})")


# What a person may name: every category but UNSPECIFIED, in wire order.
CATEGORY_LABELS = tuple(c.label for c in Category if c is not Category.UNSPECIFIED)


class StoreOutcome(enum.IntEnum):
    UNSPECIFIED = 0
    CREATED = 1
    DUPLICATE = 2
    MERGED = 3


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory as storage hands it out: never changed afterwards (a change is a new
    record, ``dataclasses.replace``), so a caller, a reader thread or a page in flight can
    hold it safely. The dict field is never mutated either: a new record gets a new one."""

    id: str
    agent_id: str
    scope: str
    text: str
    summary: str
    category: Category
    importance: float
    created_at: datetime  # timezone-aware, UTC
    updated_at: datetime
    expires_at: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    # Not on the wire as such; used for dedupe and idempotency.
    content_hash: str = ""
    idempotency_key: str = ""
    # Reinforcement: how often Recall returned it, and when last.
    access_count: int = 0
    last_accessed_at: datetime | None = None
    # Merge policy: links to related memories, and the supersede chain. A new memory
    # stores the links it makes; the index derives the other direction (related_ids of
    # the older memory, superseded_by) without writing the older memory again.
    # A tuple: most memories link nowhere and share the empty one (a list each was a
    # GC-tracked object and 64 bytes a memory, ~6 MiB and a sixth of the heap's
    # tracked objects at 100k)
    related_ids: tuple[str, ...] = ()
    supersedes: str = ""
    superseded_by: str = ""
    # ISO 639-1 code of the text's language (core.language.detect), set when stored
    language: str = ""

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


# What ``stored_memory`` sets, in the order of Memory's fields.
_STORED_FIELDS = (
    "id",
    "agent_id",
    "scope",
    "text",
    "summary",
    "category",
    "importance",
    "created_at",
    "updated_at",
    "expires_at",
    "metadata",
    "content_hash",
    "idempotency_key",
    "access_count",
    "last_accessed_at",
    "related_ids",
    "supersedes",
    "superseded_by",
    "language",
)
if tuple(f.name for f in fields(Memory)) != _STORED_FIELDS:  # pragma: no cover
    raise ImportError("records.stored_memory does not set every field of Memory")
(
    _id,
    _agent_id,
    _scope,
    _text,
    _summary,
    _category,
    _importance,
    _created_at,
    _updated_at,
    _expires_at,
    _metadata,
    _content_hash,
    _idempotency_key,
    _access_count,
    _last_accessed_at,
    _related_ids,
    _supersedes,
    _superseded_by,
    _language,
) = (getattr(Memory, name).__set__ for name in _STORED_FIELDS)
_new = object.__new__


def stored_memory(
    id: str,
    agent_id: str,
    scope: str,
    text: str,
    summary: str,
    category: Category,
    importance: float,
    created_at: datetime,
    updated_at: datetime,
    expires_at: datetime | None,
    metadata: dict[str, str],
    content_hash: str,
    idempotency_key: str,
    access_count: int,
    last_accessed_at: datetime | None,
    related_ids: tuple[str, ...],
    supersedes: str,
    language: str,
) -> Memory:
    """``Memory(...)`` with every stored field given (superseded_by is derived, ""), made
    by setting its slots directly: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, ~7 us a record against ~3 here on a slow machine, seconds of a
    1M-row load. The same record; the load at start and ``with_access`` use it."""
    memory = _new(Memory)
    _id(memory, id)
    _agent_id(memory, agent_id)
    _scope(memory, scope)
    _text(memory, text)
    _summary(memory, summary)
    _category(memory, category)
    _importance(memory, importance)
    _created_at(memory, created_at)
    _updated_at(memory, updated_at)
    _expires_at(memory, expires_at)
    _metadata(memory, metadata)
    _content_hash(memory, content_hash)
    _idempotency_key(memory, idempotency_key)
    _access_count(memory, access_count)
    _last_accessed_at(memory, last_accessed_at)
    _related_ids(memory, related_ids)
    _supersedes(memory, supersedes)
    _superseded_by(memory, "")
    _language(memory, language)
    return memory


def with_access(memory: Memory, access_count: int, last_accessed_at: datetime | None) -> Memory:
    """``dataclasses.replace(memory, access_count=..., last_accessed_at=...)``, made by
    ``stored_memory`` (setting the copy's slots): ``replace`` builds a dict of every field
    and goes through ``__init__`` (~16 us against ~3 here on a slow machine), and every
    Recall makes one per result (its access count)."""
    m = memory
    copy = stored_memory(
        m.id, m.agent_id, m.scope, m.text, m.summary, m.category, m.importance, m.created_at,
        m.updated_at, m.expires_at, m.metadata, m.content_hash, m.idempotency_key,
        access_count, last_accessed_at, m.related_ids, m.supersedes, m.language,
    )  # fmt: skip
    _superseded_by(copy, m.superseded_by)
    return copy


# Both set slots one by one: a field either of them forgets would be an unset slot
# (AttributeError on reading it), so check once, here, that neither forgets one.
_probe = stored_memory(*_STORED_FIELDS[:17], _STORED_FIELDS[18])  # type: ignore[arg-type]
if not all(hasattr(m, f) for m in (_probe, with_access(_probe, 0, None)) for f in _STORED_FIELDS):
    raise ImportError(
        "records.stored_memory or with_access does not set every field"
    )  # pragma: no cover
del _probe


@dataclass(frozen=True, slots=True)
class Explain:
    """A result's score after each recall stage (RecallRequest.explain)."""

    vector: float
    bm25: float
    vector_rank: int
    bm25_rank: int
    fused: float
    reranked: float
    after_recency: float
    after_importance: float
    after_length: float
    after_decay: float
    final: float
    mmr_position: int
    reranker: str
    query_language: str = ""
    dense_trust: float = 1.0
    time_expression: str = ""
    time_window_start: datetime | None = None
    time_window_end: datetime | None = None
    time_boost: float = 0.0


@dataclass(slots=True, frozen=True)
class ScoredMemory:
    memory: Memory
    score: float
    explain: Explain | None = None


@dataclass(slots=True, frozen=True)
class StoreResult:
    memory: Memory
    outcome: StoreOutcome
    duplicate_of: str = ""
    duplicate_score: float = 0.0


@dataclass(slots=True, frozen=True)
class KeyRecord:
    """What a Store with an idempotency key answered when it created nothing (DUPLICATE or
    MERGED): kept durably so that the key replays that answer, even after a restart.
    (A CREATED answer needs no record: the key is stored on the new memory's row.)"""

    agent_id: str
    key: str
    memory_id: str  # the memory the answer named
    outcome: StoreOutcome
    content_hash: str  # of the request's text: a reuse for other text is refused
    scope: str
    score: float
    at: datetime


@dataclass(slots=True, frozen=True)
class FollowLag:
    """How far this daemon's index trails the shared store (several daemons over one
    ``storage.uri``): the memories table's version it has applied, the newest it has seen,
    and seconds since its last successful check (None: following is off)."""

    applied_version: int
    latest_version: int
    seconds_since_check: float | None


@dataclass(slots=True, frozen=True)
class ForgetResult:
    deleted_ids: list[str]
    candidates: list[ScoredMemory]


@dataclass(slots=True)
class Candidates:
    """The candidate pool of one recall: both legs' exact scores for every candidate.

    ``vector_rank``/``lexical_rank`` are 0-based ranks within the pool by each score
    (-1 where the candidate has no lexical match at all). ``vectors`` holds the
    candidates' embeddings, row i for memory i (for MMR).
    """

    memories: list[Memory]
    vector_scores: np.ndarray  # float32[n] cosine
    lexical_scores: np.ndarray  # float32[n] BM25
    vector_rank: np.ndarray  # int64[n]
    lexical_rank: np.ndarray  # int64[n]
    vectors: np.ndarray  # float32[n, dim]
    created: np.ndarray  # float64[n] created_at, seconds since the epoch
    query_language: str = ""  # ISO 639-1 code the query was analysed in

    def __len__(self) -> int:
        return len(self.memories)


@dataclass(slots=True, frozen=True)
class Listing:
    """One page of a listing in creation order: its memories, whether more follow, and how
    many memories the whole listing holds."""

    memories: list[Memory]
    more: bool
    total: int


@dataclass(slots=True, frozen=True)
class Conflict:
    """A new decision in the merge band of another agent's decision (the conflict log)."""

    at: datetime
    new_id: str
    existing_id: str
    new_agent_id: str
    existing_agent_id: str
    new_text: str
    existing_text: str
    score: float
    category: Category
    merge_decision: str
    scope: str
    existing_scope: str
