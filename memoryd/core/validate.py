"""Every request's input, checked once, before any work.

Each ``*_request`` function takes a request as a caller decoded it (``core.requests``)
and returns a frozen validated request, or raises ``InvalidArgument`` with a message a
person can act on: it names the field, and for a configured limit the settings key
("text is 12000 chars; the limit is 10000 (store.max_chars)"). Nothing here reads the
store or changes anything, so a refused request has changed nothing. Defaults that
depend only on the request are filled in here too (scope, importance, category, expiry),
so what the service works on is complete.

Who may do what (``core.policy``) is the service's question, asked after these checks;
so is anything that depends on stored state (e.g. whether an update changes anything).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType

import numpy as np

from memoryd.core.categorize import detect_category
from memoryd.core.errors import InvalidArgument
from memoryd.core.injection import detect_injection
from memoryd.core.lifecycle import expiry_for
from memoryd.core.page_token import decode as decode_page_token
from memoryd.core.policy import agent_scope, validate_scope
from memoryd.core.records import Category, Memory
from memoryd.core.requests import MemoryPatch, NewMemory, RecallQuery, ServiceLimits
from memoryd.core.retrieval import RetrievalConfig, Retriever, TimeArgs, options_to_overrides
from memoryd.core.text import content_hash, is_blank, normalize_text

_NO_METADATA: Mapping[str, str] = MappingProxyType({})

# -- validated requests ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValidStore:
    """A Store to run: normalised text, every default filled in."""

    text: str  # normalised (core.text.normalize_text)
    content_hash: str
    category: Category  # detected from the text when the caller left it unspecified
    importance: float
    scope: str
    metadata: Mapping[str, str]  # read-only
    idempotency_key: str
    created_at: datetime  # UTC; now when not given (a back-fill keeps its own)
    expires_at: datetime | None  # UTC, later than now; from the ttl class when given


@dataclass(frozen=True, slots=True)
class ValidRecall:
    query: str
    limit: int
    min_score: float
    config: RetrievalConfig  # the retriever's, with the request's overrides
    categories: frozenset[Category]
    scopes: tuple[str, ...]  # as asked: the service checks them against the policy
    explain: bool
    as_of: datetime | None  # UTC
    when: TimeArgs


@dataclass(frozen=True, slots=True)
class ValidPatch:
    """An Update to apply. Metadata entries are checked one by one here; the size of the
    merged metadata depends on the stored memory (``check_metadata`` again there)."""

    id: str
    text: str | None
    importance: float | None
    category: Category
    metadata: Mapping[str, str]  # read-only
    replace_metadata: bool
    remove_metadata_keys: tuple[str, ...]
    expires_at: datetime | None  # UTC, later than now
    clear_expires_at: bool


@dataclass(frozen=True, slots=True)
class ValidList:
    page_size: int
    after: tuple[datetime, str] | None  # (created_at, id) of the last row shown
    scopes: tuple[str, ...]
    categories: frozenset[Category]
    oldest_first: bool


@dataclass(frozen=True, slots=True)
class ValidImport:
    """An exported memory to import. Its links are only what the file claims: the
    service keeps those it may (``core.ingest``)."""

    id: str  # "" for a row with only a text: it gets a new id, as a Store would
    scope: str
    text: str
    content_hash: str
    category: Category
    importance: float
    created_at: datetime | None
    updated_at: datetime | None
    expires_at: datetime | None
    metadata: Mapping[str, str]  # read-only
    access_count: int
    last_accessed_at: datetime | None
    related_ids: tuple[str, ...]
    supersedes: str
    superseded_by: str


# -- requests -------------------------------------------------------------------------


def store_request(new: NewMemory, limits: ServiceLimits, now: datetime) -> ValidStore:
    text = check_text(new.text, "text", limits)
    check_injection(text, "text was not stored", limits)
    importance = check_importance(
        limits.default_importance if new.importance is None else new.importance
    )
    scope = validate_scope(new.scope) if new.scope else agent_scope(new.agent_id)
    metadata = check_metadata(new.metadata, limits)
    key = new.idempotency_key
    if len(key) > limits.max_idempotency_key_chars:
        raise InvalidArgument(
            f"idempotency_key is {len(key)} chars; the limit is "
            f"{limits.max_idempotency_key_chars} (store.max_idempotency_key_chars)"
        )
    created = aware(new.created_at, "created_at") or now
    expires = aware(new.expires_at, "expires_at")
    if expires is not None and expires <= now:
        raise InvalidArgument("expires_at is in the past; a memory must expire later than now")
    if new.ttl:
        if expires is not None:
            raise InvalidArgument("set ttl or expires_at, not both")
        expires = expiry_for(new.ttl, now, limits.ttl)
    return ValidStore(
        text=text,
        content_hash=content_hash(text),
        category=_category(new.category, text),
        importance=importance,
        scope=scope,
        metadata=metadata,
        idempotency_key=key,
        created_at=created,
        expires_at=expires,
    )


def recall_request(q: RecallQuery, limits: ServiceLimits, retriever: Retriever) -> ValidRecall:
    query = check_text(q.query, "query", limits)
    limit = q.limit or limits.recall_default_limit
    if limit > limits.recall_max_limit:
        raise InvalidArgument(
            f"limit {limit} is over the maximum {limits.recall_max_limit} (recall.max_limit)"
        )
    if math.isnan(q.min_score) or not 0.0 <= q.min_score <= 1.0:
        raise InvalidArgument(f"min_score must be between 0 and 1, got {q.min_score}")
    config = retriever.config
    if q.options:
        config = config.with_overrides(options_to_overrides(q.options))
    return ValidRecall(
        query=query,
        limit=limit,
        min_score=q.min_score,
        config=config,
        categories=q.categories,
        scopes=q.scopes,
        explain=q.explain,
        as_of=aware(q.as_of, "as_of"),
        when=retriever.time_arguments(q),
    )


def forget_query(query: str, limits: ServiceLimits) -> str:
    """The text of a Forget by query."""
    return check_text(query, "query", limits)


def patch_request(patch: MemoryPatch, limits: ServiceLimits, now: datetime) -> ValidPatch:
    check_memory_id(patch.id)
    text = None if patch.text is None else check_text(patch.text, "text", limits)
    importance = None if patch.importance is None else check_importance(patch.importance)
    metadata = _check_entries(patch.metadata, limits)
    if patch.expires_at is not None and patch.clear_expires_at:
        raise InvalidArgument("set expires_at or clear_expires_at, not both")
    expires = aware(patch.expires_at, "expires_at")
    if expires is not None and expires <= now:
        raise InvalidArgument("expires_at is in the past")
    return ValidPatch(
        id=patch.id,
        text=text,
        importance=importance,
        category=patch.category,
        metadata=metadata,
        replace_metadata=patch.replace_metadata,
        remove_metadata_keys=tuple(patch.remove_metadata_keys),
        expires_at=expires,
        clear_expires_at=patch.clear_expires_at,
    )


def list_request(
    limits: ServiceLimits,
    *,
    page_size: int,
    page_token: str,
    scopes: tuple[str, ...],
    categories: frozenset[Category],
    oldest_first: bool,
) -> ValidList:
    size = page_size or limits.list_default_page_size
    if size > limits.list_max_page_size:
        raise InvalidArgument(
            f"page_size {size} is over the maximum {limits.list_max_page_size} "
            "(listing.max_page_size)"
        )
    return ValidList(
        page_size=size,
        after=decode_page_token(page_token) if page_token else None,
        scopes=scopes,
        categories=categories,
        oldest_first=oldest_first,
    )


def conflicts_limit(limit: int, limits: ServiceLimits) -> int:
    """ListConflicts' limit (default 50)."""
    limit = limit or 50
    if limit > limits.conflicts_max:
        # A fixed maximum (no setting) of ListConflicts.
        raise InvalidArgument(
            f"limit {limit} is over the maximum {limits.conflicts_max} of ListConflicts"
        )
    return limit


