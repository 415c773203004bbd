"""Following the shared store (storage/follow.py): two repositories over one table, each
with its own writer and index, as two daemons over one bucket are (here a local directory,
whose commits Lance makes safe for concurrent writers too). Each test calls ``catch_up``
(what the follow job and a Store do) and checks what the other daemon's index now says."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import lancedb
import pytest

from memoryd.core.records import KeyRecord, StoreOutcome
from memoryd.storage.lance_store import LanceStore, to_arrow
from memoryd.storage.repository import Repository

from .test_storage import NOW, mem, unit


def open_repo(path: Path, follow: float = 60.0) -> Repository:
    # A long interval: the tests drive the rounds themselves with catch_up.
    store = LanceStore(
        str(path), table="m", model_name="x", dim=8, compact_every=10_000, shared=follow > 0
    )
    repo = Repository(store, follow_interval=follow)
    repo.open()
    return repo


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Repository, Repository]]:
    a = open_repo(tmp_path)
    b = open_repo(tmp_path)
    yield a, b
    await asyncio.to_thread(a.close)
    await asyncio.to_thread(b.close)


async def test_a_store_on_one_reaches_the_others_index(
    pair: tuple[Repository, Repository],
) -> None:
    a, b = pair
    stored = await a.add(mem(1, text="the user keeps bees"), unit(1))
    assert b.get(stored.id) is None  # nothing followed yet
    await b.catch_up()
    got = b.get(stored.id)
    assert got is not None and got.text == "the user keeps bees"
    assert [m.id for m, _ in b.search(unit(1), ["agent:a"], 5, now=NOW)] == [stored.id]
    assert b.find_by_hash("agent:a", stored.content_hash) is not None
    lag = b.follow_lag()
    assert lag.applied_version == lag.latest_version and lag.seconds_since_check is not None


async def test_updates_and_deletes_follow_and_a_delete_never_comes_back(
    pair: tuple[Repository, Repository],
) -> None:
    a, b = pair
    kept, gone = mem(1), mem(2)
    await a.add(kept, unit(1))
    await a.add(gone, unit(2))
    await b.catch_up()
    changed = dataclasses.replace(kept, text="changed on a", updated_at=NOW + timedelta(hours=1))
    await a.replace(changed, unit(3))
    await a.delete([gone.id])
    await b.catch_up()
    got = b.get(kept.id)
    assert got is not None and got.text == "changed on a"
    assert [m.id for m, _ in b.search(unit(3), ["agent:a"], 1, now=NOW)] == [kept.id]
    assert b.get(gone.id) is None
    # A compaction rewrites the fragments: the same rows, nothing deleted comes back, and
    # only the columns that tell a row's state are read (no row is fetched again).
    later = await a.add(mem(3), unit(4))
    await b.catch_up()
    table = a._durable._table
    before = len(table.to_lance().get_fragments())
    await asyncio.to_thread(table.optimize)
    assert len(table.to_lance().get_fragments()) < before  # it did rewrite
    follower = b._follower
    assert follower is not None
    compacted = await asyncio.to_thread(follower._read)
    assert compacted is not None and compacted.rows == [] and compacted.gone == set()
    await follower._apply(compacted)
    await b.catch_up()
    assert b.get(gone.id) is None and b.get(kept.id) is not None
    assert {m.id for m in b.visible(["agent:a"], now=NOW)} == {kept.id, later.id}


async def test_a_local_delete_is_not_undone_by_an_older_followed_version(
    pair: tuple[Repository, Repository],
) -> None:
    a, b = pair
    m = mem(1)
    await a.add(m, unit(1))
    # b reads a version holding the row; before that round applies, b deletes the row
    # (a Forget by id): the round is older than b's delete and must not bring it back.
    follower = b._follower
    assert follower is not None
    round_read = await asyncio.to_thread(follower._read)
    assert round_read is not None and [r[0].id for r in round_read.rows] == [m.id]
    await b.delete([m.id])
    await follower._apply(round_read)
    assert b.get(m.id) is None
    await b.catch_up()
    assert b.get(m.id) is None
    await a.catch_up()
    assert a.get(m.id) is None


async def test_a_newer_local_update_is_not_overwritten_by_a_followed_older_row(
    tmp_path: Path,
) -> None:
    a = open_repo(tmp_path)
    b = open_repo(tmp_path)
    try:
        m = mem(1, text="first")
        await a.add(m, unit(1))
        await b.catch_up()
        later = m.updated_at + timedelta(minutes=1)
        await a.replace(dataclasses.replace(m, text="a's edit", updated_at=later), unit(2))
        # b edits after a did (its commit is newer) without having followed a's edit, its
        # clock behind a's: the order of the commits decides, not the clocks.
        earlier = m.updated_at + timedelta(seconds=1)
        await b.replace(dataclasses.replace(m, text="b's edit", updated_at=earlier), unit(3))
        await b.catch_up()
        got = b.get(m.id)
        assert got is not None and got.text == "b's edit"
        await a.catch_up()
        got = a.get(m.id)
        assert got is not None and got.text == "b's edit"
    finally:
        a.close()
        b.close()


async def test_concurrent_writes_on_both_end_as_the_union(
    pair: tuple[Repository, Repository],
) -> None:
    a, b = pair
    on_a = [mem(i) for i in range(20)]
    on_b = [mem(i) for i in range(100, 120)]
    await asyncio.gather(
        *(a.add(m, unit(i)) for i, m in enumerate(on_a)),
        *(b.add(m, unit(i)) for i, m in enumerate(on_b)),
    )
    await a.catch_up()
    await b.catch_up()
    everything = {m.id for m in on_a + on_b}
    for repo in (a, b):
        assert {m.id for m in repo.visible(["agent:a"], now=NOW)} == everything


async def test_keys_and_access_counts_follow(pair: tuple[Repository, Repository]) -> None:
    a, b = pair
    m = mem(1)
    await a.add(m, unit(1))
    record = KeyRecord("a", "retry-1", m.id, StoreOutcome.DUPLICATE, "h", "agent:a", 1.0, NOW)
    await a.record_key(record)
    a.touch([m.id], NOW + timedelta(days=1))
    a.touch([m.id], NOW + timedelta(days=2))
    await a.flush_access_counts()
    await b.catch_up()
    assert b.key_record("a", "retry-1") == record
    got = b.get(m.id)
    assert got is not None
    assert (got.access_count, got.last_accessed_at) == (2, NOW + timedelta(days=2))


async def test_following_off_reads_nothing_of_the_others(tmp_path: Path) -> None:
    a = open_repo(tmp_path, follow=0)
    b = open_repo(tmp_path, follow=0)
    try:
        m = mem(1)
        await a.add(m, unit(1))
        await b.catch_up()
        assert b.get(m.id) is None
        assert b.follow_lag().seconds_since_check is None
    finally:
        a.close()
        b.close()


async def test_a_commit_made_while_a_daemon_loads_reaches_its_index(tmp_path: Path) -> None:
    a = open_repo(tmp_path)
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8, shared=True)
    late = mem(9, text="committed by a while b was loading")
    read_keys = store.read_keys

    def read_keys_after_a_commits() -> list[KeyRecord]:
        # After b read the rows and before it takes the table's version to follow from.
        other = lancedb.connect(str(tmp_path)).open_table("m")
        other.add(to_arrow(store.schema, [(late, unit(9), None)]))
        return read_keys()

    store.read_keys = read_keys_after_a_commits  # type: ignore[method-assign]
    b = Repository(store, follow_interval=60.0)
    b.open()
    try:
        assert b.get(late.id) is None  # not in the rows b loaded
        await b.catch_up()
        got = b.get(late.id)
        assert got is not None and got.text == late.text
    finally:
        a.close()
        b.close()


async def test_a_round_that_brings_rows_is_one_follow_span_and_an_empty_look_none(
    pair: tuple[Repository, Repository],
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from memoryd.core import tracing

    a, b = pair
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider.get_tracer("memoryd"))
    try:
        await a.add(mem(1, text="the user keeps bees"), unit(1))
        await a.add(mem(2, text="the user rides a bike"), unit(2))
        await b.catch_up()
        await b.catch_up()  # nothing new: no span
    finally:
        tracing.install(None)
    spans = [s for s in exporter.get_finished_spans() if s.name == "memoryd.follow"]
    assert len(spans) == 1, [s.name for s in exporter.get_finished_spans()]
    attrs = spans[0].attributes or {}
    assert attrs["memoryd.rows"] == 2 and attrs["memoryd.versions"] >= 1
    assert spans[0].parent is None  # a root span: no RPC around it
