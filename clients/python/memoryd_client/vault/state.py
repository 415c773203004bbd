"""A bundle's sidecar state: ``review-bundles/<bundleId>.state.json`` under the review root.

It holds what Prepare returned (each item's kind, risk, action, hashes, bundle id and the
daemon's signature, so ``review apply`` sends exactly what was prepared: an item edited here
no longer verifies at the daemon), the decisions made by explicit commands (approved by
item, in bulk or as low risk, rejected, snoozed until), each sealed with the approval key
(an HMAC with a key kept outside the vault, :func:`seal`), and the results of each apply. A
decision whose seal does not verify (written by anything but ``review approve|reject|snooze``
on a machine holding the key) is ignored. The bundle note is rendered from it and never read
back: editing the note (ticking a box, rewriting an item) applies nothing.

Two checks more, for what a vault writer may edit here: every memory an item shows must
hash to the hash stored with it (:func:`unmatched_memories`), and every item must carry
this bundle's id; a state file where one does not is refused. The first is a consistency
check, not a proof: the hash is plain SHA-256, so a writer who edits a text and recomputes
its hash passes it, and only the daemon, whose signature covers the hash it made, refuses
that item at Apply (CONFLICT). The CLI cannot verify the signature itself, so risk, score
and reason as shown are as the file says; a low-risk approval is sent as such
(``APPROVAL_LOW_RISK``), and the daemon applies it only to an item it classed low risk.

Bundle status: ``pending_user_review`` until an apply changed something; then
``partially_applied`` while any item is still pending, snoozed, or approved but not applied
(a conflict or refusal); ``applied`` when every item is decided and every approved one is
applied.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from memoryd_client import review_hash
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
from memoryd_client.secret_file import SecretFileError, load_or_create_secret

BUNDLE_ID_RE = re.compile(r"^rb-[0-9]{8}-[0-9]{6}-[a-z0-9]{4}\Z")  # not "$": "\n"
STATE_VERSION = 1


class StateError(Exception):
    pass


def check_bundle_id(bundle_id: str) -> str:
    if not BUNDLE_ID_RE.match(bundle_id):
        raise StateError(f"{bundle_id[:80]!r} is not a bundle id (rb-YYYYMMDD-HHMMSS-xxxx)")
    return bundle_id


def state_path(bundle_id: str) -> str:
    return f"review-bundles/{check_bundle_id(bundle_id)}.state.json"


def note_path(bundle_id: str) -> str:
    return f"review-bundles/{check_bundle_id(bundle_id)}.md"


@dataclass
class Decision:
    status: str = "pending"  # pending | approved | rejected | snoozed
    approval: str = ""  # "item" | "bulk" (all) | "low-risk" when approved
    until: str = ""  # ISO time, when snoozed
    at: str = ""
    outcome: str = ""  # the last apply's outcome name, e.g. APPLY_OUTCOME_APPLIED
    message: str = ""
    seal: str = ""  # HMAC of the decision with the approval key (see seal())


@dataclass
class BundleState:
    bundle_id: str
    agent: str
    created: str
    items: list[review_pb.ReviewItem]
    decisions: dict[str, Decision]
    status: str = "pending_user_review"
    applies: list[dict[str, Any]] | None = None
    truncated: bool = False
    memories_scanned: int = 0
    trigger: str = "manual"  # or "morning-review"

    def settle_status(self) -> str:
        """The status after an apply (see the module docstring)."""
        done = {"APPLY_OUTCOME_APPLIED", "APPLY_OUTCOME_ALREADY_APPLIED"}
        decisions = [self.decisions.get(i.item_id, Decision()) for i in self.items]
        if not any(d.outcome in done for d in decisions):
            return self.status
        still_open = any(
            d.status in ("pending", "snoozed") or (d.status == "approved" and d.outcome not in done)
            for d in decisions
        )
        self.status = "partially_applied" if still_open else "applied"
        return self.status

    def item(self, item_id: str) -> review_pb.ReviewItem:
        for it in self.items:
            if it.item_id == item_id:
                return it
        raise StateError(f"bundle {self.bundle_id} has no item {item_id!r}")

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "bundle_id": self.bundle_id,
                "agent": self.agent,
                "created": self.created,
                "status": self.status,
                "truncated": self.truncated,
                "memories_scanned": self.memories_scanned,
                "trigger": self.trigger,
                "items": [json_format.MessageToDict(i) for i in self.items],
                "decisions": {k: vars(v) for k, v in self.decisions.items()},
                "applies": self.applies or [],
            },
            indent=1,
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> BundleState:
        try:
            raw = json.loads(text)
            if raw.get("version") != STATE_VERSION:
                raise StateError(f"state version {raw.get('version')!r} is not {STATE_VERSION}")
            items = [json_format.ParseDict(i, review_pb.ReviewItem()) for i in raw["items"]]
            decisions = {k: Decision(**v) for k, v in raw["decisions"].items()}
            bundle_id = check_bundle_id(raw["bundle_id"])
            if strays := [i for i in items if i.bundle_id != bundle_id]:
                # An item the daemon signed for another bundle (say one the person
                # rejected) planted here would be sealed with this bundle's approval.
                raise StateError(
                    f"item {strays[0].item_id} belongs to bundle {strays[0].bundle_id[:40]!r}, "
                    f"not {bundle_id} (the state file was edited outside memoryd): nothing of "
                    "this bundle is approved or applied; prepare again"
                )
            if unmatched := unmatched_memories(items):
                item_id, memory_id = unmatched[0]
                raise StateError(
                    f"item {item_id} shows memory {memory_id} with a text or fields that do "
                    "not match the hash stored with it (the state file was edited outside "
                    "memoryd): nothing of this bundle is approved or applied; prepare again"
                )
            return cls(
                bundle_id=bundle_id,
                agent=str(raw["agent"]),
                created=str(raw["created"]),
                items=items,
                decisions=decisions,
                status=str(raw["status"]),
                applies=list(raw.get("applies", [])),
                truncated=bool(raw.get("truncated", False)),
                memories_scanned=int(raw.get("memories_scanned", 0)),
                trigger=str(raw.get("trigger", "manual")),
            )
        except (ValueError, KeyError, TypeError, json_format.ParseError) as e:
            raise StateError(f"bundle state is damaged: {e}") from None


def shown_hash(m: review_pb.ReviewMemory) -> str:
    """The hash of a memory as an item shows it (the daemon's own function, with the fields
    the item carries)."""
    return review_hash.memory_hash(
        id=m.id,
        agent_id=m.agent_id,
        scope=m.scope,
        text=m.text,
        category=m.category,
        expires_at=m.expires_at.ToDatetime(tzinfo=UTC) if m.HasField("expires_at") else None,
        supersedes=m.supersedes,
        superseded_by=m.superseded_by,
        asserted_by=m.asserted_by,
        promoted_from=m.promoted_from,
    )


def unmatched_memories(items: Iterable[review_pb.ReviewItem]) -> list[tuple[str, str]]:
    """(item id, memory id) of every memory shown with fields whose hash is not the one
    stored with it: edited after Prepare without its hash (one edited with its hash
    recomputed passes here and is refused by the daemon's signature at Apply)."""
    return [
        (item.item_id, m.id) for item in items for m in item.memories if shown_hash(m) != m.hash
    ]


def _sealed_fields(state: BundleState, item: review_pb.ReviewItem, d: Decision) -> bytes:
    return json.dumps(
        [state.bundle_id, state.agent, item.item_id, item.signature, d.status, d.approval, d.until]
    ).encode()


def seal(key: bytes, state: BundleState, item: review_pb.ReviewItem, d: Decision) -> str:
    """The seal of a decision on an item: binds the decision (status, how approved, until)
    to the daemon-signed item and bundle, with the approval key."""
    return (
        "hmac-sha256:" + hmac.new(key, _sealed_fields(state, item, d), hashlib.sha256).hexdigest()
    )


def sealed(key: bytes, state: BundleState, item: review_pb.ReviewItem, d: Decision) -> bool:
    return hmac.compare_digest(seal(key, state, item, d).encode(), d.seal.encode())


def approval_key(path: Path, vault: Path) -> bytes:
    """The approval key: 32 random bytes (hex) in ``path``, created 0600 on first use. It
    must live outside the vault (whoever can write the vault must not be able to approve),
    and a key file others may read or own, or a symlink, is refused. Where the key really is
    follows every link (it must not be in the vault); the file is opened by its own name,
    never through a link (``secret_file``): a link planted there could point anywhere."""
    path = path.expanduser()
    with contextlib.suppress(OSError):
        if path.resolve().is_relative_to(vault.resolve(strict=True)):
            raise StateError(
                f"the approval key {path} is inside the vault {vault}: put it outside "
                "([vault] approval_key_file), or anyone who can write the vault could approve"
            )
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        return load_or_create_secret(path, "the approval key")
    except SecretFileError as e:
        raise StateError(str(e)) from None


def approved_item(
    item: review_pb.ReviewItem, approval: int = review_pb.APPROVAL_ITEM
) -> review_pb.ApprovedItem:
    """What Apply takes back for a prepared item: its id, kind, action, hashes, bundle id
    and the daemon's signature, as Prepare gave them (an edited one is a CONFLICT)."""
    return review_pb.ApprovedItem(
        item_id=item.item_id,
        kind=item.kind,
        action=item.action,
        hashes=[review_pb.MemoryHash(id=m.id, hash=m.hash) for m in item.memories],
        approval=approval,  # type: ignore[arg-type]
        bundle_id=item.bundle_id,
        signature=item.signature,
    )


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
