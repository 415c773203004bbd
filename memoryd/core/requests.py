"""What callers hand the memory service and what it hands back.

The requests here are as a caller decoded them, not yet checked: ``core.validate`` turns
each into a frozen validated request before any work. ``ServiceLimits`` holds the limits
and thresholds the service applies (``config.Settings`` fills it from the settings file).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from memoryd.core.lifecycle import MergeSettings, TtlSettings
from memoryd.core.records import Category, Memory


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
    forget_strong_score: float = 0.5  # on the final score; see config.ForgetSection
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