def import_request(memory: Memory, agent_id: str, limits: ServiceLimits) -> ValidImport:
    """An exported memory, checked as a Store is (its importance as given, unrounded).
    Its ids (its own, its links') in the canonical form of their UUIDs."""
    memory_id = canonical_id(memory.id) if memory.id else ""
    scope = validate_scope(memory.scope or agent_scope(agent_id))
    text = check_text(memory.text, "text", limits)
    check_injection(text, "text was not imported", limits)
    if memory.summary:
        # The file's summary is not kept (the daemon makes its own), but a row that carries
        # an injection in it is refused as one in its text is: the file is not to be trusted.
        check_injection(memory.summary, "summary was not imported", limits)
    check_importance(memory.importance)
    metadata = check_metadata(memory.metadata, limits)
    return ValidImport(
        id=memory_id,
        scope=scope,
        text=text,
        content_hash=content_hash(text),
        category=_category(memory.category, text),
        importance=memory.importance,
        created_at=aware(memory.created_at, "created_at"),
        updated_at=aware(memory.updated_at, "updated_at"),
        expires_at=aware(memory.expires_at, "expires_at"),
        metadata=metadata,
        access_count=max(0, memory.access_count),
        last_accessed_at=aware(memory.last_accessed_at, "last_accessed_at"),
        related_ids=tuple(_linked_id(i) for i in memory.related_ids),
        supersedes=_linked_id(memory.supersedes),
        superseded_by=_linked_id(memory.superseded_by),
    )


