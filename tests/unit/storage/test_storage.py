"""LanceDB store (identity, group commit, round trip) and the hot index (scope partitions)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lance.optimize
import numpy as np
import pytest
from memoryd_testing.compaction import hold_large_rewrites, small_fragments

from memoryd.core.errors import ConfigError
from memoryd.core.records import Category, Memory, stored_memory, with_access
from memoryd.storage import lance_store
from memoryd.storage.hot_index import HotIndex
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

from ..conftest import record

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def mem(i: int, scope: str = "agent:a", **kw: object) -> Memory:
    fields: dict[str, object] = dict(
        summary=f"text {i}", created_at=NOW + timedelta(seconds=i), metadata={"i": str(i)}
    )
    return record(i, scope=scope, **(fields | kw))


def unit(i: int, dim: int = 8) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[i % dim] = 1.0
    return v


def stall_compactions(store: LanceStore, hold: float) -> tuple[threading.Event, threading.Event]:
    """Make ``store``'s compactions wait (up to ``hold`` s) until released: returns the
    event set once one has started and the one that releases it."""
    started, release = threading.Event(), threading.Event()
    real = store._optimize_memories

    def stalled_optimize(table: object, older_than: timedelta | None) -> bool:
        started.set()
        release.wait(hold)
        return real(table, older_than)

    store._optimize_memories = stalled_optimize  # type: ignore[method-assign]
    return started, release


def in_files(directory: Path, text: str) -> bool:
    """Whether ``text`` is in any file under ``directory`` (a table's data, deletions,
    manifests)."""
    needle = text.encode()
    return any(needle in f.read_bytes() for f in directory.rglob("*") if f.is_file())


def stored_ids(path: Path) -> list[str]:
    """The ids in the store at ``path``, opened again, sorted."""
    return sorted(
        m.id for m, _, _ in LanceStore(str(path), table="m", model_name="x", dim=8).scan()
    )


async def compacted(store: LanceStore, n: int) -> None:
    """Wait (up to 10 s) until ``store`` has made ``n`` compactions."""
    for _ in range(200):
        if store.compactions >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{store.compactions} compactions, not {n}")


def test_store_made_by_another_model_is_refused(tmp_path: Path) -> None:
    LanceStore(str(tmp_path), table="m", model_name="model-a", dim=8)
    with pytest.raises(ConfigError, match=r"model-a.*8-d.*model-b.*16-d"):
        LanceStore(str(tmp_path), table="m", model_name="model-b", dim=16)
    LanceStore(str(tmp_path), table="m", model_name="model-a", dim=8)  # same identity opens


async def test_concurrent_writes_share_commits_and_round_trip(tmp_path: Path) -> None:
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, max_batch=512)
    store.start()
    try:
        rows = [mem(i, expires_at=NOW + timedelta(days=1) if i % 2 else None) for i in range(64)]
        tok = np.arange(-12, 12, dtype=np.int8).reshape(3, 8)
        await asyncio.gather(
            *(store.add([(m, unit(i), tok if i == 3 else None)]) for i, m in enumerate(rows))
        )
        assert store.count_rows() == 64
        assert store.commits < 64  # grouped
        await store.delete([rows[0].id, rows[1].id])
        changed = mem(2, text="changed", importance=0.9)
        await store.update([(changed, unit(5), None)])
        await store.update([(mem(999), unit(1), None)])  # absent: not inserted
    finally:
        store.close()
    reopened = {
        m.id: (m, v, t)
        for m, v, t in LanceStore(str(tmp_path), table="m", model_name="x", dim=8).scan()
    }
    assert len(reopened) == 62
    m2, v2, t2 = reopened[rows[2].id]
    assert t2 is None
    assert m2.text == "changed" and m2.importance == pytest.approx(0.9)
    assert np.allclose(v2, unit(5))
    m3, _, t3 = reopened[rows[3].id]
    assert t3 is not None and np.array_equal(t3, tok)
    assert m3.expires_at == NOW + timedelta(days=1) and m3.metadata == {"i": "3"}
    assert m3.created_at == rows[3].created_at and m3.category == Category.FACT


def test_a_writer_whose_event_loop_closed_does_not_stop_the_commits(tmp_path: Path) -> None:
    """A program embedding memoryd may write from a loop that ends (``asyncio.run``
    returns) while its commit runs: the answer has nowhere to go. The committer drops it
    and goes on; before, handing it to the closed loop raised in the committer's thread,
    the thread died, and every later write waited for ever."""
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    real_add = store._table.add
    entered, go = threading.Event(), threading.Event()

    def held_add(data: Any, *args: Any, **kw: Any) -> Any:
        entered.set()
        go.wait(10)
        return real_add(data, *args, **kw)

    store._table.add = held_add
    store.start()
    try:
        gone = asyncio.new_event_loop()

        async def write_and_leave() -> None:
            task = asyncio.ensure_future(store.add([(mem(1), unit(1), None)]))
            assert await asyncio.to_thread(entered.wait, 10)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        gone.run_until_complete(write_and_leave())
        gone.close()
        go.set()  # the commit ends; its answer is for the closed loop

        async def write_afterwards() -> None:
            await asyncio.wait_for(store.add([(mem(2), unit(2), None)]), 10)

        asyncio.run(write_afterwards())
        assert store.count_rows() == 2  # the first write committed too, unanswered
    finally:
        go.set()
        store.close()
    assert stored_ids(tmp_path) == sorted([mem(1).id, mem(2).id])


async def test_every_stored_field_reads_back_as_written(tmp_path: Path) -> None:
    """What a restart loads is the record written: every field, updated or not, linked or
    not, and each record's lists its own (one reader changing a list it was handed cannot
    change another record)."""
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    store.start()
    plain, full = (
        mem(1),
        mem(
            2,
            agent_id="b",
            scope="agent:b",
            summary="a summary",
            category=Category.DECISION,
            importance=0.25,
            updated_at=NOW + timedelta(hours=3, microseconds=7),
            expires_at=NOW + timedelta(days=9),
            metadata={"k": "v", "n": "2"},
            idempotency_key="key-2",
            access_count=4,
            last_accessed_at=NOW + timedelta(hours=5),
            related_ids=(mem(1).id, mem(3).id),
            supersedes=mem(1).id,
            language="de",
        ),
    )
    another = mem(3, updated_at=NOW + timedelta(seconds=3))  # updated at its creation
    try:
        await store.add([(m, unit(i), None) for i, m in enumerate((plain, full, another))])
    finally:
        store.close()
    reopened = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    read = {m.id: m for m, _, _ in reopened.scan()}
    assert read == {m.id: m for m in (plain, full, another)}
    # most memories link nowhere: they share the empty tuple, which no reader can change
    assert read[plain.id].related_ids == read[another.id].related_ids == ()
    with pytest.raises(AttributeError):
        read[plain.id].related_ids.append("x")  # type: ignore[attr-defined]


def test_a_record_made_from_stored_fields_is_the_constructors() -> None:
    full = mem(
        5,
        supersedes="s",
        related_ids=("r",),
        language="fr",
        expires_at=NOW,
        last_accessed_at=NOW,
        access_count=2,
    )
    fields = {f.name: getattr(full, f.name) for f in dataclasses.fields(Memory)}
    del fields["superseded_by"]
    made = stored_memory(**fields)
    assert made == full and dataclasses.asdict(made) == dataclasses.asdict(full)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.text = "changed"  # type: ignore[misc]


def test_a_recalled_records_new_access_count_keeps_every_other_field() -> None:
    """Recall counts each result's access on a copy of its record (``with_access``); the
    copy must be ``dataclasses.replace``'s, superseded_by (derived) included."""
    full = mem(
        6,
        summary="sum",
        category=Category.DECISION,
        importance=0.75,
        expires_at=NOW + timedelta(days=2),
        metadata={"k": "v"},
        idempotency_key="key",
        related_ids=("r1", "r2"),
        supersedes="older",
        language="ja",
    )
    full = dataclasses.replace(full, superseded_by="newer", access_count=3)
    later = NOW + timedelta(minutes=5)
    copy = with_access(full, 4, later)
    assert copy == dataclasses.replace(full, access_count=4, last_accessed_at=later)
    assert dataclasses.asdict(copy) == {
        **dataclasses.asdict(full),
        "access_count": 4,
        "last_accessed_at": later,
    }
    assert full.access_count == 3 and full.last_accessed_at is None  # the original stays
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.access_count = 9  # type: ignore[misc]


