"""Review: proposals over an agent's memory, and the approval-gated apply of chosen items.

Prepare computes, where the vectors are, what a person may want to change in the memories
one agent may read, and changes nothing:

    DUPLICATE   two memories of one scope with cosine >= review.duplicate_min_score (a band
                under store.duplicate_threshold; equal texts too) and no contradiction cue:
                forget one, keep the other (the one recalled more, then the more
                important, then the older)
    CONFLICT    two memories of one scope and category with cosine in
                [store.merge_band_low, 1) and a contradiction cue (negation on one side
                only, different numbers, opposite words such as like/dislike, one word
                swapped for another: green/blue), or a pair
                of the conflict log (another agent's decision in the merge band): the
                newer supersedes the older (kept as history, no longer recalled)
    STALE       expired but not yet swept, superseded, or not recalled for
                review.stale_after_days (last recall, else creation): forget
    PROMOTION   asked for by the caller: move a memory one step up the ladder
                agent:<id> -> a shared scope (workspace:<x>, project:<x>, ...) -> global

Pairs are looked for among each memory's 5 nearest neighbours of its scope (an exact
matrix product over the scope's vectors, in blocks of 512 rows), among at most
review.max_memories memories per Prepare: the newest (the response says ``truncated`` when
the scopes hold more). The event loop only takes a snapshot (a keyset page of frozen
records and a copy of their vectors, yielding every 1,024 rows); pairs, cues, items, hashes
and signatures are computed from it in a worker thread, so a large Prepare never stalls
other callers' RPCs. At most review.max_concurrent_prepares run at once; one more is
refused OVERLOADED with a retry-after.

Each item carries a stable id (from its kind and action), a risk class, the memories it
touches with a hash of the fields the action depends on (:func:`memory_hash`), the
evidence, the action and its preconditions, and the bundle id of its Prepare (new each
time) and a signature: an HMAC-SHA256, with the daemon's secret (``<data_dir>/review.key``,
mode 0600), over the agent, bundle id, item id, kind, risk class, action, every memory's
hash and the preconditions (:func:`signed_bytes`). The vault CLI checks each memory it
shows against its hash (``memoryd_client.review_hash``): a text edited in the vault's copy
of an item is refused there, never approved.

Apply takes approved items back (review.max_apply_items per call) and, for each on its own,
all or nothing, under the per-memory locks Update uses: (1) the item id must be the one its
kind and action give and its hashes must name exactly the action's memories, else that item
is REFUSED; then its signature must verify for the calling agent, else it is a CONFLICT (an
item edited in the vault, invented, or prepared for another agent applies nothing), and an
item approved in bulk as low risk (``Approval.LOW_RISK``) must be one this daemon classed
LOW (the class it signed, not the one the vault shows), else it is REFUSED; (2) an
item whose change is already there is ALREADY_APPLIED (a second apply is a no-op); (3)
every memory is re-read: gone, no longer readable, or a different hash is a CONFLICT, as
is a precondition that no longer holds (a stale memory recalled since, by the threshold
it was prepared with; a target scope that now holds the same text); (4) the rules, else
REFUSED: the caller's agent must be allowed to write every scope the action changes; a
promotion goes one step up the ladder, and to a shared or global scope it needs
provenance ``user`` (below) and an approval of that item by itself (``Approval.ITEM``),
never a bulk one, from a caller whose credential is an operator or a reviewer
(``Principal.may_review``): an agent's own key cannot approve its words into a shared scope.

Provenance: the metadata key ``asserted_by``. Capture sets ``user`` (it keeps user
messages only); a host storing on a person's word sets ``user``, a model's own tool call
``assistant``; an Update that changes the text without saying who asserted the new words
turns ``user``/``operator`` into ``assistant``. A memory whose ``asserted_by`` is anything
but ``user`` or ``operator`` (``assistant``, or unknown) may have been asserted by an
assistant alone and is never promoted to a shared or global scope.

A promotion writes a copy into the target scope (same text, vector, owner and times; the
original's id in ``promoted_from`` metadata) under an id derived from the original's id and
the target scope with the daemon's secret, and then deletes the original; every later apply
of the item finds that copy by id (also in a scope the caller may only write), so if the
daemon stops in between, the next apply finishes by deleting the original, and an apply
after that is ALREADY_APPLIED.

Apply is one item at a time with index lookups only (no scan of a scope), yielding to the
event loop between items.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import hmac
import json
import re
import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from difflib import SequenceMatcher
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

# (the module itself: "from memoryd_client import" goes through the package's lazy names,
# which load grpc before `memoryd serve` has set GRPC_VERBOSITY)
from memoryd_client.review_hash import memory_hash as shared_memory_hash
from memoryd_client.secret_file import SecretFileError, load_or_create_secret

from memoryd.core.errors import (
    ConfigError,
    InvalidArgument,
    MemorydError,
    Overloaded,
    PermissionDenied,
)
from memoryd.core.injection import detect_injection
from memoryd.core.policy import Access, validate_scope
from memoryd.core.principals import CURRENT
from memoryd.core.protocols import MemoryStore
from memoryd.core.records import (
    PROMOTED_FROM_KEY,
    PROVENANCE_KEY,
    TRUSTED_ASSERTERS,
    Memory,
)

if TYPE_CHECKING:
    from memoryd.core.service import MemoryService


class Kind(enum.IntEnum):
    """Mirrors ``memoryd.v1.ReviewKind``."""

    UNSPECIFIED = 0
    DUPLICATE = 1
    CONFLICT = 2
    STALE = 3
    PROMOTION = 4


class Risk(enum.IntEnum):
    UNSPECIFIED = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3


class ActionKind(enum.IntEnum):
    UNSPECIFIED = 0
    FORGET = 1
    SUPERSEDE = 2
    PROMOTE = 3


class Approval(enum.IntEnum):
    """Mirrors ``memoryd.v1.Approval``. LOW_RISK is a bulk approval of what the person's
    tool listed as low risk: Apply takes it only for an item this daemon classed LOW."""

    UNSPECIFIED = 0
    ITEM = 1
    BULK = 2
    LOW_RISK = 3


class Outcome(enum.IntEnum):
    UNSPECIFIED = 0
    APPLIED = 1
    ALREADY_APPLIED = 2
    CONFLICT = 3
    REFUSED = 4


MAX_STALE_AFTER_DAYS = 36_500  # timedelta stops near 2.7 million years; a wire uint32 does not


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    duplicate_min_score: float = 0.85
    conflict_min_score: float = 0.70  # store.merge_band_low
    stale_after_days: int = 90
    max_items: int = 200
    max_memories: int = 5000  # scanned per Prepare, newest first
    max_promotions: int = 100
    max_apply_items: int = 200  # items per Apply
    max_concurrent_prepares: int = 2  # more at once are refused OVERLOADED (retry)


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    memory_id: str
    keep_id: str = ""
    target_scope: str = ""
    stale_after_days: int = 0  # STALE: the threshold it was prepared with (not in the id)

    def memory_ids(self) -> tuple[str, ...]:
        return (self.memory_id, self.keep_id) if self.keep_id else (self.memory_id,)


@dataclass(frozen=True, slots=True)
class Precondition:
    kind: str
    memory_id: str
    detail: str


@dataclass(frozen=True, slots=True)
class Item:
    item_id: str
    kind: Kind
    risk: Risk
    memories: tuple[Memory, ...]
    hashes: tuple[str, ...]  # one per memory
    score: float
    reason: str
    action: Action
    preconditions: tuple[Precondition, ...]
    needs_item_approval: bool = False
    blocked: str = ""
    bundle_id: str = ""  # set by Prepare, with the signature
    signature: str = ""


@dataclass(frozen=True, slots=True)
class PrepareQuery:
    agent_id: str
    scopes: tuple[str, ...] = ()
    kinds: frozenset[Kind] = frozenset()
    promotions: tuple[tuple[str, str], ...] = ()  # (memory id, target scope)
    max_items: int = 0
    duplicate_min_score: float | None = None
    stale_after_days: int | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    items: list[Item]
    prepared_at: datetime
    memories_scanned: int
    truncated: bool
    bundle_id: str = ""


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What a Prepare reads of the index, taken on the event loop; the proposals are
    computed from it alone, in a worker thread (records are frozen, vectors copied)."""

    now: datetime
    rows: list[Memory]  # newest first, at most review.max_memories
    truncated: bool  # the scopes hold more unexpired memories than that
    vectors: dict[str, np.ndarray]  # id -> a copy of its vector (rows not superseded)
    expired: list[Memory]  # expired, not yet swept, in the scopes (max_memories)
    logged: list[tuple[Memory, Memory, float]]  # the conflict log's pairs in the scopes


