"""Stored memory records made in one line, for the tests that drive storage itself
(``LanceStore``, ``HotIndex``, ``Repository``) rather than a daemon."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from memoryd.core.records import Category, Memory

RECORD_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def record(i: int, **kw: object) -> Memory:
    """Stored memory record number ``i``: agent a's, in its own scope, a fact of importance
    0.5 with a unique id and content hash; ``kw`` sets any other field."""
    fields: dict[str, object] = dict(
        id=f"00000000-0000-4000-8000-{i:012d}",
        agent_id="a",
        scope="agent:a",
        text=f"text {i}",
        summary="",
        category=Category.FACT,
        importance=0.5,
        created_at=RECORD_TIME,
        updated_at=RECORD_TIME,
        content_hash=f"h{i}",
    )
    fields.update(kw)
    return Memory(**fields)  # type: ignore[arg-type]


def row(i: int, dim: int = 8, **kw: object) -> tuple[Memory, np.ndarray, None]:
    """A row as ``LanceStore.add`` takes it: ``record(i, **kw)``, a unit vector of ``dim``
    (the same for every row: these tests are about what is stored, not what is found), and
    no token vectors."""
    return record(i, **kw), np.full(dim, 1 / np.sqrt(dim), dtype=np.float32), None