async def test_stores_commit_during_a_compaction_and_deletes_wait_for_its_end(
    tmp_path: Path,
) -> None:
    """Compaction runs beside the writer: an append is acknowledged (durably) while one is
    in progress, a delete waits for it (committed during it, the delete would make the
    compaction fail), and nothing is lost either way."""
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, compact_every=3)
    entered, release = stall_compactions(store, 30)
    store.start()
    try:
        for i in range(3):  # three commits, then a quiet second: a compaction is due
            await store.add([(mem(i), unit(i), None)])
        assert await asyncio.to_thread(entered.wait, 10), "no compaction started"
        await asyncio.wait_for(store.add([(mem(10), unit(10), None)]), 5)
        delete = asyncio.ensure_future(store.delete([mem(0).id]))
        await asyncio.sleep(0.5)
        assert not delete.done()
        release.set()
        await asyncio.wait_for(delete, 30)
    finally:
        release.set()
        store.close()
    assert store.compactions == 1
    assert stored_ids(tmp_path) == [mem(i).id for i in (1, 2, 10)]


async def test_a_compaction_after_a_burst_leaves_the_large_fragments_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction merges the small fragments of a burst of Stores and leaves the large
    ones as they are: LanceDB's own rewrote every fragment of a table under a million rows
    (13 GB at 1M memories to add a few). Stores acknowledged while it runs (after its
    plan) are kept; a large fragment with a fifth of its rows forgotten is rewritten, so
    their space is freed."""
    monkeypatch.setattr(lance_store, "COMPACT_TARGET_ROWS", 40)
    planned, release = threading.Event(), threading.Event()
    real = lance.optimize.Compaction

    class Stalled:
        commit = real.commit

        @staticmethod
        def plan(ds: object, options: object) -> object:
            made = real.plan(ds, options)
            planned.set()
            release.wait(30)
            return made

    monkeypatch.setattr(lance.optimize, "Compaction", Stalled)
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, compact_every=4)

    def fragments() -> dict[int, int]:
        ds = store._table.to_lance()
        return {f.fragment_id: f.metadata.physical_rows for f in ds.get_fragments()}

    store.start()
    try:
        await store.add([(mem(i), unit(i), None) for i in range(50)])
        (large,) = fragments()
        for i in range(50, 54):  # four commits, then a quiet second: a compaction is due
            await store.add([(mem(i), unit(i), None)])
        assert await asyncio.to_thread(planned.wait, 10), "no compaction started"
        for i in range(54, 56):  # acknowledged after the plan, before its commit
            await asyncio.wait_for(store.add([(mem(i), unit(i), None)]), 5)
        release.set()
        await compacted(store, 1)
        after = fragments()
        assert after[large] == 50  # not rewritten
        assert sorted(after.values()) == [1, 1, 4, 50]  # the burst's four merged
        await store.delete([mem(i).id for i in range(10)])
        for i in range(56, 59):
            await store.add([(mem(i), unit(i), None)])
        await compacted(store, 2)
        assert large not in fragments()
        assert sum(fragments().values()) == 49  # the forgotten rows' space is freed
    finally:
        release.set()
        store.close()
    assert stored_ids(tmp_path) == sorted(mem(i).id for i in range(10, 59))


async def test_a_forgotten_memorys_text_leaves_the_data_files_within_the_purge_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction leaves a large fragment with a few rows deleted as it is (rewriting it
    for each Forget would cost ~210 MB a time), but once ``purge_every`` seconds have passed
    since the last purge a compaction rewrites it: the forgotten memories' texts are then
    in no file of the table, once the versions that held them are cleaned up. A store
    opened again purges at its first compaction (a daemon restarted more often than the
    interval would never purge otherwise)."""
    monkeypatch.setattr(lance_store, "COMPACT_TARGET_ROWS", 40)

    def opened() -> LanceStore:
        return LanceStore(
            str(tmp_path),
            table="m",
            model_name="x",
            dim=8,
            compact_every=3,
            keep_versions_seconds=0.2,
        )

    store = opened()
    store._purged_at = time.monotonic()  # a purge just ran
    table_dir = tmp_path / "m.lance"

    def on_disk(text: str) -> bool:
        return in_files(table_dir, text)

    def secret(i: int) -> str:
        return f"the door code is {9000 + i}"

    store.start()
    try:
        await store.add([(mem(i, text=secret(i)), unit(i), None) for i in range(50)])
        await store.delete([mem(0).id, mem(1).id])  # 4%: under Lance's tenth
        for i in range(50, 52):
            await store.add([(mem(i), unit(i), None)])
        await compacted(store, 1)  # no purge due yet: the large fragment stays as written
        assert store._table.to_lance().get_fragments()[0].metadata.physical_rows == 50
        assert on_disk(secret(0)) and on_disk(secret(2))
        store.purge_every = 0.0
        for i in range(52, 55):
            await store.add([(mem(i), unit(i), None)])
        await compacted(store, 2)
        for _ in range(100):  # the versions that held them go at the next cleanup
            if not on_disk(secret(0)):
                break
            await asyncio.sleep(0.05)
        assert not on_disk(secret(0)) and not on_disk(secret(1))
        assert on_disk(secret(2))  # (the texts are found where they are)
        await store.delete([mem(2).id])
    finally:
        store.close()
    again = opened()
    again.start()
    try:
        for i in range(55, 58):
            await again.add([(mem(i), unit(i), None)])
        for _ in range(200):
            if again.compactions >= 1 and not on_disk(secret(2)):
                break
            await asyncio.sleep(0.05)
        assert not on_disk(secret(2)) and on_disk(secret(3))
    finally:
        again.close()
    assert stored_ids(tmp_path) == sorted(mem(i).id for i in range(3, 58))


