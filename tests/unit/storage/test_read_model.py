"""Records handed out of storage never change afterwards: every write makes a new record.

A caller (a page being converted, a recall's hits, the backup thread) holds what it read;
a fresh read shows the change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memoryd.core.records import Memory
from memoryd.storage.repository import Repository

from ..conftest import record

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DIM = 1024  # the open_repository fixture's store


def mem(i: int, **kw: object) -> Memory:
    fields: dict[str, object] = dict(
        text=f"the garden note number {i}",
        created_at=NOW + timedelta(seconds=i),
        updated_at=NOW,
        metadata={"n": str(i)},
    )
    return record(i, **(fields | kw))


def vec(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


def snapshot(m: Memory) -> tuple[object, ...]:
    """Every field by value, lists and dicts copied: what the holder saw when it read."""
    return tuple(
        list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
        for v in (getattr(m, f.name) for f in dataclasses.fields(m))
    )


async def test_records_held_by_a_reader_never_change_while_the_store_does(
    open_repository: Callable[[], Repository],
) -> None:
    repo = open_repository()
    target = mem(1)
    await repo.add(target, vec(1))
    held = [
        repo.get(target.id),
        repo.search(vec(1), ["agent:a"], 1, now=NOW)[0][0],
        repo.page(["agent:a"], now=NOW, limit=10).memories[0],
        repo.visible(["agent:a"], now=NOW)[0],
        repo.candidates(vec(1), "garden", ["agent:a"], 5, now=NOW).memories[0],
    ]
    assert all(h is not None and h.id == target.id for h in held)
    before = [snapshot(h) for h in held if h is not None]

    repo.touch([target.id], NOW)  # a recall returned it
    linked = await repo.add(mem(2, related_ids=(target.id,)), vec(2))  # links to it
    await repo.replace(dataclasses.replace(target, importance=0.9), None)  # an update
    newer = await repo.add(mem(3, supersedes=target.id), vec(3))  # supersedes it

    assert [snapshot(h) for h in held if h is not None] == before
    fresh = repo.get(target.id)
    assert fresh is not None
    assert fresh.access_count == 1 and fresh.last_accessed_at == NOW
    assert fresh.importance == pytest.approx(0.9)
    assert linked.id in fresh.related_ids
    assert fresh.superseded_by == newer.id
    assert held[0] is not None and held[0].access_count == 0 and not held[0].superseded_by


async def test_a_write_returns_the_record_readers_see_and_leaves_the_callers_alone(
    open_repository: Callable[[], Repository],
) -> None:
    repo = open_repository()
    older = await repo.add(mem(1), vec(1))
    mine = mem(2, related_ids=(older.id,), language="")
    stored = await repo.add(mine, vec(2))
    assert mine.language == "" and stored.language == "en"  # detected on the new record
    assert repo.get(mine.id) == stored
    # The older memory's derived link is a new record too; the one ``add`` returned is as
    # it was when written.
    assert older.related_ids == () and repo.get(older.id).related_ids == (mine.id,)  # type: ignore[union-attr]


def test_a_record_refuses_to_be_changed_in_place() -> None:
    m = mem(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.importance = 1.0  # type: ignore[misc]
    assert dataclasses.replace(m, importance=1.0).importance == 1.0 and m.importance == 0.5


async def test_access_counts_read_after_a_restart_are_new_records_too(
    open_repository: Callable[[], Repository],
) -> None:
    repo = open_repository()
    await repo.add(mem(1), vec(1))
    repo.touch([mem(1).id], NOW)
    repo.touch([mem(1).id], NOW + timedelta(minutes=1))
    assert await repo.flush_access_counts() == 1
    repo.close()
    again = open_repository()
    got = again.get(mem(1).id)
    assert got is not None and got.access_count == 2
    assert got.last_accessed_at == NOW + timedelta(minutes=1)