_SNAPSHOT_SLICE = 1024  # vectors copied between two yields to the event loop


@dataclass(frozen=True, slots=True)
class Approved:
    item_id: str
    kind: Kind
    action: Action
    hashes: dict[str, str]  # memory id -> hash at prepare time
    approval: Approval
    bundle_id: str = ""
    signature: str = ""  # the daemon's, from Prepare: Apply takes no item without it


@dataclass(frozen=True, slots=True)
class ItemResult:
    item_id: str
    outcome: Outcome
    message: str
    changed_ids: tuple[str, ...] = ()


# -- hashing and ids -----------------------------------------------------------------------


def provenance(memory: Memory) -> str:
    return memory.metadata.get(PROVENANCE_KEY, "")


def memory_hash(memory: Memory) -> str:
    """``sha256:<hex>`` of the fields any review action depends on: identity, owner, scope,
    text, category, expiry, supersession and provenance (``memoryd_client.review_hash``, the
    copy the vault CLI checks a bundle's memories with). Access counts and ``updated_at``
    are left out (a Recall must not invalidate a duplicate proposal); staleness is a
    precondition checked on its own."""
    return shared_memory_hash(
        id=memory.id,
        agent_id=memory.agent_id,
        scope=memory.scope,
        text=memory.text,
        category=int(memory.category),
        expires_at=memory.expires_at,
        supersedes=memory.supersedes,
        superseded_by=memory.superseded_by,
        asserted_by=provenance(memory),
        promoted_from=memory.metadata.get(PROMOTED_FROM_KEY, ""),
    )


def item_id(kind: Kind, action: Action) -> str:
    """Stable: the same proposal gets the same id in every Prepare (and in every vault)."""
    raw = (
        f"{int(kind)}|{int(action.kind)}|{action.memory_id}|{action.keep_id}|{action.target_scope}"
    )
    return "rv-" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


# -- signatures ----------------------------------------------------------------------------

SIGNATURE_PREFIX = "hmac-sha256:"
KEY_FILE = "review.key"  # in the data dir


def needs_item_approval(kind: Kind) -> bool:
    return kind == Kind.PROMOTION