async def test_a_purged_text_leaves_the_disk_though_a_store_follows_the_purge(
    tmp_path: Path,
) -> None:
    """The versions a purge replaced list the files that held the texts it purged; they go
    ``keep_versions`` after it even when Stores commit after it. One Store right after the
    purge kept them, and the forgotten text, until the hourly cleanup (helper-53's
    review)."""
    store = LanceStore(
        str(tmp_path),
        table="m",
        model_name="x",
        dim=8,
        compact_every=10**6,
        keep_versions_seconds=0.5,
        purge_every_seconds=0.0,
    )
    secret = "the door code is 9000"
    store.start()
    try:
        await store.add([(mem(i, text=f"{secret}{i:02d}"), unit(i), None) for i in range(50)])
        await store.delete([mem(7).id])
        await compacted(store, 1)  # the purge
        await store.add([(mem(50), unit(50), None)])  # a Store after it
        for _ in range(200):
            if not in_files(tmp_path / "m.lance", f"{secret}07"):
                break
            await asyncio.sleep(0.05)
        assert not in_files(tmp_path / "m.lance", f"{secret}07")
        assert in_files(tmp_path / "m.lance", f"{secret}08")
    finally:
        store.close()


async def test_a_purge_asks_for_itself_when_idle_and_goes_a_step_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forgets followed by nothing else (no compaction due by count or by the clock) are
    purged anyway once the interval has passed: the idle writer asks for the purge. It
    rewrites one step (about ``COMPACT_STEP_ROWS`` rows) per compaction, so a Forget waits
    for one fragment's rewrite at most, not the whole table's."""
    monkeypatch.setattr(lance_store, "COMPACT_TARGET_ROWS", 40)
    monkeypatch.setattr(lance_store, "COMPACT_STEP_ROWS", 40)
    store = LanceStore(
        str(tmp_path),
        table="m",
        model_name="x",
        dim=8,
        compact_every=1000,
        keep_versions_seconds=0.2,
    )
    store._purged_at, store._purged_upto = time.monotonic(), store._deleting_commits
    files = tmp_path / "m.lance"
    real = lance.optimize.Compaction
    committed: list[int] = []  # rewrites committed per step

    class Counted:
        plan = real.plan

        @staticmethod
        def commit(ds: object, rewrites: list[object], options: object) -> object:
            committed.append(len(rewrites))
            return real.commit(ds, rewrites, options)

    monkeypatch.setattr(lance.optimize, "Compaction", Counted)

    def on_disk(i: int) -> bool:
        return in_files(files, f"the door code is {9000 + i}")

    store.start()
    try:
        for k in range(4):  # four fragments of 50 rows
            batch = range(50 * k, 50 * k + 50)
            await store.add(
                [(mem(i, text=f"the door code is {9000 + i}"), unit(i), None) for i in batch]
            )
        await store.delete([mem(50 * k).id for k in range(4)])  # one row of each
        await asyncio.sleep(2.5)  # idle: neither a count nor the hourly clock is due
        assert store.compactions == 0 and on_disk(0) and on_disk(150)
        store.purge_every = 0.0
        for _ in range(300):
            if not any(on_disk(50 * k) for k in range(4)):
                break
            await asyncio.sleep(0.05)
        assert not any(on_disk(50 * k) for k in range(4))
        assert on_disk(1) and on_disk(151)
        assert committed == [1, 1, 1, 1]  # a step a fragment
    finally:
        store.close()
    assert len(stored_ids(tmp_path)) == 196


async def test_a_purge_ends_while_forgets_keep_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge covers the fragments with deleted rows when it began: Forgets committed
    between its steps (landing on fragments it already rewrote) wait for the next one. A
    round that took them in too never ended under a steady trickle of Forgets, rewriting a
    fragment after every one instead of once an hour (helper-50's review)."""
    monkeypatch.setattr(lance_store, "COMPACT_TARGET_ROWS", 40)
    monkeypatch.setattr(lance_store, "COMPACT_STEP_ROWS", 40)
    store = LanceStore(
        str(tmp_path),
        table="m",
        model_name="x",
        dim=8,
        compact_every=10**6,
        keep_versions_seconds=0.2,
    )
    store.start()
    try:
        for k in range(10):  # ten fragments of 50 rows
            await store.add([(mem(i), unit(i), None) for i in range(50 * k, 50 * k + 50)])
        await store.delete([mem(50 * k).id for k in range(10)])  # a Forget in each
        await asyncio.sleep(1.5)  # idle: the purge begins
        gone = [0] * 10
        for n in range(60):  # 3 s of Forgets, two fragments each time
            await asyncio.sleep(0.05)
            ids = []
            for k in ((n * 3) % 10, (n * 3 + 5) % 10):
                gone[k] += 1
                ids.append(mem(50 * k + gone[k]).id)
            await store.delete(ids)
        for _ in range(100):
            if store._purging is None and not store._more_to_compact:
                break
            await asyncio.sleep(0.05)
        assert store._purging is None, "the purge is still under way"
        assert store.compactions <= 12  # ten steps, a cleanup (not one per Forget)
    finally:
        store.close()
    assert len(stored_ids(tmp_path)) == 500 - 10 - 120


def purged_just_now(tmp_path: Path) -> LanceStore:
    """A store whose last purge was just now (none is due until a Forget), compacting only
    when asked, its versions kept 0.2 s."""
    store = LanceStore(
        str(tmp_path),
        table="m",
        model_name="x",
        dim=8,
        compact_every=10**6,
        keep_versions_seconds=0.2,
    )
    store._purged_at, store._purged_upto = time.monotonic(), store._deleting_commits
    return store


