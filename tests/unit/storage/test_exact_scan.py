"""The hot index's exact scan (int8 codes first, then the float16 rows it keeps): after
inserts, vector updates and swap-deletes its answers are exactly those of a plain float32
scan over the vectors the index should hold, as float16 holds them; and their scores are
within float16's rounding of the float32 vectors' own."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import numpy as np
import pytest

from memoryd.core.records import Category, Memory
from memoryd.storage.hot_index import HotIndex

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 64


def mem(i: int, category: Category = Category.FACT) -> Memory:
    return Memory(
        id=f"m{i:06d}",
        agent_id="a",
        scope="agent:a",
        text=f"text {i}",
        summary="",
        category=category,
        importance=0.5,
        created_at=NOW,
        updated_at=NOW,
    )


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    centres = rng.standard_normal((8, DIM)).astype(np.float32)
    x = centres[rng.integers(0, 8, n)] + 0.7 * rng.standard_normal((n, DIM)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize(("seed", "bulk"), [(0, False), (1, False), (2, True)])
def test_scan_matches_float32_reference_after_updates_and_deletes(seed: int, bulk: bool) -> None:
    # bulk: the first rows arrive as at start-up (codes made in one pass at the end)
    rng = np.random.default_rng(seed)
    n = 4096 + 600
    index = HotIndex(DIM, ann_threshold=0)
    truth: dict[str, tuple[np.ndarray, Category]] = {}
    vectors = unit(rng, n)
    with index.bulk_load() if bulk else contextlib.nullcontext():
        for i in range(n):
            category = Category.FACT if i % 3 else Category.PREFERENCE
            index.put(mem(i, category), vectors[i])
            truth[f"m{i:06d}"] = (vectors[i], category)
        if bulk:  # a search while the codes are stale still gets the exact answer
            q = vectors[7]
            assert index.search(q, ["agent:a"], 1, now=NOW)[0][0].id == "m000007"
    fresh = unit(rng, 300)
    for j, i in enumerate(rng.choice(n, 300, replace=False)):  # new vectors for old rows
        memory_id = f"m{int(i):06d}"
        index.put(mem(int(i), truth[memory_id][1]), fresh[j])
        truth[memory_id] = (fresh[j], truth[memory_id][1])
    for i in rng.choice(n, 500, replace=False):  # swap-deletes move rows (and their codes)
        index.remove(f"m{int(i):06d}")
        del truth[f"m{int(i):06d}"]
    ids = sorted(truth)
    exact = np.stack([truth[i][0] for i in ids])
    matrix = exact.astype(np.float16).astype(np.float32)  # what the index keeps
    for categories in (frozenset(), frozenset({Category.PREFERENCE})):
        for q in unit(rng, 20):
            got = index.search(q, ["agent:a"], 15, now=NOW, categories=categories)
            allowed = [not categories or truth[i][1] in categories for i in ids]
            scores = np.where(allowed, matrix @ q, -np.inf)
            want = [ids[r] for r in np.argsort(-scores, kind="stable")[:15]]
            assert [m.id for m, _ in got] == want
            at = [ids.index(w) for w in want]
            np.testing.assert_allclose([s for _, s in got], scores[at], atol=1e-5)
            np.testing.assert_allclose([s for _, s in got], (exact @ q)[at], atol=2e-3)
