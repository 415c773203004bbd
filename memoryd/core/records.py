"""The domain's plain records: a memory, its category, the results of operations.

These are what ``core`` works on; ``api/convert.py`` turns them into protobuf messages
and back, ``storage`` into Arrow rows and back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class Category(enum.IntEnum):
    """Mirrors ``memoryd.v1.Category``; the numbers are the wire numbers."""

    UNSPECIFIED = 0
    PREFERENCE = 1
    FACT = 2
    DECISION = 3
    ENTITY = 4
    OTHER = 5


class StoreOutcome(enum.IntEnum):
    UNSPECIFIED = 0
    CREATED = 1
    DUPLICATE = 2


@dataclass(slots=True)
class Memory:
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

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass(slots=True, frozen=True)
class ScoredMemory:
    memory: Memory
    score: float


@dataclass(slots=True, frozen=True)
class StoreResult:
    memory: Memory
    outcome: StoreOutcome
    duplicate_of: str = ""
    duplicate_score: float = 0.0


@dataclass(slots=True, frozen=True)
class ForgetResult:
    deleted_ids: list[str]
    candidates: list[ScoredMemory]