async def test_a_large_fragments_purge_lets_forgets_through_and_ends_under_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge rewrites a large fragment from before (a table LanceDB's optimize or a bulk
    load wrote as one: ~50 s at 1M rows) whole, beside the Forgets instead of holding them,
    and the writer with every Store behind them, for its whole run. A Forget landing on
    that fragment meanwhile makes Lance refuse the rewrite: its files are deleted at once
    and it is tried again; after ``LONE_TASK_TRIES`` refusals in a row it holds the
    Forgets off, so a steady trickle cannot put it off for good; the next large fragment
    runs beside them again (helper-51's review: it held them too)."""
    small_fragments(monkeypatch)
    store = purged_just_now(tmp_path)
    data = tmp_path / "m.lance" / "data"
    entered, go, firsts = hold_large_rewrites(monkeypatch)

    def data_files() -> set[str]:
        return {f.name for f in data.iterdir()}

    async def rewrite_begins() -> int:
        assert await asyncio.to_thread(entered.wait, 10), "no rewrite of a fragment began"
        entered.clear()
        return 300 * firsts[-1]  # the fragment's first row

    async def forget_while_it_runs(i: int) -> None:
        # acknowledged while the rewrite runs (it held them until it ended before)
        await asyncio.wait_for(store.delete([mem(i).id]), 5)
        await store.add([(mem(1000 + i), unit(i), None)])  # the Stores behind it too
        files = data_files()
        go.set()
        assert await rewrite_begins() == i - i % 300  # refused: the same again,
        assert data_files() == files  # and what it wrote is gone

    def code(i: int) -> str:
        return f"the door code is {9000 + i}"

    store.start()
    try:
        for first in (0, 300):  # two fragments of 300 rows, a row deleted in each
            batch = range(first, first + 300)
            await store.add([(mem(i, text=code(i)), unit(i), None) for i in batch])
        await store.delete([mem(0).id, mem(300).id])
        store.purge_every = 0.0
        one = await rewrite_begins()
        for k in range(1, lance_store.LONE_TASK_TRIES + 1):
            await forget_while_it_runs(one + k)
        held = asyncio.ensure_future(store.delete([mem(one + 10).id]))
        await asyncio.sleep(0.5)
        assert not held.done()  # after three refusals the rewrite holds the Forgets off
        go.set()
        await asyncio.wait_for(held, 10)
        other = await rewrite_begins()
        assert other == 300 - one
        await forget_while_it_runs(other + 20)  # beside them again
        go.set()
        for _ in range(200):
            if store._purging is None and not store._more_to_compact:
                break
            await asyncio.sleep(0.05)
        assert store._purging is None, "the purge is still under way"
        assert store.lone_refusals == lance_store.LONE_TASK_TRIES + 1
        table = tmp_path / "m.lance"
        gone = [one, one + 1, one + 2, one + 3, other, other + 20]
        for _ in range(200):  # the versions that held them go at the next cleanup
            if not any(in_files(table, code(i)) for i in gone):
                break
            await asyncio.sleep(0.05)
        assert not any(in_files(table, code(i)) for i in gone)
        assert in_files(table, code(one + 11))
    finally:
        go.set()
        store.close()
    ids = stored_ids(tmp_path)
    assert len(ids) == 600 - 7 + 4 and mem(one + 10).id not in ids
    assert mem(1000 + other + 20).id in ids


async def test_stores_behind_a_held_forget_commit_meanwhile_but_not_one_of_its_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Forget or Update waits for the compaction step in progress: about a second, but a
    large fragment's rewrite that holds them (on an object store, or after refusals) a
    minute at 1M rows, and the writer waited with it, every Store queued behind it too. Now
    those Stores commit meanwhile; a Store naming an id a write before it names (the Import
    of the memory being forgotten, an Update's memory) still lands after that write."""
    small_fragments(monkeypatch)
    store = purged_just_now(tmp_path)
    entered, go, _ = hold_large_rewrites(monkeypatch)
    store.start()
    try:
        await store.add([(mem(i), unit(i), None) for i in range(300)])
        await store.delete([mem(0).id])
        store._lone_refusals = lance_store.LONE_TASK_TRIES  # the rewrite holds them off
        store.purge_every = 0.0
        assert await asyncio.to_thread(entered.wait, 10), "no rewrite of the fragment began"
        forget = asyncio.ensure_future(store.delete([mem(1).id]))
        await asyncio.sleep(0.1)
        imported = asyncio.ensure_future(store.add([(mem(1), unit(1), None)]))
        update = asyncio.ensure_future(store.update([(mem(2, text="new"), unit(2), None)]))
        after_update = asyncio.ensure_future(store.add([(mem(2, text="dup"), unit(2), None)]))
        for k in range(3):  # other memories' Stores: acknowledged while the rewrite runs
            await asyncio.wait_for(store.add([(mem(500 + k), unit(k), None)]), 5)
        assert not forget.done() and not imported.done()
        assert not update.done() and not after_update.done()
        assert store.passed_stores == 3
        go.set()
        await asyncio.wait_for(asyncio.gather(forget, imported, update, after_update), 15)
    finally:
        go.set()
        store.close()
    rows = [m for m, _, _ in LanceStore(str(tmp_path), table="m", model_name="x", dim=8).scan()]
    ids = [m.id for m in rows]
    assert ids.count(mem(1).id) == 1  # forgotten, then imported: the import stays
    assert sorted(m.text for m in rows if m.id == mem(2).id) == ["dup", "new"]
    assert mem(0).id not in ids and all(mem(500 + k).id in ids for k in range(3))


async def test_a_rewrite_another_daemons_forget_refused_leaves_no_copy_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a directory two daemons share, holding this daemon's Forgets off does not hold
    the other's: a Forget of the other daemon landing on a fragment under rewrite makes
    Lance refuse the rewrite. Its files, a copy of the text just forgotten, are deleted at
    once; they stayed 7 days in no version (helper-52's review)."""
    small_fragments(monkeypatch)
    kw: dict[str, Any] = dict(table="m", model_name="x", dim=8, compact_every=10**6, shared=True)
    a, b = LanceStore(str(tmp_path), **kw), LanceStore(str(tmp_path), **kw)
    a._compacting = b._compacting = True  # no compaction but the one below
    a._lone_refusals = lance_store.LONE_TASK_TRIES  # it holds this daemon's Forgets off
    a.start()
    b.start()
    code = "the door code is 9005"
    try:
        await a.add([(mem(i, text=code if i == 5 else f"t{i}"), unit(i), None) for i in range(300)])
        await a.delete([mem(0).id])
        entered, go, _ = hold_large_rewrites(monkeypatch)

        def step() -> None:
            with a._rewrite_lock, contextlib.suppress(OSError):
                a._optimize_memories(a._table, None, purge_found=True)

        rewrite = asyncio.ensure_future(asyncio.to_thread(step))
        assert await asyncio.to_thread(entered.wait, 10), "no rewrite of the fragment began"
        await asyncio.wait_for(b.delete([mem(5).id]), 5)  # the other daemon's Forget
        go.set()
        await asyncio.wait_for(rewrite, 10)
        assert a._purging is not None  # refused: the purge is still to do
        ds = lance.dataset(str(tmp_path / "m.lance"))
        listed = {
            f.path
            for v in ds.versions()
            for fragment in ds.checkout_version(v["version"]).get_fragments()
            for f in fragment.metadata.files
        }
        unlisted = [f for f in (tmp_path / "m.lance" / "data").iterdir() if f.name not in listed]
        assert not [f for f in unlisted if code.encode() in f.read_bytes()]
    finally:
        go.set()
        a.close()
        b.close()


async def test_a_failing_compaction_backs_off_instead_of_retrying_every_second(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """While the disk stays full a compaction fails; it is asked for again after 1, 2, 4 ...
    seconds (up to 5 minutes), not at every idle second, each time with a warning."""
    store = LanceStore(
        str(tmp_path), table="m", model_name="x", dim=8, compact_every=1, keep_versions_seconds=0.2
    )
    calls: list[float] = []

    def full(table: object, older_than: timedelta | None) -> bool:
        calls.append(time.monotonic())
        raise OSError("LanceError(IO): No space left on device (os error 28)")

    store._optimize_memories = full  # type: ignore[method-assign]
    store.start()
    try:
        with caplog.at_level(logging.WARNING, logger="memoryd.storage.lance_store"):
            await store.add([(mem(0), unit(0), None)])
            await asyncio.sleep(7.5)
        assert store.count_rows() == 1  # the write stands
    finally:
        store.close()
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert 2 <= len(calls) <= 4, gaps  # every idle second it was 7
    assert all(later > earlier for earlier, later in itertools.pairwise(gaps)), gaps
    skipped = [r for r in caplog.records if "no space left" in r.getMessage()]
    assert len(skipped) == len(calls)


async def test_a_stop_does_not_wait_out_a_long_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction still running at the stop (minutes at 100k memories) is left after a
    few seconds instead of holding the stop until a supervisor kills the daemon; every
    acknowledged write is in the store when it is opened again."""
    monkeypatch.setattr(lance_store, "COMPACTION_STOP_WAIT_SECONDS", 1.0)
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, compact_every=3)
    entered, release = stall_compactions(store, 120)
    store.start()
    try:
        for i in range(3):  # three commits, then a quiet second: a compaction is due
            await store.add([(mem(i), unit(i), None)])
        assert await asyncio.to_thread(entered.wait, 10), "no compaction started"
        await store.add([(mem(10), unit(10), None)])  # appends commit beside it
        assert store.pending() == "a compaction in progress"
        await asyncio.wait_for(asyncio.to_thread(store.close), 20)
        assert not release.is_set()  # the compaction was still stuck: the stop left it
        assert stored_ids(tmp_path) == [mem(i).id for i in (0, 1, 2, 10)]
    finally:
        release.set()


async def test_access_counts_survive_a_restart_without_rewriting_any_memory(
    tmp_path: Path,
) -> None:
    """Access counts go to the access log (appends, folded to one entry per id once it
    grows): the memories' rows are not rewritten, and a reopened store reads back the
    highest count and latest access of each memory; a forgotten one stays forgotten."""
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, access_fold_rows=10)
    t1 = NOW + timedelta(hours=1)
    store.start()
    try:
        await store.add([(mem(i), unit(i), None) for i in range(3)])
        written = store.rows_written
        await store.record_access([(mem(0).id, 3, t1), (mem(1).id, 1, None)])
        await store.record_access([(mem(0).id, 5, t1 + timedelta(minutes=1))])
        await store.delete([mem(2).id])
        await store.record_access([(mem(2).id, 9, t1)])
        for k in range(12):  # past the fold threshold
            await store.record_access([(mem(1).id, 2 + k, t1 + timedelta(seconds=k))])
        assert store.rows_written == written
        assert store.access_folds >= 1
    finally:
        store.close()
    reopened = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    assert len(reopened.read_access()) == 3
    rows = {m.id: m for m, _, _ in reopened.scan()}
    assert set(rows) == {mem(0).id, mem(1).id}
    assert (rows[mem(0).id].access_count, rows[mem(0).id].last_accessed_at) == (
        5,
        t1 + timedelta(minutes=1),
    )
    assert (rows[mem(1).id].access_count, rows[mem(1).id].last_accessed_at) == (
        13,
        t1 + timedelta(seconds=11),
    )


async def test_recalled_memories_keep_their_access_counts_across_a_restart(
    tmp_path: Path,
) -> None:
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    repo = Repository(store)
    repo.open()
    try:
        for i in range(3):
            await repo.add(mem(i), unit(i))
        repo.touch([mem(0).id, mem(1).id], NOW + timedelta(days=1))
        repo.touch([mem(0).id], NOW + timedelta(days=2))
        assert await repo.flush_access_counts() == 2
        assert await repo.flush_access_counts() == 0  # nothing new since
    finally:
        repo.close()
    again = Repository(LanceStore(str(tmp_path), table="m", model_name="x", dim=8))
    again.open()
    try:
        got = {i: again.get(mem(i).id) for i in range(3)}
        assert [(m.access_count, m.last_accessed_at) for m in got.values() if m] == [
            (2, NOW + timedelta(days=2)),
            (1, NOW + timedelta(days=1)),
            (0, None),
        ]
    finally:
        again.close()


async def test_the_load_at_start_leaves_the_cyclic_gc_as_it_found_it(tmp_path: Path) -> None:
    """The load pauses the cyclic GC; afterwards (and after a load that fails) it runs
    again, or a daemon would keep every reference cycle it ever made."""
    import gc

    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    repo = Repository(store)
    repo.open()
    await repo.add(mem(0), unit(0))
    repo.close()
    assert gc.isenabled()
    broken = Repository(LanceStore(str(tmp_path), table="m", model_name="x", dim=8))

    def fail() -> None:
        assert not gc.isenabled()  # paused during the load
        raise OSError("read failed")

    broken._load_rows = fail  # type: ignore[method-assign]
    with pytest.raises(OSError):
        broken.open()
    assert gc.isenabled()
    broken.close()


def test_hot_index_searches_only_the_given_scopes_and_skips_expired() -> None:
    idx = HotIndex(8)
    idx.put(mem(1, "agent:a"), unit(1))
    idx.put(mem(2, "agent:b"), unit(1))
    idx.put(mem(3, "agent:a", expires_at=NOW), unit(1))
    hits = idx.search(unit(1), ["agent:a"], 10, now=NOW)
    assert [m.id for m, _ in hits] == [mem(1).id]
    both = idx.search(unit(1), ["agent:a", "agent:b"], 10, now=NOW)
    assert {m.scope for m, _ in both} == {"agent:a", "agent:b"}
    assert idx.count_expired(["agent:a"], now=NOW) == 1
    assert idx.expired_ids(now=NOW) == [mem(3).id]
    idx.put(mem(4, "agent:b", expires_at=NOW), unit(1))
    # A Prepare asks for its own scopes: another tenant's expired rows are never listed.
    assert idx.expired_ids(now=NOW, scopes=["agent:a"]) == [mem(3).id]
    assert idx.expired_ids(now=NOW, scopes=["agent:b", "agent:c"]) == [mem(4).id]
    assert sorted(idx.expired_ids(now=NOW)) == sorted([mem(3).id, mem(4).id])


def test_hot_index_remove_keeps_other_rows_intact() -> None:
    idx = HotIndex(8)
    for i in range(40):
        idx.put(mem(i), unit(i))
    for i in range(0, 40, 3):
        idx.remove(mem(i).id)
    for i in range(40):
        v = idx.vector_of(mem(i).id)
        if i % 3 == 0:
            assert v is None and idx.get(mem(i).id) is None
        else:
            assert v is not None and np.allclose(v, unit(i))
            assert idx.find_by_hash("agent:a", f"h{i}") is not None
    top = idx.search(unit(4), ["agent:a"], 100, now=NOW)
    assert {m.id for m, s in top if s > 0.5} == {
        mem(i).id for i in range(40) if i % 8 == 4 and i % 3
    }


async def test_a_reopened_store_reads_every_batch_back_exactly(tmp_path: Path) -> None:
    """More rows than one read batch (8192): timestamps, absent and present expiries and
    token vectors come back the same in every batch, not only the first."""
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    store.start()
    n = 8300
    rows = []
    for i in range(n):
        expires = NOW + timedelta(days=1, microseconds=i) if i % 3 == 0 else None
        m = mem(i, expires_at=expires, updated_at=NOW + timedelta(microseconds=7 * i))
        tok = np.full((1 + i % 4, 8), i % 100, dtype=np.int8) if i % 2 else None
        rows.append((m, unit(i), tok))
    try:
        await store.add(rows)
    finally:
        store.close()
    back = {
        m.id: (m, v, t)
        for m, v, t in LanceStore(str(tmp_path), table="m", model_name="x", dim=8).scan()
    }
    assert len(back) == n
    for m, v, tok in rows:
        got, got_v, got_tok = back[m.id]
        assert (got.created_at, got.updated_at, got.expires_at) == (
            m.created_at,
            m.updated_at,
            m.expires_at,
        )
        assert got.created_at.utcoffset() == timedelta(0)
        assert got.last_accessed_at is None
        np.testing.assert_array_equal(got_v, v)
        if tok is None:
            assert got_tok is None
        else:
            assert got_tok is not None
            np.testing.assert_array_equal(got_tok, tok)


def test_bulk_loading_derives_the_same_links_as_one_put_at_a_time() -> None:
    """Links and supersede chains come out the same whether the rows arrive one by one
    or in a bulk load (links derived at the end), in either order."""
    rows = [mem(i) for i in range(6)]
    rows[1] = dataclasses.replace(rows[1], related_ids=(rows[0].id, rows[2].id))
    rows[3] = dataclasses.replace(rows[3], related_ids=(rows[0].id,))
    rows[4] = dataclasses.replace(rows[4], supersedes=rows[2].id)
    absent = "00000000-0000-4000-8000-000000000999"
    rows[5] = dataclasses.replace(rows[5], related_ids=(rows[4].id, absent))

    def derived(index: HotIndex) -> dict[str, tuple[list[str], str]]:
        got = index.visible(["agent:a"], now=NOW)
        return {m.id: (list(m.related_ids), m.superseded_by) for m in got}

    one_by_one = HotIndex(8)
    for i, m in enumerate(rows):
        one_by_one.put(dataclasses.replace(m), unit(i))
    want = derived(one_by_one)
    assert want[rows[0].id][0] == [rows[1].id, rows[3].id]
    assert want[rows[1].id][0] == [rows[0].id, rows[2].id]
    assert want[rows[2].id] == ([rows[1].id], rows[4].id)
    reverse = HotIndex(8)
    for m in rows[::-1]:
        reverse.put(dataclasses.replace(m), unit(int(m.id[-4:])))
    assert derived(reverse) == want
    for order in (rows, rows[::-1]):
        bulk = HotIndex(8)
        with bulk.bulk_load():
            for m in order:
                bulk.put(dataclasses.replace(m), unit(int(m.id[-4:])))
        assert derived(bulk) == want
        q = unit(2)  # the superseded memory is hidden from search
        assert rows[2].id not in {m.id for m, _ in bulk.search(q, ["agent:a"], 6, now=NOW)}


def test_a_memory_many_others_link_to_lists_each_of_them_as_they_come_and_go() -> None:
    """A target's backlinks are kept compactly while few, in a set once many: either way
    its related ids are exactly the memories linking to it, as they are added and
    forgotten (also across the switch, and back down to none)."""
    index = HotIndex(8)
    target = mem(0)
    index.put(target, unit(0))
    sources = [dataclasses.replace(mem(i), related_ids=(target.id,)) for i in range(1, 13)]
    for i, m in enumerate(sources, start=1):
        index.put(m, unit(i))
        got = index.get(target.id)
        assert got is not None and got.related_ids == tuple(sorted(s.id for s in sources[:i]))
    for i, m in enumerate(sources):
        index.remove(m.id)
        got = index.get(target.id)
        assert got is not None and got.related_ids == tuple(sorted(s.id for s in sources[i + 1 :]))
    relinked = dataclasses.replace(mem(20), related_ids=(target.id,))
    index.put(relinked, unit(3))
    got = index.get(target.id)
    assert got is not None and got.related_ids == (relinked.id,)


def test_a_bulk_load_past_the_first_array_growth_shows_every_unlinked_row() -> None:
    """Rows with no links are not re-derived at the end of a bulk load: each is shown as
    put, however often the row arrays grew (their new rows start uninitialised)."""
    index = HotIndex(8)
    rows = [mem(i) for i in range(300)]
    rows[7] = dataclasses.replace(rows[7], supersedes=rows[250].id)
    with index.bulk_load():
        for i, m in enumerate(rows):
            index.put(m, unit(i))
    listed = {m.id: m for m in index.visible(["agent:a"], now=NOW)}
    assert listed.keys() == {m.id for m in rows}
    assert listed[rows[250].id].superseded_by == rows[7].id
    assert [m.id for m in listed.values() if m.superseded_by] == [rows[250].id]
    found = {m.id for m, _ in index.search(unit(250), ["agent:a"], 300, now=NOW)}
    assert rows[250].id not in found and len(found) == 299


def test_links_and_supersession_never_cross_scopes() -> None:
    """A row stored with a link or a supersede towards another scope (as an old import
    could write) neither hides nor shows the other scope's memory."""
    from datetime import UTC, datetime

    import numpy as np

    from memoryd.core.records import Category, Memory
    from memoryd.storage.hot_index import HotIndex

    now = datetime(2026, 1, 1, tzinfo=UTC)

    def memory(mid: str, scope: str, **kw: object) -> Memory:
        return Memory(mid, scope.split(":")[-1], scope, f"text {mid}", f"text {mid}",
                      Category.FACT, 0.5, now, now, **kw)  # type: ignore[arg-type]  # fmt: skip

    index = HotIndex(4)
    vector = np.array([1, 0, 0, 0], np.float32)
    index.put(memory("victim", "agent:main"), vector)
    index.put(memory("forged", "agent:mallory", supersedes="victim", related_ids=("victim",)),
              vector)  # fmt: skip
    index.put(memory("ok-old", "agent:mallory"), vector)
    index.put(memory("ok-new", "agent:mallory", supersedes="ok-old", related_ids=("ok-old",)),
              vector)  # fmt: skip
    victim = index.get("victim")
    assert victim is not None and not victim.superseded_by and victim.related_ids == ()
    assert [m.id for m, _ in index.search(vector, ["agent:main"], 5, now=now)] == ["victim"]
    assert index.get("forged").related_ids == ()  # type: ignore[union-attr]
    assert index.get("ok-old").superseded_by == "ok-new"  # type: ignore[union-attr]
    assert index.get("ok-old").related_ids == ("ok-new",)  # type: ignore[union-attr]


async def test_old_versions_are_dropped_so_the_table_stays_proportional(tmp_path: Path) -> None:
    """2,000 memories in 700 small commits: each commit writes a version (a manifest that
    lists every fragment), and the issue saw 2,003 version files (279 MB) left after 2,016
    Stores. Cleanups every ``compact_every`` commits keep them bounded while the writes go
    on, and once writes pause, every version but the newest goes: a compaction first (40
    commits), then a cleanup once the versions it had to keep are old enough."""
    store = LanceStore(
        str(tmp_path),
        table="m",
        model_name="x",
        dim=8,
        compact_every=40,  # forced after 200 commits while the writes never pause
        keep_versions_seconds=0.2,
    )
    versions = tmp_path / "m.lance" / "_versions"
    data = tmp_path / "m.lance" / "data"
    seen = []
    store.start()
    try:
        i = 0
        while i < 2000:
            batch = [(mem(j), unit(j), None) for j in range(i, min(i + 3, 2000))]
            await store.add(batch)
            i += len(batch)
            if i % 30 == 0:
                seen.append(len(list(versions.glob("*.manifest"))))
        assert store.commits == 667 and store.compactions >= 2
        assert max(seen) < 400, seen  # not one version per commit
        # A pause: the versions still kept then go too, and the fragments are one again.
        for _ in range(400):
            if len(list(versions.glob("*.manifest"))) == 1 and len(list(data.iterdir())) == 1:
                break
            await asyncio.sleep(0.05)
        assert len(list(versions.glob("*.manifest"))) == 1
        assert len(list(data.iterdir())) == 1  # one fragment: the compacted table
    finally:
        store.close()
    rows = LanceStore(str(tmp_path), table="m", model_name="x", dim=8).scan()
    assert sorted(m.id for m, _, _ in rows) == sorted(mem(j).id for j in range(2000))


async def test_a_trickle_of_stores_is_compacted_by_the_clock_not_after_each_one(
    tmp_path: Path,
) -> None:
    """A compaction rewrites up to a fragment's worth, so a few commits and a pause do not
    start one (a Store a minute would otherwise rewrite ~210 MB each minute); the hourly
    clock does (here a second), and the cleanup after it leaves one version."""
    store = LanceStore(
        str(tmp_path),
        table="m",
        model_name="x",
        dim=8,
        keep_versions_seconds=0.2,
        cleanup_every_seconds=3.0,
    )
    versions = tmp_path / "m.lance" / "_versions"
    store.start()
    try:
        for i in range(5):
            await store.add([(mem(i), unit(i), None)])
        await asyncio.sleep(2.0)  # idle twice the writer's tick, ten times keep_versions
        assert store.compactions == 0
        assert len(list(versions.glob("*.manifest"))) >= 5
        for _ in range(200):
            if len(list(versions.glob("*.manifest"))) == 1:
                break
            await asyncio.sleep(0.05)
        assert store.compactions >= 1 and len(list(versions.glob("*.manifest"))) == 1
    finally:
        store.close()


async def test_a_compaction_lost_to_concurrent_appends_is_a_warning_and_runs_again_when_idle(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """During a bulk import Lance may give up committing a compaction ('Too many
    concurrent writers'): one WARNING line, no traceback, nothing lost, and the compaction
    runs again once writes pause."""
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, compact_every=3)
    real = store._optimize_memories
    calls: list[str] = []

    def optimize(table: object, older_than: timedelta | None) -> bool:
        if not calls:
            calls.append("lost")
            raise RuntimeError(
                "lance error: Too many concurrent writers. Attempted 11 times, but failed on "
                "retry_timeout of 30.000 seconds."
            )
        calls.append("ran")
        return real(table, older_than)

    store._optimize_memories = optimize  # type: ignore[method-assign]
    store.start()
    try:
        with caplog.at_level(logging.WARNING, logger="memoryd.storage.lance_store"):
            for i in range(3):
                await store.add([(mem(i), unit(i), None)])
            for _ in range(100):  # the failed one, then idle: the retry
                if calls == ["lost", "ran"]:
                    break
                await asyncio.sleep(0.05)
    finally:
        store.close()
    assert calls == ["lost", "ran"]
    assert store.compactions == 1
    lines = [r for r in caplog.records if r.name == "memoryd.storage.lance_store"]
    assert [r.levelno for r in lines] == [logging.WARNING]
    assert "postponed" in lines[0].getMessage() and lines[0].exc_info is None
    assert stored_ids(tmp_path) == sorted(mem(i).id for i in range(3))


async def test_lancedb_caches_stay_within_storage_cache_mib_however_many_commits(
    tmp_path: Path,
) -> None:
    """Every commit writes a version, and LanceDB's metadata cache keeps the manifests of
    old versions it will never read again: after 10k Stores a daemon held 50 MiB there
    (bench/store_rss.py). ``storage.cache_mib`` bounds it; with a large bound the same
    commits hold more than the small one allows (so the bound is what holds it)."""
    held = {}
    for name, cache in (("small", 256 << 10), ("large", 64 << 20)):
        store = LanceStore(
            str(tmp_path / name),
            table="m",
            model_name="x",
            dim=8,
            compact_every=10**6,
            cache_bytes=cache,
        )
        store.start()
        try:
            for i in range(300):
                await store.add([(mem(i), unit(i), None)])
            held[name] = store.cache_bytes_held()
        finally:
            store.close()
    assert held["small"] <= 256 << 10, held
    assert held["large"] > 256 << 10, held


async def test_the_writer_hands_freed_memory_back_after_writes_not_while_idle(
    tmp_path: Path,
) -> None:
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    store.start()
    try:
        await store.add([(mem(i), unit(i), None) for i in range(10)])
        for _ in range(100):  # the writer goes idle a second after the last commit
            if store.heap_trims:
                break
            await asyncio.sleep(0.05)
        assert store.heap_trims == 1
        await asyncio.sleep(2.5)  # idle, nothing written: nothing more to hand back
        assert store.heap_trims == 1
    finally:
        store.close()


async def test_the_writer_hands_back_once_more_what_was_freed_after_a_burst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is freed after the trims that follow a burst (the cache drop's old session,
    the row arrays' trim, a compaction's last buffers) stayed resident: 132 MiB at 100k
    Stores. The writer trims once more a while after the last commit (here 0.6 s) and the
    end of any compaction, then never again while nothing is written."""
    monkeypatch.setattr(lance_store, "IDLE_COMPACT_SECONDS", 0.1)
    monkeypatch.setattr(lance_store, "SETTLE_TRIM_SECONDS", 0.6)
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, compact_every=1)
    running, release = stall_compactions(store, 30)
    store.start()
    try:
        await store.add([(mem(i), unit(i), None) for i in range(10)])
        assert await asyncio.to_thread(running.wait, 30)  # a compaction after the burst
        await asyncio.sleep(1.5)  # longer than the settle time: it runs from the end
        during = store.heap_trims
        release.set()
        for _ in range(200):
            if store.compactions:
                break
            await asyncio.sleep(0.05)
        assert store.compactions == 1
        await asyncio.sleep(0.3)
        ended = store.heap_trims  # the compaction's own trim, the trims while it ran
        await asyncio.sleep(1.5)
        assert store.heap_trims == ended + 1, (during, ended, store.heap_trims)
        await asyncio.sleep(1.5)  # idle, nothing written: nothing more
        assert store.heap_trims == ended + 1
        await store.add([(mem(20), unit(20), None)])  # a new burst: trims again
        await asyncio.sleep(2.0)
        assert store.heap_trims >= ended + 2
    finally:
        release.set()
        store.close()


async def test_lancedb_caches_are_dropped_once_a_burst_is_compacted_and_cleaned_up(
    tmp_path: Path,
) -> None:
    """A burst of commits fills LanceDB's metadata cache with the manifests of versions
    that its compaction and cleanup then delete (64 MiB, ~0.6 KB a memory, after 100k
    Stores). Once the burst, its compaction and cleanup are over, the idle writer opens the
    tables through fresh caches: the memory goes back, and the store reads and writes as
    before."""
    store = LanceStore(
        str(tmp_path), table="m", model_name="x", dim=8, compact_every=40,
        keep_versions_seconds=0.2,
    )  # fmt: skip
    versions = tmp_path / "m.lance" / "_versions"
    store.start()
    try:
        for i in range(0, 900, 3):
            await store.add([(mem(j), unit(j), None) for j in range(i, i + 3)])
        await store.record_access([(mem(1).id, 2, NOW)])
        full = store.cache_bytes_held()
        assert full > 8 << 20, full  # what the test is about: a cache worth dropping
        for _ in range(400):
            one_version = len(list(versions.glob("*.manifest"))) == 1
            if store.cache_drops and one_version and store.cache_bytes_held() < 1 << 20:
                break
            await asyncio.sleep(0.05)
        assert store.cache_drops >= 1
        assert store.cache_bytes_held() < 1 << 20
        await store.add([(mem(900), unit(0), None)])
        await store.delete([mem(0).id])
        await store.record_access([(mem(2).id, 1, NOW)])
    finally:
        store.close()
    reopened = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    rows = {m.id: m for m, _, _ in reopened.scan()}
    assert sorted(rows) == sorted(mem(j).id for j in range(1, 901))
    assert (rows[mem(1).id].access_count, rows[mem(2).id].access_count) == (2, 1)


async def test_the_idle_writer_hands_freed_memory_back_while_a_long_compaction_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction frees its buffers as it goes (at 100k memories it ran for minutes on a
    busy machine, and glibc kept ~210 MiB of them until it ended): the idle writer hands
    them back every few seconds meanwhile (here every 0.3 s), not only once it ends."""
    monkeypatch.setattr(lance_store, "IDLE_COMPACT_SECONDS", 0.1)
    monkeypatch.setattr(lance_store, "COMPACT_TRIM_SECONDS", 0.3)
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, compact_every=1)
    running, release = stall_compactions(store, 30)
    store.start()
    try:
        await store.add([(mem(i), unit(i), None) for i in range(10)])
        assert await asyncio.to_thread(running.wait, 30)
        at_start = store.heap_trims
        await asyncio.sleep(2.5)
        assert store.compactions == 0  # still compacting
        # without the trims during a compaction: at most the one after the writes
        assert store.heap_trims >= at_start + 4, (at_start, store.heap_trims)
    finally:
        release.set()
        store.close()
    assert store.compactions == 1
