"""Handing the heap's free pages back to the system.

glibc's malloc keeps the pages of freed chunks inside its arenas for the process's next
allocations; only the top of a heap is returned by itself. LanceDB (Rust, on the system
allocator) and the model's batches free large buffers at every commit, compaction and
load, between long-lived allocations (records, caches), so those pages stay resident
unless ``malloc_trim`` hands them back (it ``madvise``s every free page of every arena).
On the Store path nothing called it: a daemon that received 10k memories by Store kept
26-61 MiB of such pages (2.6-6.4 KB per memory; bench/store_rss.py, bench/RESULTS.md).
Elsewhere than glibc (musl, macOS) there is nothing to call.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Any


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL("libc.so.6")


def release_free_pages() -> bool:
    """``malloc_trim(0)``: True if glibc gave memory back. ctypes lets go of the GIL for the
    call, so other threads run meanwhile (it locks each arena while it walks it)."""
    with contextlib.suppress(OSError, AttributeError):
        return bool(_libc().malloc_trim(0))
    return False
