"""The hash of a memory in a review item: ``sha256:<hex>`` of the fields any review action
depends on (identity, owner, scope, text, category, expiry, supersession, provenance).

The one copy, shared by the daemon (``memoryd.core.review`` hashes each memory an item
touches, signs the hashes into the item and re-checks them at Apply) and the vault CLI
(which checks that the memory a bundle shows, text included, is the one the daemon hashed:
a text edited in the vault no longer matches its signed hash). It imports nothing but the
standard library.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime


def memory_hash(
    *,
    id: str,
    agent_id: str,
    scope: str,
    text: str,
    category: int,
    expires_at: datetime | None,
    supersedes: str,
    superseded_by: str,
    asserted_by: str,
    promoted_from: str,
) -> str:
    """``expires_at`` must be timezone-aware (it is hashed as its UTC ISO form)."""
    fields = {
        "id": id,
        "agent_id": agent_id,
        "scope": scope,
        "text": text,
        "category": int(category),
        "expires_at": expires_at.astimezone(UTC).isoformat() if expires_at else "",
        "supersedes": supersedes,
        "superseded_by": superseded_by,
        "asserted_by": asserted_by,
        "promoted_from": promoted_from,
    }
    raw = json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(raw).hexdigest()
