"""Idempotency keys answered DUPLICATE or MERGED lapse after ``store.idempotency_days``
(Repository's and LanceStore's ``key_window``): their records are no longer answered, the
index drops them, a restart does not load them, and the keys table's compaction deletes
them. Keys that created a memory never lapse."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memoryd.core.records import KeyRecord, StoreOutcome
from memoryd.storage import lance_store
from memoryd.storage.hot_index import HotIndex
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

from .test_storage import mem, unit

WINDOW = timedelta(days=7)


def open_repo(path: Path, window: timedelta | None = WINDOW) -> Repository:
    store = LanceStore(str(path), table="m", model_name="x", dim=8, key_window=window)
    repo = Repository(store, key_window=window)
    repo.open()
    return repo


def key(name: str, outcome: StoreOutcome, age: timedelta, memory_id: str) -> KeyRecord:
    at = datetime.now(UTC) - age
    return KeyRecord("a", name, memory_id, outcome, "h", "agent:a", 1.0, at)


def held(repo: Repository) -> set[str]:
    """The keys whose records the index still holds, lapsed or not."""
    return {
        k
        for k in ("old-dup", "old-merged", "fresh-dup", "old-created")
        if HotIndex.key_record(repo, "a", k)
    }


async def records(repo: Repository) -> dict[str, KeyRecord]:
    m = mem(1)
    await repo.add(m, unit(1))
    made = {
        "old-dup": key("old-dup", StoreOutcome.DUPLICATE, timedelta(days=8), m.id),
        "old-merged": key("old-merged", StoreOutcome.MERGED, timedelta(days=30), m.id),
        "fresh-dup": key("fresh-dup", StoreOutcome.DUPLICATE, timedelta(days=6), m.id),
        # a Store into a scope its writer may only write (core.ingest): never lapses
        "old-created": key("old-created", StoreOutcome.CREATED, timedelta(days=400), m.id),
    }
    for record in made.values():
        await repo.record_key(record)
    return made


async def test_a_key_that_created_nothing_lapses_after_the_window(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    try:
        made = await records(repo)
        assert repo.key_record("a", "old-dup") is None
        assert repo.key_record("a", "old-merged") is None
        assert repo.key_record("a", "fresh-dup") == made["fresh-dup"]
        assert repo.key_record("a", "old-created") == made["old-created"]
        # a record lapsed already is not held at all
        assert held(repo) == {"fresh-dup", "old-created"}
        assert await repo.drop_lapsed_keys() == 0
        # the job drops those that lapse from memory
        repo.key_window = timedelta(days=5)
        assert await repo.drop_lapsed_keys() == 1
        assert held(repo) == {"old-created"}
        assert await repo.drop_lapsed_keys() == 0
        repo.key_window = WINDOW
    finally:
        repo.close()
    again = open_repo(tmp_path)
    try:  # a restart loads no lapsed record
        assert held(again) == {"fresh-dup", "old-created"}
    finally:
        again.close()


async def test_a_key_put_again_with_a_later_answer_is_kept(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    try:
        m = mem(1)
        await repo.add(m, unit(1))
        await repo.record_key(key("k", StoreOutcome.DUPLICATE, timedelta(days=9), m.id))
        later = key("k", StoreOutcome.DUPLICATE, timedelta(days=1), m.id)
        await repo.record_key(later)
        assert await repo.drop_lapsed_keys() == 0
        assert repo.key_record("a", "k") == later
    finally:
        repo.close()


async def test_the_keys_table_compaction_deletes_lapsed_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lance_store, "KEYS_COMPACT_COMMITS", 4)  # the 4th append compacts
    repo = open_repo(tmp_path)
    try:
        await records(repo)
        kept = {
            r.key for r in LanceStore(str(tmp_path), table="m", model_name="x", dim=8).read_keys()
        }
        assert kept == {"fresh-dup", "old-created"}
    finally:
        repo.close()


async def test_without_a_window_no_key_lapses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lance_store, "KEYS_COMPACT_COMMITS", 4)
    repo = open_repo(tmp_path, window=None)
    try:
        made = await records(repo)
        assert {k for k in made if repo.key_record("a", k) == made[k]} == set(made)
        assert await repo.drop_lapsed_keys() == 0
        assert not repo._key_times  # nothing queued to lapse (it would only grow)
        on_disk = {
            r.key for r in LanceStore(str(tmp_path), table="m", model_name="x", dim=8).read_keys()
        }
        assert on_disk == set(made)
    finally:
        repo.close()


def open_shared(path: Path, window: timedelta | None = WINDOW) -> Repository:
    """A daemon over a shared store (storage.follow): the tests drive its rounds."""
    store = LanceStore(str(path), table="m", model_name="x", dim=8, shared=True, key_window=window)
    repo = Repository(store, follow_interval=60.0, key_window=window)
    repo.open()
    return repo


async def test_records_read_again_after_a_compaction_are_held_once(tmp_path: Path) -> None:
    """The follower reads every fragment a compaction of the keys table rewrote (and this
    daemon's own appends) again: the same records, which must not queue up once per read
    (on a fleet that compacts every KEYS_COMPACT_COMMITS appends, a window's records
    read again at each compaction)."""
    a = open_shared(tmp_path)
    b = open_shared(tmp_path)
    try:
        m = mem(1)
        await a.add(m, unit(1))
        for i in range(5):
            await a.record_key(key(f"k{i}", StoreOutcome.DUPLICATE, timedelta(days=1), m.id))
        for _ in range(3):
            await a.catch_up()
            await b.catch_up()
            table = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)._keys
            table.optimize()  # (the lease holder's compaction: one rewritten fragment)
        await a.catch_up()
        await b.catch_up()
        assert len(a._key_times) == len(b._key_times) == 5
        assert {r for r in ("k0", "k4") if b.key_record("a", r)} == {"k0", "k4"}
    finally:
        a.close()
        b.close()


async def test_a_lapsed_record_read_by_the_follower_is_not_held(tmp_path: Path) -> None:
    """Opening drops the lapsed records; the first round of following reads the keys table
    whole (and a compaction by a daemon with a longer window keeps them): they must not
    come back into the index."""
    a = open_shared(tmp_path, window=None)  # a window of its own: keeps every record
    try:
        m = mem(1)
        await a.add(m, unit(1))
        await a.record_key(key("old-dup", StoreOutcome.DUPLICATE, timedelta(days=8), m.id))
        await a.record_key(key("fresh-dup", StoreOutcome.DUPLICATE, timedelta(days=6), m.id))
        b = open_shared(tmp_path)
        try:
            assert {k for k in ("old-dup", "fresh-dup") if HotIndex.key_record(b, "a", k)} == {
                "fresh-dup"
            }
            await b.catch_up()
            await a.record_key(key("later-dup", StoreOutcome.DUPLICATE, timedelta(days=9), m.id))
            await b.catch_up()
            assert {
                k for k in ("old-dup", "fresh-dup", "later-dup") if HotIndex.key_record(b, "a", k)
            } == {"fresh-dup"}
            assert len(b._key_times) == 1
        finally:
            b.close()
    finally:
        a.close()


async def test_dropping_lapsed_records_when_none_lapsed_commits_nothing(tmp_path: Path) -> None:
    """A delete that matches nothing still commits a version: on a shared store the lease
    holder's cleanup of the keys table (due while a version it did not make is older than
    keep_versions) then made one each time it ran, which was due again keep_versions
    later: a commit to the keys table every keep_versions, for ever."""
    repo = open_repo(tmp_path)
    try:
        m = mem(1)
        await repo.add(m, unit(1))
        await repo.record_key(key("fresh-dup", StoreOutcome.DUPLICATE, timedelta(days=1), m.id))
        store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, key_window=WINDOW)
        table = store._keys
        before = table.version
        store._drop_lapsed_keys(table)
        assert table.version == before
        assert [r.key for r in store.read_keys()] == ["fresh-dup"]
    finally:
        repo.close()
