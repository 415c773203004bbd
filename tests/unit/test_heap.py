"""The daemon's heap freeze (``server.freeze_heap``, ``HeapFreezer``): memories dropped
after a freeze are still freed, the re-freeze waits until the heap has grown, and what a
freeze caught in flight is collected by the next one (and once a burst of writes ends)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.server import HeapFreezer, freeze_heap


class Record:  # stands in for a stored memory: plain, weak-referenceable
    def __init__(self, i: int) -> None:
        self.text = f"memory {i}"


@pytest.fixture(autouse=True)
def _unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_objects_dropped_after_a_freeze_are_still_freed() -> None:
    records = [Record(i) for i in range(1000)]
    refs = [weakref.ref(r) for r in records]
    assert freeze_heap()
    del records
    assert all(r() is None for r in refs)  # reference counting, no collection needed


def test_the_sweeper_refreezes_only_once_the_heap_has_grown() -> None:
    freeze_heap()
    frozen = gc.get_freeze_count()
    assert not freeze_heap(unless_below=10**9)
    assert gc.get_freeze_count() == frozen
    kept = [[i] for i in range(max(frozen, 1000) + 1000)]  # lists: tracked by the GC
    gc.collect()  # they reach the oldest generation, as long-lived memories do
    assert freeze_heap(unless_below=1000)
    assert gc.get_freeze_count() >= frozen + len(kept)


class Cycle:  # a request in flight: it refers to itself (a future and its callback, say)
    def __init__(self) -> None:
        self.me = self
        self.payload = bytearray(1 << 16)  # what it keeps alive (a Store's token vectors)


def test_a_cycle_frozen_in_flight_is_freed_by_the_next_refreeze() -> None:
    in_flight = Cycle()
    ref = weakref.ref(in_flight)
    assert freeze_heap()
    del in_flight  # the request ends: only the cyclic GC could free it, and it is frozen
    gc.collect()
    assert ref() is not None
    kept = [[i] for i in range(max(gc.get_freeze_count(), 1000) + 1000)]
    gc.collect()
    assert freeze_heap(unless_below=1000)  # the heap grew: the re-freeze collects it
    assert ref() is None
    assert len(kept) > 1000


def test_the_freezer_collects_a_burst_once_its_writes_stop() -> None:
    writes = [0]
    compacting = [False]
    freezer = HeapFreezer(lambda: writes[0], lambda: compacting[0], min_objects=1000)
    gc.collect()
    freeze_heap()
    frozen = gc.get_freeze_count()
    writes[0] += 1  # a burst of Stores: one in flight when the heap has doubled
    in_flight = Cycle()
    ref = weakref.ref(in_flight)
    kept = [[i] for i in range(max(frozen, 1000) + 1000)]
    gc.collect()
    assert freezer.tick()  # re-freezes with the Store in flight
    del in_flight
    writes[0] += 1  # the burst goes on: no re-freeze (the heap has not doubled again)
    assert not freezer.tick()
    compacting[0] = True  # the writes have stopped, the compaction after them runs
    assert not freezer.tick()
    assert ref() is not None  # frozen garbage, as it was for good before
    compacting[0] = False
    assert freezer.tick()  # nothing written, nothing running since the last tick
    assert ref() is None
    assert not freezer.tick()  # once per burst
    assert len(kept) > 1000


def test_a_refreeze_during_writes_walks_only_what_they_made(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The loop stands still while a re-freeze walks: under a burst of Stores it walks the
    # objects made since the last freeze, not the whole heap; the walk after the burst
    # takes what the older frozen objects left (a cycle frozen in flight before).
    writes = [0]
    freezer = HeapFreezer(lambda: writes[0], min_objects=1000)
    in_flight = Cycle()
    ref = weakref.ref(in_flight)
    freeze_heap()
    del in_flight
    frozen = gc.get_freeze_count()
    kept = [[i] for i in range(max(frozen, 1000) + 1000)]
    gc.collect()
    writes[0] += 1
    with caplog.at_level(logging.INFO, logger="memoryd"):
        assert freezer.tick()
    (line,) = [r.getMessage() for r in caplog.records if "heap re-frozen" in r.getMessage()]
    walked = int(line.split(" walked")[0].rsplit(" ", 1)[1])
    assert len(kept) <= walked < len(kept) + frozen // 2, line
    assert ref() is not None  # not walked: still frozen
    assert freezer.tick()  # the writes have stopped: the full walk
    assert ref() is None


def test_under_a_steady_trickle_of_writes_the_full_walk_comes_within_settle_ticks() -> None:
    writes = [0]
    freezer = HeapFreezer(lambda: writes[0], min_objects=1000)
    freeze_heap()
    writes[0] += 1
    in_flight = Cycle()
    ref = weakref.ref(in_flight)
    kept = [[i] for i in range(max(gc.get_freeze_count(), 1000) + 1000)]
    gc.collect()
    assert freezer.tick()  # during the writes: freezes the Store in flight
    del in_flight
    for _ in range(HeapFreezer.SETTLE_TICKS - 1):
        writes[0] += 1  # never a quiet minute
        assert not freezer.tick()
    assert ref() is not None
    writes[0] += 1
    assert freezer.tick()  # the walk it owed, writes or not
    assert ref() is None
    writes[0] += 1
    assert not freezer.tick()  # and only once
    assert len(kept) > 1000


def test_what_a_small_burst_left_in_cycles_is_collected_once_it_ends() -> None:
    # A burst of writes that does not double the heap leaves cycles (a dropped LanceDB
    # session holding its caches): an idle daemon allocates nothing that would start a
    # collection, so without the freezer they stayed (~70 MiB at 100k Stores).
    writes = [0]
    freezer = HeapFreezer(lambda: writes[0], min_objects=1000)
    enabled = gc.isenabled()
    gc.disable()  # no automatic collection may take the cycle before the freezer does
    try:
        freeze_heap()
        frozen = gc.get_freeze_count()
        writes[0] += 1
        kept, session = [Record(i) for i in range(100)], Cycle()  # kept: the burst's memories
        ref = weakref.ref(session)
        del session
        assert not freezer.tick()  # the writes go on: nothing walked
        assert ref() is not None
        assert freezer.tick()  # the first quiet tick
        assert ref() is None
        assert frozen < gc.get_freeze_count() < 2 * frozen  # the burst's objects, no more
        assert not freezer.tick()  # once per burst
    finally:
        if enabled:
            gc.enable()
    assert len(kept) == 100


def test_a_refreeze_at_a_quiet_time_needs_no_second() -> None:
    freezer = HeapFreezer(lambda: 0, min_objects=1000)
    freeze_heap()
    kept = [[i] for i in range(max(gc.get_freeze_count(), 1000) + 1000)]
    gc.collect()
    assert freezer.tick()
    assert not freezer.tick()
    assert len(kept) > 1000


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc")
def test_a_refreeze_gives_the_memory_it_freed_back_to_the_system() -> None:
    # Frozen garbage whose native buffers sit between live allocations (as LanceDB's
    # caches sit among the records): glibc keeps their pages once freed unless trimmed.
    freezer = HeapFreezer(lambda: 0, min_objects=1000)
    freeze_heap()
    in_flight, live = [], []
    for _ in range(2000):
        in_flight.append(Cycle())
        live.append(bytearray(700))  # a live chunk after each: no free top to shrink
    freed = 2000 * len(in_flight[0].payload)
    freeze_heap()
    in_flight.clear()  # the calls end, their cycles frozen
    before = _resident_bytes()
    kept = [[i] for i in range(max(gc.get_freeze_count(), 1000) + 1000)]
    gc.collect()
    assert asyncio.run(freezer.run())  # the heap grew: re-freeze, collect, hand back
    assert before - _resident_bytes() > freed // 2
    assert len(live) == 2000 and len(kept) > 1000
