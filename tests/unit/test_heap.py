"""The daemon's heap freeze (``server.freeze_heap``): memories dropped after a freeze are
still freed, and the sweeper's re-freeze waits until the heap has grown."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from memoryd.server import freeze_heap


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
