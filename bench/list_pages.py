"""A List page for one agent with many memories, in process (the hot index, no RPC).

Fills a ``HotIndex`` with ``--rows`` memories of one agent (plus a shared scope it reads,
a tenth of that size), random creation times, every category, a few expired, then times
``HotIndex.page`` (what ListMemories runs): the first page, pages at 50% and 99% of the
listing (keyset: after the key of the row before), oldest first, and with a category
filter; and, for comparison, what List did before paging moved into the index (every
visible memory sorted, then scanned for the token's position) for the first and the
middle page. Median and p90 of single calls in milliseconds.

    python bench/list_pages.py                      # 100k memories, page size 50
    python bench/list_pages.py --rows 2000 --repeat 5   # a quick check that it runs
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import harness
import numpy as np

from memoryd.core.records import Category, Memory
from memoryd.storage.hot_index import HotIndex

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 384  # the built-in model's
SCOPES = ["agent:bench", "shared:bench"]


def build(rows: int, seed: int) -> HotIndex:
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed).standard_normal((1024, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = HotIndex(DIM)
    categories = list(Category)[1:]
    total = rows + rows // 10
    with index.bulk_load():  # as at start-up
        for i in range(total):
            scope = SCOPES[0] if i < rows else SCOPES[1]
            created = NOW - timedelta(seconds=rng.randrange(365 * 86400))
            m = Memory(
                id=f"00000000-0000-4000-8000-{i:012d}",
                agent_id="bench",
                scope=scope,
                text=f"memory {i}",
                summary="",
                category=rng.choice(categories),
                importance=0.5,
                created_at=created,
                updated_at=created,
                expires_at=NOW - timedelta(days=1) if rng.random() < 0.02 else None,
                content_hash=f"h{i}",
                language="en",
            )
            index.put(m, vectors[i % len(vectors)])
    return index


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def sorted_page(index: HotIndex, size: int, after: tuple[datetime, str] | None) -> list[Memory]:
    """List before keyset paging: sort every visible memory, scan for the token's row."""
    rows = index.visible(SCOPES, now=NOW)
    start = 0
    if after is not None:
        start = next((i for i, m in enumerate(rows) if (m.created_at, m.id) < after), len(rows))
    return rows[start : start + size]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000, help="memories of the agent")
    p.add_argument("--page-size", type=int, default=50)
    p.add_argument("--repeat", type=int, default=50, help="timed calls per case")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    started = time.perf_counter()
    index = build(args.rows, args.seed)
    harness.log(f"built {len(index)} rows in {time.perf_counter() - started:.1f}s")
    size = args.page_size
    everything = index.visible(SCOPES, now=NOW)
    total = len(everything)

    def key_at(fraction: float) -> tuple[datetime, str]:
        m = everything[min(int(fraction * total), total - 1)]
        return m.created_at, m.id

    # The keyset pages must be the sorted listing's pages: a check, not a timing.
    for at in (None, key_at(0.5), key_at(0.99)):
        got = index.page(SCOPES, now=NOW, limit=size, after=at).memories
        assert [m.id for m in got] == [m.id for m in sorted_page(index, size, at)], at

    middle, last = key_at(0.5), key_at(0.99)
    decisions = frozenset({Category.DECISION})
    cases: list[tuple[str, Callable[[], object]]] = [
        ("keyset: first page", lambda: index.page(SCOPES, now=NOW, limit=size)),
        ("keyset: page at 50%", lambda: index.page(SCOPES, now=NOW, limit=size, after=middle)),
        ("keyset: page at 99%", lambda: index.page(SCOPES, now=NOW, limit=size, after=last)),
        ("keyset: oldest first, first page",
         lambda: index.page(SCOPES, now=NOW, limit=size, oldest_first=True)),
        ("keyset: category DECISION, page at 50%",
         lambda: index.page(SCOPES, now=NOW, limit=size, after=middle, categories=decisions)),
        ("sort every row: first page", lambda: sorted_page(index, size, None)),
        ("sort every row: page at 50%", lambda: sorted_page(index, size, middle)),
    ]  # fmt: skip
    rows = []
    for name, fn in cases:
        repeat = args.repeat if name.startswith("keyset") else max(3, args.repeat // 10)
        p50, p90 = timed(fn, repeat)
        harness.log(f"{name}: p50 {p50:.3f} ms, p90 {p90:.3f} ms")
        rows.append([name, repeat, f"{p50:.3f}", f"{p90:.3f}"])
    harness.report(
        args,
        f"List page, {args.rows} memories in the agent's scope + {args.rows // 10} shared, "
        f"page size {size} (in process)",
        [harness.table(["case", "calls", "p50 ms", "p90 ms"], rows)],
    )


if __name__ == "__main__":
    main()
