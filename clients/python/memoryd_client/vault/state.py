"""A bundle's sidecar state: ``review-bundles/<bundleId>.state.json`` under the review root.

It holds what Prepare returned (each item's kind, action and hashes, so ``review apply``
sends exactly what was prepared), the decisions made by explicit commands (approved by
item or in bulk, rejected, snoozed until) and the results of each apply. The bundle note is
rendered from it and never read back: editing the note (ticking a box, rewriting an item)
applies nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format

from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb

BUNDLE_ID_RE = re.compile(r"^rb-[0-9]{8}-[0-9]{6}-[a-z0-9]{4}$")
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
    approval: str = ""  # "item" | "bulk" when approved
    until: str = ""  # ISO time, when snoozed
    at: str = ""
    outcome: str = ""  # the last apply's outcome name, e.g. APPLY_OUTCOME_APPLIED
    message: str = ""


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
            return cls(
                bundle_id=check_bundle_id(raw["bundle_id"]),
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


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