# -- fields ---------------------------------------------------------------------------


def check_text(raw: str, name: str, limits: ServiceLimits) -> str:
    """``raw`` normalised (core.text), refused when blank or over ``store.max_chars``."""
    text = normalize_text(raw)
    if is_blank(text):
        raise InvalidArgument(
            f"{name} is empty (it holds no visible character, only spaces, controls "
            "such as NUL, or invisible characters)"
        )
    if len(text) > limits.max_chars:
        raise InvalidArgument(
            f"{name} is {len(text)} chars; the limit is {limits.max_chars} (store.max_chars)"
        )
    return text


def check_injection(text: str, refused: str, limits: ServiceLimits) -> None:
    """Refuse ``text`` when it looks like a prompt injection (a memory is shown to models
    again), unless ``store.reject_injection`` is off; ``refused`` opens the message ("text
    was not stored"). Every write of words a model will read asks this: Store, Update,
    Import."""
    if limits.reject_injection and (why := detect_injection(text)) is not None:
        raise InvalidArgument(
            f"{refused}: it {why} and looks like a prompt injection (store.reject_injection)"
        )


def check_importance(value: float) -> float:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"importance must be between 0 and 1, got {value}")
    return float(np.float32(value))  # what the store keeps (and the wire carries)


def check_metadata(meta: Mapping[str, str], limits: ServiceLimits) -> Mapping[str, str]:
    """A read-only copy of ``meta``, refused when it has too many entries or one is out
    of bounds."""
    if len(meta) > limits.max_metadata_entries:
        raise InvalidArgument(
            f"metadata has {len(meta)} entries; the limit is {limits.max_metadata_entries} "
            "(store.max_metadata_entries)"
        )
    return _check_entries(meta, limits)


def _check_entries(meta: Mapping[str, str], limits: ServiceLimits) -> Mapping[str, str]:
    for k, v in meta.items():
        if not k or len(k) > limits.max_metadata_key_chars:
            raise InvalidArgument(
                f"metadata key {k[:40]!r} must be 1-{limits.max_metadata_key_chars} chars "
                "(store.max_metadata_key_chars)"
            )
        if len(v) > limits.max_metadata_value_chars:
            raise InvalidArgument(
                f"metadata value of {k!r} is {len(v)} chars; the limit is "
                f"{limits.max_metadata_value_chars} (store.max_metadata_value_chars)"
            )
    return MappingProxyType(dict(meta)) if meta else _NO_METADATA


def _category(given: Category, text: str) -> Category:
    """The category asked for, or the one detected from the text when none was."""
    return detect_category(text) if given == Category.UNSPECIFIED else given


def check_memory_id(memory_id: str) -> str:
    try:
        uuid.UUID(memory_id)
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument(f"id {memory_id[:64]!r} is not a UUID") from None
    return memory_id


def canonical_id(memory_id: str) -> str:
    """``memory_id`` as the one spelling of its UUID the daemon gives ids in (lower case,
    hyphenated, 36 characters). ``uuid.UUID`` also reads upper case, braces, a ``urn:uuid:``
    prefix and any number of hyphens anywhere: an id kept as a file spelled it could be
    megabytes long, or another memory's UUID spelled otherwise (two memories to the
    daemon, one to whoever compares UUIDs)."""
    check_memory_id(memory_id)
    return str(uuid.UUID(memory_id))


def _linked_id(memory_id: str) -> str:
    """An id a row links to, canonical when it is a UUID (any other never names a memory
    and is dropped with the links the service does not keep)."""
    try:
        return str(uuid.UUID(memory_id)) if memory_id else ""
    except (ValueError, AttributeError, TypeError):
        return ""


def aware(value: datetime | None, name: str) -> datetime | None:
    """``value`` in UTC; a time without a time zone is refused (it names no instant)."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise InvalidArgument(f"{name} must carry a timezone")
    return value.astimezone(UTC)