def precondition_keys(kind: Kind, action: Action) -> tuple[tuple[str, str], ...]:
    """The preconditions (kind, memory id) of an item: they follow from its kind and action,
    and are what Prepare shows and Apply checks; the signature covers them."""
    a = action
    if kind == Kind.DUPLICATE:
        return (
            ("hash_unchanged", a.keep_id),
            ("hash_unchanged", a.memory_id),
            ("exists", a.keep_id),
            ("writable", a.memory_id),
        )
    if kind == Kind.CONFLICT:
        return (
            ("hash_unchanged", a.keep_id),
            ("hash_unchanged", a.memory_id),
            ("not_superseded", a.memory_id),
            ("writable", a.keep_id),
        )
    if kind == Kind.STALE:
        return (
            ("hash_unchanged", a.memory_id),
            ("still_stale", a.memory_id),
            ("writable", a.memory_id),
        )
    if kind == Kind.PROMOTION:
        return (
            ("hash_unchanged", a.memory_id),
            ("provenance_user", a.memory_id),
            ("target_free", a.memory_id),
            ("writable", a.memory_id),
            ("item_approval", ""),
        )
    return ()


def signed_bytes(
    agent_id: str,
    bundle_id: str,
    item: str,
    kind: Kind,
    risk: Risk,
    action: Action,
    hashes: Mapping[str, str],
) -> bytes:
    """What an item's signature covers: the agent it was prepared for, its bundle, item id,
    kind, risk class, action (ids, target scope, stale threshold), every memory's hash (and
    so its text), its preconditions and whether it needs an approval by itself."""
    payload = {
        "v": 2,
        "agent": agent_id,
        "bundle": bundle_id,
        "item": item,
        "kind": int(kind),
        "risk": int(risk),
        "action": [
            int(action.kind),
            action.memory_id,
            action.keep_id,
            action.target_scope,
            action.stale_after_days,
        ],
        "hashes": sorted(hashes.items()),
        "preconditions": [list(p) for p in precondition_keys(kind, action)],
        "needs_item_approval": needs_item_approval(kind),
    }
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def sign(secret: bytes, payload: bytes) -> str:
    return SIGNATURE_PREFIX + hmac.new(secret, payload, hashlib.sha256).hexdigest()


def load_or_create_key(path: Path) -> bytes:
    """The daemon's review signing secret (``memoryd_client.secret_file``: 32 random bytes,
    mode 0600, made on first start). A key file others may read (or a symlink) is refused:
    whoever reads it could sign items the daemon never proposed."""
    try:
        return load_or_create_secret(
            path,
            "review key",
            on_replace=" (bundles prepared before then must be prepared again)",
            check_owner=False,  # (the data dir is the daemon's; see secret_file)
        )
    except SecretFileError as e:
        raise ConfigError(str(e)) from None


def new_bundle_id(now: datetime) -> str:
    return f"rb-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


# -- the scope ladder and the trust rules --------------------------------------------------


def scope_level(scope: str) -> int:
    """0 agent-private, 1 shared (workspace:, project:, any custom scope), 2 global."""
    if scope.startswith("agent:"):
        return 0
    return 2 if scope == "global" else 1


def promotion_problem(memory: Memory, target_scope: str) -> str:
    """Why promoting ``memory`` to ``target_scope`` is not a valid step up ("" if it is)."""
    if memory.scope == target_scope:
        return f"memory {memory.id} is already in {target_scope}"
    src, dst = scope_level(memory.scope), scope_level(target_scope)
    if dst != src + 1:
        names = ("agent-private", "shared", "global")
        return (
            f"{memory.scope} ({names[src]}) -> {target_scope} ({names[dst]}) is not one step up "
            "the ladder agent -> shared (workspace:...) -> global"
        )
    return ""


def trust_problem(memory: Memory, target_scope: str) -> str:
    """Why a memory may not enter a shared or global scope on its provenance ("" if it may)."""
    if scope_level(target_scope) == 0:
        return ""
    who = provenance(memory)
    if who in TRUSTED_ASSERTERS:
        return ""
    said = f"asserted_by={who!r}" if who else "no asserted_by provenance"
    return (
        f"memory {memory.id} has {said}: a memory an assistant may have asserted alone never "
        f"becomes {target_scope} (set metadata asserted_by=user when a person said it)"
    )


def approval_problem(memory: Memory, target_scope: str, approval: Approval) -> str:
    if scope_level(target_scope) == 0:
        return ""
    if approval != Approval.ITEM:
        return (
            f"moving memory {memory.id} to {target_scope} needs that item approved by itself, "
            "not by a bulk approval (all / low-risk)"
        )
    caller = CURRENT.get()
    if not caller.may_review:
        # The approval is a person's: the agents' own (gateway) key cannot give it.
        return (
            f"moving memory {memory.id} to {target_scope} needs a reviewer's approval: "
            f"credential {caller.name!r} is neither an operator nor a reviewer "
            "(keys file: reviewer = true)"
        )
    return ""


# -- contradiction cues --------------------------------------------------------------------

_NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "nothing",
        "none",
        "neither",
        "nor",
        "cannot",
        "can't",
        "don't",
        "doesn't",
        "didn't",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "won't",
        "wouldn't",
        "shouldn't",
        "nicht",
        "kein",
        "keine",
        "keinen",
        "keinem",
        "keiner",
        "nie",
        "niemals",
        "nichts",
    ]
)
_OPPOSITES = (
    ("like", "dislike"), ("likes", "dislikes"), ("love", "hate"), ("loves", "hates"),
    ("prefer", "avoid"), ("prefers", "avoids"), ("always", "never"), ("enable", "disable"),
    ("enabled", "disabled"), ("on", "off"), ("light", "dark"), ("yes", "no"),
    ("true", "false"), ("allow", "forbid"), ("allowed", "forbidden"), ("accept", "reject"),
    ("accepted", "rejected"), ("before", "after"), ("more", "less"), ("increase", "decrease"),
)  # fmt: skip
_DAYS = frozenset(
    [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "montag",
        "dienstag",
        "mittwoch",
        "donnerstag",
        "freitag",
        "samstag",
        "sonntag",
    ]
)
_WORD_RE = re.compile(r"[\w']+", re.UNICODE)
_NUMBER_RE = re.compile(r"\d+(?:[.,:]\d+)?")


