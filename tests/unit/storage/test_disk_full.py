"""A full disk: recognised in one place, answered StorageFull, reported, recovered from."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

import pytest
from memoryd_testing.records import record, row

from memoryd.core.errors import StorageFull
from memoryd.storage.lance_store import SPACE_FREED_BYTES, LanceStore, no_space

# What lancedb raised when a 3 MiB tmpfs filled up (Table.add; delete and merge_insert
# say the same through another Rust source path).
LANCE_ENOSPC = (
    "lance error: LanceError(IO): No space left on device (os error 28), "
    "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-file-13.0.0/src/"
    "writer/structural.rs:258:9"
)


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError(LANCE_ENOSPC),
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        RuntimeError("Generic LocalFileSystem error: Unable to copy data to file: os error 28"),
    ],
)
def test_a_full_disk_is_recognised(error: BaseException) -> None:
    assert no_space(error)


@pytest.mark.parametrize(
    "error", [RuntimeError("lance error: commit conflict"), OSError(errno.EACCES, "denied")]
)
def test_other_failures_are_not_a_full_disk(error: BaseException) -> None:
    assert not no_space(error)


async def test_a_full_disk_refuses_writes_keeps_data_and_recovers(tmp_path: Path) -> None:
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    real_add = store._table.add
    full = True

    def add(data: Any, *args: Any, **kw: Any) -> Any:
        if full:
            raise RuntimeError(LANCE_ENOSPC)
        return real_add(data, *args, **kw)

    store._table.add = add
    store.start()
    try:
        full = False
        await store.add([row(1)])
        full = True
        with pytest.raises(StorageFull, match="no space left on device") as caught:
            await store.add([row(2)])
        assert "nothing was written" in str(caught.value)
        assert store.status().startswith("no space left on device")
        full = False
        await store.add([row(3)])  # space is back: the next write succeeds ...
        assert store.status() == "ok"  # ... and the fault is cleared
    finally:
        store.close()
    reopened = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    assert sorted(m.id for m, _, _ in reopened.scan()) == [record(1).id, record(3).id]


async def test_the_fault_clears_while_idle_once_space_is_freed(tmp_path: Path) -> None:
    """No write needs to come along: the idle writer watches the free space, and a little
    more room than at the failure (what the failed commit left) is not enough."""
    store = LanceStore(str(tmp_path), table="m", model_name="x", dim=8)
    store._table.add = lambda *a, **k: (_ for _ in ()).throw(RuntimeError(LANCE_ENOSPC))
    free = [300 << 10]
    store._free_bytes = lambda: free[0]  # type: ignore[method-assign]
    store.start()
    try:
        with pytest.raises(StorageFull):
            await store.add([row(1)])
        free[0] += 2 << 20
        await asyncio.sleep(2.5)  # two idle probes
        assert store.status() != "ok"
        free[0] += SPACE_FREED_BYTES
        for _ in range(50):  # the writer probes after each idle second
            if store.status() == "ok":
                break
            await asyncio.sleep(0.1)
        assert store.status() == "ok"
    finally:
        store.close()