def contradiction_cue(a: str, b: str) -> str:
    """Why two similar texts may contradict each other ("" if nothing says so)."""
    wa = {w.lower() for w in _WORD_RE.findall(a)}
    wb = {w.lower() for w in _WORD_RE.findall(b)}
    na, nb = bool(wa & _NEGATIONS), bool(wb & _NEGATIONS)
    if na != nb:
        return "one says it is not so (negation on one side only)"
    for x, y in _OPPOSITES:
        if (x in wa and y in wb and y not in wa and x not in wb) or (
            y in wa and x in wb and x not in wa and y not in wb
        ):
            return f"opposite words ({x!r} / {y!r})"
    numbers_a, numbers_b = set(_NUMBER_RE.findall(a)), set(_NUMBER_RE.findall(b))
    if numbers_a and numbers_b and numbers_a != numbers_b:
        return "different numbers (" + ", ".join(sorted(numbers_a ^ numbers_b)) + ")"
    days_a, days_b = wa & _DAYS, wb & _DAYS
    if days_a and days_b and days_a != days_b:
        return "different days (" + ", ".join(sorted(days_a ^ days_b)) + ")"
    return _different_value(a, b)


def _different_value(a: str, b: str) -> str:
    """The same sentence ending in another word (or two): "my favourite colour is green" /
    "... is blue", "lives in Berlin" / "lives in New York" say the value changed, not the
    same thing twice. A word swapped elsewhere is mostly a synonym ("Carol runs / manages
    the office"), and words only added or left out ("every editor" / "every code editor")
    are no cue either."""
    ta = [w.lower() for w in _WORD_RE.findall(a)]
    tb = [w.lower() for w in _WORD_RE.findall(b)]
    ops = [
        op for op in SequenceMatcher(a=ta, b=tb, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    if not ops or any(op[0] != "replace" for op in ops):
        return ""
    if len(ops) != 1:
        return ""
    _, i1, i2, j1, j2 = ops[0]
    if i2 != len(ta) or j2 != len(tb) or max(i2 - i1, j2 - j1) > 2:
        return ""
    old, new = ta[i1:i2], tb[j1:j2]
    return f"different value ({' '.join(old)!r} / {' '.join(new)!r})"


def stale_reason(memory: Memory, now: datetime, stale_after_days: int) -> str:
    """Why a memory is stale ("" if it is not): expired, superseded, or not recalled."""
    if memory.is_expired(now):
        return "expired (not yet swept)"
    if memory.superseded_by:
        return f"superseded by {memory.superseded_by}"
    if stale_after_days > 0:
        last = memory.last_accessed_at or memory.created_at
        if now - last >= timedelta(days=stale_after_days):
            seen = (
                f"last recalled {last.date().isoformat()}"
                if memory.last_accessed_at
                else f"never recalled since {last.date().isoformat()}"
            )
            return f"not recalled for {(now - last).days} days ({seen})"
    return ""


def keeper(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    """Of two duplicates, (the one to keep, the one to forget)."""

    def rank(m: Memory) -> tuple[int, float, float, str]:
        return (m.access_count, m.importance, -m.created_at.timestamp(), m.id)

    return (a, b) if rank(a) >= rank(b) else (b, a)


def _pc(kind: str, memory_id: str, detail: str) -> Precondition:
    return Precondition(kind, memory_id, detail)


def _hash_pcs(memories: Iterable[Memory]) -> list[Precondition]:
    return [_pc("hash_unchanged", m.id, "unchanged since prepare") for m in memories]


# -- building items ------------------------------------------------------------------------


def duplicate_item(a: Memory, b: Memory, score: float, access: Access) -> Item:
    keep, drop = keeper(a, b)
    action = Action(ActionKind.FORGET, drop.id, keep_id=keep.id)
    same_text = a.text == b.text
    risk = Risk.LOW if same_text or score >= 0.93 else Risk.MEDIUM
    if drop.agent_id != access.agent_id:
        risk = Risk.HIGH  # another agent's memory in a shared scope
    why = "same text" if same_text else f"cosine {score:.3f}"
    return Item(
        item_id=item_id(Kind.DUPLICATE, action),
        kind=Kind.DUPLICATE,
        risk=risk,
        memories=(keep, drop),
        hashes=(memory_hash(keep), memory_hash(drop)),
        score=score,
        reason=f"near duplicates in {keep.scope} ({why}); keep the one recalled "
        f"{keep.access_count}x, forget the one recalled {drop.access_count}x",
        action=action,
        preconditions=(
            *_hash_pcs((keep, drop)),
            _pc("exists", keep.id, "the memory kept still exists"),
            _pc("writable", drop.id, f"the caller may write {drop.scope}"),
        ),
    )


def conflict_item(a: Memory, b: Memory, score: float, cue: str) -> Item:
    newer, older = (a, b) if (a.created_at, a.id) >= (b.created_at, b.id) else (b, a)
    action = Action(ActionKind.SUPERSEDE, older.id, keep_id=newer.id)
    blocked = (
        f"{newer.id} already supersedes {newer.supersedes}; resolve by hand"
        if newer.supersedes
        else ""
    )
    return Item(
        item_id=item_id(Kind.CONFLICT, action),
        kind=Kind.CONFLICT,
        risk=Risk.HIGH,
        memories=(newer, older),
        hashes=(memory_hash(newer), memory_hash(older)),
        score=score,
        reason=f"{older.category.name.lower()}s in {older.scope} that may contradict "
        f"(cosine {score:.3f}; {cue}): the newer supersedes the older, kept as history",
        action=action,
        preconditions=(
            *_hash_pcs((newer, older)),
            _pc("not_superseded", older.id, "the older is not superseded yet"),
            _pc("writable", newer.id, f"the caller may write {newer.scope}"),
        ),
        blocked=blocked,
    )


def stale_item(memory: Memory, why: str, now: datetime, stale_after_days: int = 0) -> Item:
    action = Action(ActionKind.FORGET, memory.id, stale_after_days=stale_after_days)
    if memory.is_expired(now) or memory.superseded_by:
        risk = Risk.LOW  # it is no longer recalled anyway
    else:
        risk = Risk.HIGH if memory.importance >= 0.8 else Risk.MEDIUM
    return Item(
        item_id=item_id(Kind.STALE, action),
        kind=Kind.STALE,
        risk=risk,
        memories=(memory,),
        hashes=(memory_hash(memory),),
        score=0.0,
        reason=f"stale: {why}",
        action=action,
        preconditions=(
            *_hash_pcs((memory,)),
            _pc("still_stale", memory.id, f"still {why.split(' (')[0]} at apply time"),
            _pc("writable", memory.id, f"the caller may write {memory.scope}"),
        ),
    )


def promotion_item(memory: Memory, target_scope: str, access: Access) -> Item:
    action = Action(ActionKind.PROMOTE, memory.id, target_scope=target_scope)
    blocked = (
        promotion_problem(memory, target_scope)
        or trust_problem(memory, target_scope)
        or (
            f"agent {access.agent_id!r} may not write {target_scope}"
            if target_scope not in access.write
            else ""
        )
        or (
            f"agent {access.agent_id!r} may not write {memory.scope}"
            if memory.scope not in access.write
            else ""
        )
    )
    return Item(
        item_id=item_id(Kind.PROMOTION, action),
        kind=Kind.PROMOTION,
        risk=Risk.HIGH,
        memories=(memory,),
        hashes=(memory_hash(memory),),
        score=0.0,
        reason=f"asked: move from {memory.scope} to {target_scope}",
        action=action,
        preconditions=(
            *_hash_pcs((memory,)),
            _pc("provenance_user", memory.id, "asserted_by is user or operator"),
            _pc("target_free", memory.id, f"{target_scope} does not hold the same text"),
            _pc("writable", memory.id, f"the caller may write {memory.scope} and {target_scope}"),
            _pc("item_approval", "", "approved by itself, not in bulk"),
        ),
        needs_item_approval=True,
        blocked=blocked,
    )


def pairs_over(
    vectors: np.ndarray, min_score: float, neighbours: int = 5, block: int = 512
) -> list[tuple[int, int, float]]:
    """Pairs (i, j, cosine), i < j, cosine >= min_score, where j is among i's ``neighbours``
    nearest or i among j's (rows are unit vectors): at most ``neighbours`` x n pairs, so a
    scope of many memories on one topic cannot flood a review."""
    n = vectors.shape[0]
    k = min(neighbours, n - 1)
    found: dict[tuple[int, int], float] = {}
    for start in range(0, n, block):
        sims = vectors[start : start + block] @ vectors.T
        for r in range(sims.shape[0]):
            sims[r, start + r] = -np.inf  # not itself
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k > 0 else np.empty((0, 0), int)
        for r, cols in enumerate(top.tolist()):
            i = start + r
            for c in cols:
                score = float(sims[r, c])
                if score >= min_score:
                    found[(min(i, c), max(i, c))] = score
    return [(i, j, score) for (i, j), score in sorted(found.items())]


# -- the service ---------------------------------------------------------------------------


class ReviewService:
    """``secret`` signs each proposed item (the daemon's ``<data_dir>/review.key``; a
    random one per instance when not given)."""

    def __init__(
        self,
        memories: MemoryService,
        settings: ReviewSettings | None = None,
        secret: bytes | None = None,
    ):
        self.memories = memories
        self.settings = settings or ReviewSettings()
        self._secret = secret or secrets.token_bytes(32)
        self._preparing = 0  # Prepares in flight (the event loop's count: no lock needed)

    @property
    def store(self) -> MemoryStore:
        return self.memories.store

    async def prepare(self, q: PrepareQuery) -> Prepared:
        """On the event loop only what must read the live index: a snapshot (the frozen
        records, a copy of their vectors, the expired and conflict-log records), in slices
        that yield between them; the pair search, the cues, the items, their hashes and
        signatures are computed in a worker thread from that snapshot alone."""
        s = self.settings
        access = self.memories.access(q.agent_id)
        scopes = access.readable(q.scopes)
        kinds = q.kinds or frozenset({Kind.DUPLICATE, Kind.CONFLICT, Kind.STALE, Kind.PROMOTION})
        max_items = q.max_items or s.max_items
        if max_items > 10 * s.max_items:
            raise InvalidArgument(f"max_items {max_items} is over {10 * s.max_items}")
        dup_min = s.duplicate_min_score if q.duplicate_min_score is None else q.duplicate_min_score
        if not 0.5 <= dup_min <= 1.0:
            raise InvalidArgument(f"duplicate_min_score must be between 0.5 and 1, got {dup_min}")
        stale_days = s.stale_after_days if q.stale_after_days is None else q.stale_after_days
        if not 0 <= stale_days <= MAX_STALE_AFTER_DAYS:
            raise InvalidArgument(
                f"stale_after_days is {stale_days}; the limit is {MAX_STALE_AFTER_DAYS} (100 years)"
            )
        if len(q.promotions) > s.max_promotions:
            raise InvalidArgument(
                f"{len(q.promotions)} promotions asked; the limit is {s.max_promotions}"
            )
        asks: list[tuple[Memory, str]] = []
        for memory_id, target in q.promotions:
            validate_scope(target)
            asks.append((self.memories.get(q.agent_id, memory_id), target))
        if self._preparing >= s.max_concurrent_prepares:
            # Each Prepare holds a snapshot and a worker thread: a flood of them waits its
            # turn at the caller, not inside the daemon.
            raise Overloaded(
                f"{self._preparing} review Prepares are running (the limit is "
                f"{s.max_concurrent_prepares}, review.max_concurrent_prepares): try again",
                retry_after=1.0,
            )
        self._preparing += 1
        try:
            snap = await self._snapshot(access, scopes, kinds, q.agent_id)
            now = snap.now
            bundle = new_bundle_id(now)
            items, truncated = await asyncio.to_thread(
                self._propose, snap, access, kinds, dup_min, stale_days, asks, max_items, bundle
            )
        finally:
            self._preparing -= 1
        return Prepared(items, now, len(snap.rows), truncated or snap.truncated, bundle)

    async def _snapshot(
        self, access: Access, scopes: frozenset[str], kinds: frozenset[Kind], agent_id: str
    ) -> _Snapshot:
        """What Prepare reads of the index, taken on the event loop: at most
        review.max_memories unexpired memories of ``scopes``, newest first (a keyset page:
        bounded work however large the scopes are), with a copy of each one's vector."""
        now = self.memories.clock()
        listing = self.store.page(scopes, now=now, limit=self.settings.max_memories)
        rows = listing.memories
        vectors: dict[str, np.ndarray] = {}
        if kinds & {Kind.DUPLICATE, Kind.CONFLICT}:
            for n, m in enumerate(rows):
                if n and n % _SNAPSHOT_SLICE == 0:
                    await asyncio.sleep(0)  # other callers' RPCs run between slices
                if m.superseded_by:
                    continue
                v = self.store.vector_of(m.id)  # a copy: later writes never change it
                if v is not None:
                    vectors[m.id] = v
        expired: list[Memory] = []
        more_expired = False
        if Kind.STALE in kinds:
            # Bounded like the rows: an agent that piles up expiring memories faster than
            # the sweeper removes them does not make each Prepare longer without end.
            # Only the scopes asked for: never a walk over every tenant's partitions.
            for i in self.store.expired_ids(now=now, scopes=scopes):
                if (e := self.store.get(i)) is not None and e.scope in scopes:
                    if len(expired) == self.settings.max_memories:
                        more_expired = True
                        break
                    expired.append(e)
        logged: list[tuple[Memory, Memory, float]] = []
        if Kind.CONFLICT in kinds:
            for c in self.memories.list_conflicts(agent_id, self.memories.limits.conflicts_max):
                a_m, b_m = self.store.get(c.new_id), self.store.get(c.existing_id)
                if (
                    a_m is None
                    or b_m is None
                    or a_m.scope != b_m.scope
                    or a_m.scope not in scopes  # the scopes asked for (all readable by default)
                    or a_m.superseded_by
                    or b_m.superseded_by
                ):
                    continue
                logged.append((a_m, b_m, c.score))
        return _Snapshot(now, rows, listing.more or more_expired, vectors, expired, logged)

    def _propose(
        self,
        snap: _Snapshot,
        access: Access,
        kinds: frozenset[Kind],
        dup_min: float,
        stale_days: int,
        asks: Sequence[tuple[Memory, str]],
        max_items: int,
        bundle: str,
    ) -> tuple[list[Item], bool]:
        """The proposals of a snapshot, signed (runs in a worker thread: it reads nothing
        but ``snap`` and the frozen records in it)."""
        now = snap.now
        items: list[Item] = []
        if kinds & {Kind.DUPLICATE, Kind.CONFLICT}:
            items += self._pairs(snap, access, kinds, dup_min)
        if Kind.STALE in kinds:
            for m in [*snap.expired, *snap.rows]:
                if why := stale_reason(m, now, stale_days):
                    items.append(stale_item(m, why, now, stale_days))
        if Kind.PROMOTION in kinds:
            items += [promotion_item(m, target, access) for m, target in asks]
        unique: dict[str, Item] = {}
        for item in items:
            unique.setdefault(item.item_id, item)
        ordered = sorted(unique.values(), key=lambda i: (-int(i.risk), int(i.kind), i.item_id))
        signed = [self._signed(access.agent_id, bundle, i) for i in ordered[:max_items]]
        return signed, len(ordered) > max_items

    def _signature(
        self,
        agent_id: str,
        bundle_id: str,
        item: str,
        kind: Kind,
        risk: Risk,
        action: Action,
        hashes: Mapping[str, str],
    ) -> str:
        payload = signed_bytes(agent_id, bundle_id, item, kind, risk, action, hashes)
        return sign(self._secret, payload)

    def _signed(self, agent_id: str, bundle_id: str, item: Item) -> Item:
        hashes = {m.id: h for m, h in zip(item.memories, item.hashes, strict=True)}
        sig = self._signature(
            agent_id, bundle_id, item.item_id, item.kind, item.risk, item.action, hashes
        )
        return replace(item, bundle_id=bundle_id, signature=sig)

    def signed_risk(self, agent_id: str, it: Approved) -> Risk | None:
        """The risk class this daemon gave ``it`` when it proposed it to ``agent_id``, or
        None when it never did or the item changed since. The class is signed but not sent
        back (a vault could relabel it): of the three, only the one signed verifies."""
        for risk in (Risk.LOW, Risk.MEDIUM, Risk.HIGH):
            want = self._signature(
                agent_id, it.bundle_id, it.item_id, it.kind, risk, it.action, it.hashes
            )
            if hmac.compare_digest(want.encode(), it.signature.encode()):
                return risk
        return None

    def _pairs(
        self, snap: _Snapshot, access: Access, kinds: frozenset[Kind], dup_min: float
    ) -> list[Item]:
        items: list[Item] = []
        by_scope: dict[str, list[Memory]] = {}
        for m in snap.rows:
            if m.id in snap.vectors:  # not superseded, and still there when copied
                by_scope.setdefault(m.scope, []).append(m)
        low = min(dup_min, self.settings.conflict_min_score)
        for group in by_scope.values():
            if len(group) < 2:
                continue
            matrix = np.stack([snap.vectors[m.id] for m in group]).astype(np.float32, copy=False)
            for i, j, score in pairs_over(matrix, low):
                a, b = group[i], group[j]
                if a.supersedes == b.id or b.supersedes == a.id:
                    continue
                cue = contradiction_cue(a.text, b.text) if a.category == b.category else ""
                if cue and Kind.CONFLICT in kinds and score >= self.settings.conflict_min_score:
                    items.append(conflict_item(a, b, score, cue))
                elif not cue and score >= dup_min and Kind.DUPLICATE in kinds:
                    items.append(duplicate_item(a, b, score, access))
        cue = "the conflict log: another agent's decision on the same topic"
        items += [conflict_item(a, b, score, cue) for a, b, score in snap.logged]
        return items

    # -- apply ---------------------------------------------------------------------------

    async def apply(self, agent_id: str, items: Sequence[Approved]) -> list[ItemResult]:
        access = self.memories.access(agent_id)
        limit = self.settings.max_apply_items
        if len(items) > limit:
            raise InvalidArgument(
                f"{len(items)} items in one Apply; the limit is {limit} "
                "(review.max_apply_items): send them in several"
            )
        results: list[ItemResult] = []
        for n, it in enumerate(items):
            if n:
                await asyncio.sleep(0)  # one item at a time: other callers' RPCs run between
            try:
                _check_shape(it)
            except InvalidArgument as e:  # that item only: the others still apply
                results.append(ItemResult(it.item_id, Outcome.REFUSED, str(e)))
                continue
            risk = self.signed_risk(agent_id, it)
            if risk is None:
                results.append(
                    ItemResult(
                        it.item_id,
                        Outcome.CONFLICT,
                        "the item changed since prepare or was never proposed to agent "
                        f"{agent_id!r} by this daemon (its signature does not verify): "
                        "nothing done; prepare again",
                    )
                )
                continue
            if it.approval == Approval.LOW_RISK and risk != Risk.LOW:
                results.append(
                    ItemResult(
                        it.item_id,
                        Outcome.REFUSED,
                        f"item {it.item_id} was approved in bulk as low risk, but this daemon "
                        f"classed it {risk.name.lower()} risk: nothing done; approve it by itself",
                    )
                )
                continue
            ids = sorted(set(it.action.memory_ids()))
            async with self.memories.locked(ids):
                try:
                    results.append(await self._apply_one(access, it))
                except MemorydError as e:  # e.g. refused by the store; nothing half-done
                    results.append(ItemResult(it.item_id, Outcome.REFUSED, str(e)))
        return results

    async def _apply_one(self, access: Access, it: Approved) -> ItemResult:
        a = it.action
        now = self.memories.clock()
        cur = {i: self._readable(access, i) for i in a.memory_ids()}

        def result(outcome: Outcome, message: str, changed: Iterable[str] = ()) -> ItemResult:
            return ItemResult(it.item_id, outcome, message, tuple(changed))

        # Already applied: its change is there.
        if a.kind == ActionKind.FORGET and cur[a.memory_id] is None:
            if a.keep_id and cur[a.keep_id] is None:
                return result(Outcome.CONFLICT, f"both {a.memory_id} and {a.keep_id} are gone")
            return result(Outcome.ALREADY_APPLIED, f"memory {a.memory_id} is already forgotten")
        if a.kind == ActionKind.SUPERSEDE:
            newer = cur[a.keep_id]
            if newer is not None and newer.supersedes == a.memory_id:
                return result(
                    Outcome.ALREADY_APPLIED, f"{a.keep_id} already supersedes {a.memory_id}"
                )
        if (
            a.kind == ActionKind.PROMOTE
            and cur[a.memory_id] is None
            and self._promoted_copy(a, self.store.get(a.memory_id)) is not None
        ):
            return result(
                Outcome.ALREADY_APPLIED, f"memory {a.memory_id} is already in {a.target_scope}"
            )

        # Hashes: each memory as it was when prepared.
        for memory_id, memory in cur.items():
            if memory is None:
                return result(Outcome.CONFLICT, f"memory {memory_id} no longer exists")
            if memory_hash(memory) != it.hashes[memory_id]:
                return result(Outcome.CONFLICT, f"memory {memory_id} changed since prepare")
        target = cur[a.memory_id]
        assert target is not None

        if a.kind == ActionKind.FORGET:
            if it.kind == Kind.STALE:
                days = a.stale_after_days or self.settings.stale_after_days
                why = stale_reason(target, now, days)
                if not why:
                    return result(Outcome.CONFLICT, f"memory {target.id} is no longer stale")
            if a.keep_id:
                kept = cur[a.keep_id]
                assert kept is not None
                if kept.scope != target.scope:
                    return result(Outcome.CONFLICT, "the two memories are no longer in one scope")
            if problem := _write_problem(access, target.scope):
                return result(Outcome.REFUSED, problem)
            await self.store.delete([target.id])
            return result(Outcome.APPLIED, f"forgot {target.id}", [target.id])

        if a.kind == ActionKind.SUPERSEDE:
            newer = cur[a.keep_id]
            assert newer is not None
            if target.superseded_by:
                return result(Outcome.CONFLICT, f"{target.id} is already superseded")
            if newer.supersedes:  # one chain per memory: never un-supersede another
                return result(Outcome.CONFLICT, f"{newer.id} already supersedes {newer.supersedes}")
            if newer.scope != target.scope:
                return result(Outcome.CONFLICT, "the two memories are no longer in one scope")
            if problem := _write_problem(access, newer.scope):
                return result(Outcome.REFUSED, problem)
            await self.store.replace(replace(newer, supersedes=target.id, updated_at=now), None)
            return result(Outcome.APPLIED, f"{newer.id} supersedes {target.id}", [newer.id])

        # PROMOTE
        if problem := promotion_problem(target, a.target_scope):
            return result(Outcome.REFUSED, problem)
        limits = self.memories.limits
        injected = detect_injection(target.text) if limits.reject_injection else None
        if injected is not None:
            # Stored before the check caught it (or with it off): a promotion would show it
            # to every agent of the target scope.
            return result(
                Outcome.REFUSED,
                f"its text {injected} and looks like a prompt injection: not promoted to "
                f"{a.target_scope} (store.reject_injection)",
            )
        if problem := (
            trust_problem(target, a.target_scope)
            or approval_problem(target, a.target_scope, it.approval)
            or _write_problem(access, target.scope)
            or _write_problem(access, a.target_scope)
        ):
            return result(Outcome.REFUSED, problem)
        copy = self._promoted_copy(a, target)  # an earlier apply stopped before the delete
        if copy is None:
            # Only where the caller may read: in a write-only scope (a drop box) the answer
            # "already holds this text" would reveal what others put there (as Store never
            # answers DUPLICATE there either).
            twin = (
                self.store.find_by_hash(a.target_scope, target.content_hash)
                if a.target_scope in access.read
                else None
            )
            if twin is not None:
                return result(
                    Outcome.CONFLICT, f"{a.target_scope} already holds this text ({twin.id})"
                )
            vector = self.store.vector_of(target.id)
            if vector is None:
                return result(Outcome.CONFLICT, f"memory {target.id} no longer exists")
            copy = replace(
                target,
                id=self._copy_id(a),
                scope=a.target_scope,
                metadata={**target.metadata, PROMOTED_FROM_KEY: target.id},
                updated_at=now,
                idempotency_key="",
                related_ids=(),
                supersedes="",
                superseded_by="",
            )
            await self.store.add(copy, vector, await self.store.tokens_to_copy(target.id))
        await self.store.delete([target.id])
        return result(
            Outcome.APPLIED,
            f"moved {target.id} to {a.target_scope} as {copy.id}",
            [target.id, copy.id],
        )

    def _readable(self, access: Access, memory_id: str) -> Memory | None:
        m = self.store.get(memory_id)
        return m if m is not None and m.scope in access.read else None

    def _copy_id(self, a: Action) -> str:
        """The id of a promotion's copy: derived from the original and the target scope with
        the daemon's secret, so every apply of one promotion writes (and finds) the same
        record by an index lookup, even in a scope the caller may only write, and nobody can
        plant a memory under it beforehand."""
        raw = f"promote|{a.memory_id}|{a.target_scope}".encode()
        digest = hmac.new(self._secret, raw, hashlib.sha256).digest()
        return str(uuid.UUID(bytes=digest[:16], version=4))

    def _promoted_copy(self, a: Action, original: Memory | None) -> Memory | None:
        """The copy an earlier apply of this promotion wrote, if any; it must also carry the
        original's text and owner (while the original exists), so a memory that merely
        claims ``promoted_from`` can never make an apply delete the original."""
        m = self.store.get(self._copy_id(a))
        if m is None or m.scope != a.target_scope:
            return None
        if m.metadata.get(PROMOTED_FROM_KEY) != a.memory_id:
            return None
        if original is not None and (
            m.content_hash != original.content_hash or m.agent_id != original.agent_id
        ):
            return None
        return m


def _write_problem(access: Access, scope: str) -> str:
    try:
        access.check_write(scope)
    except PermissionDenied as e:
        return str(e)
    return ""


def _check_shape(it: Approved) -> None:
    a = it.action
    if it.kind == Kind.UNSPECIFIED or a.kind == ActionKind.UNSPECIFIED:
        raise InvalidArgument(f"item {it.item_id!r}: kind and action are required")
    expected = {
        Kind.DUPLICATE: ActionKind.FORGET,
        Kind.STALE: ActionKind.FORGET,
        Kind.CONFLICT: ActionKind.SUPERSEDE,
        Kind.PROMOTION: ActionKind.PROMOTE,
    }[it.kind]
    if a.kind != expected:
        raise InvalidArgument(f"item {it.item_id!r}: a {it.kind.name} item cannot {a.kind.name}")
    for memory_id in a.memory_ids():
        try:
            uuid.UUID(memory_id)
        except ValueError:
            raise InvalidArgument(
                f"item {it.item_id!r}: {memory_id[:64]!r} is not a UUID"
            ) from None
    if (it.kind in (Kind.DUPLICATE, Kind.CONFLICT)) != bool(a.keep_id):
        raise InvalidArgument(
            f"item {it.item_id!r}: keep_id is required for duplicates and conflicts only"
        )
    if a.kind == ActionKind.PROMOTE:
        validate_scope(a.target_scope)
    if a.keep_id == a.memory_id:
        raise InvalidArgument(f"item {it.item_id!r}: memory_id and keep_id are the same")
    if set(it.hashes) != set(a.memory_ids()):
        raise InvalidArgument(
            f"item {it.item_id!r}: hashes must name exactly the memories of its action "
            f"({', '.join(a.memory_ids())})"
        )
    if item_id(it.kind, a) != it.item_id:
        raise InvalidArgument(f"item {it.item_id!r} does not match its kind and action")
