"""Micro-benchmark of the native kernels against their numpy twins.

Times one call of each kernel on synthetic data, warm (after ``warm_up``), single
threaded, and prints the median and 90th percentile in microseconds:

    topk_dot   exact top-k over n x dim float32 rows (n = 1k, 10k, 100k), all rows eligible;
               also against plain numpy (matmul + argpartition, no tie rule), the fast way
               to do it without numba (the twin sorts every score: it is a reference)
    topk_dot_q8  the same answer from int8 codes first (what the hot index runs from 4,096 rows)
    topk_scores  top-k of precomputed scores (the BM25 leg's, over the rows a query touches)
    mmr        MMR picking 5 of 20 candidates
    fuse       fusion + boosts over 40 candidates (default params, RRF)

    ./dev bench native/bench/kernels.py      (or python native/bench/kernels.py)
    ./dev bench native/bench/kernels.py --repeat 500 --budget 5 --sizes 1000,100000

numpy's BLAS gets one thread (the kernels are serial too, and the daemon shares two
cores with the embedder); set OPENBLAS_NUM_THREADS to compare against more. The machine
is shared: run it twice and expect 10-30 % noise between runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

# Before numpy loads: one BLAS thread, so the numpy twin is timed on the same footing
# as the serial kernels (and as the daemon runs it, beside the embedder).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from memoryd_native import kernels, reference, warm_up  # noqa: E402


def measure(fn: Callable[[], Any], repeat: int, budget_s: float) -> tuple[float, float]:
    """Median and p90 of single-call wall times in microseconds.

    Runs ``repeat`` times, or fewer (at least 5) if that would exceed ``budget_s``."""
    fn()  # first call outside the timings (caches, page faults)
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < repeat and (len(times) < 5 or time.perf_counter() < deadline):
        start = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - start) / 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def numpy_topk(matrix: np.ndarray, query: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    scores = np.where(mask, matrix @ query, -np.inf)
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="topk_dot row counts")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=20, help="top-k for topk_dot")
    parser.add_argument("--repeat", type=int, default=200, help="timed calls per case")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per case, at most")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)

    print(f"warm_up: {warm_up():.2f} s")
    # (name, numba kernel, numpy twin, fastest plain-numpy equivalent or None)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], Callable[[], Any] | None]] = []

    for n in (int(s) for s in args.sizes.split(",")):
        matrix = unit_rows(rng, n, args.dim)
        query = unit_rows(rng, 1, args.dim)[0]
        mask = np.ones(n, dtype=np.uint8)
        cases.append(
            (
                f"topk_dot n={n:,} d={args.dim} k={args.k}",
                partial(kernels.topk_dot, matrix, query, mask, args.k),
                partial(reference.topk_dot, matrix, query, mask, args.k),
                partial(numpy_topk, matrix, query, mask, args.k),
            )
        )
        cases.append(
            (
                f"topk_dot_q8 n={n:,} d={args.dim} k={args.k}",
                partial(
                    kernels.topk_dot_q8, matrix, *kernels.quantize_rows(matrix), query, mask, args.k
                ),
                partial(reference.topk_dot_q8, matrix, None, None, None, query, mask, args.k),
                None,
            )
        )

    # The lexical leg's top-k: BM25 scores of the rows holding a query term (~13,000 of
    # 100,000 for LoCoMo's questions), few distinct values, a tenth of the rows filtered.
    for n in (1_300, 13_000):
        bm25 = (rng.integers(1, 90, n) / 8).astype(np.float32)
        allowed = (rng.random(n) >= 0.1).astype(np.uint8)
        cases.append(
            (
                f"topk_scores n={n:,} k=60",
                partial(kernels.topk_scores, bm25, allowed, 60),
                partial(reference.topk_scores, bm25, allowed, 60),
                None,
            )
        )

    vectors = unit_rows(rng, 20, args.dim)
    scores = np.sort(rng.random(20).astype(np.float32))[::-1].copy()
    cases.append(
        (
            f"mmr_select 5 of 20 d={args.dim}",
            partial(kernels.mmr_select, vectors, scores, 5, 0.7),
            partial(reference.mmr_select, vectors, scores, 5, 0.7),
            None,
        )
    )

    n = 40
    ranks = rng.permutation(n).astype(np.int64)
    fuse_inputs = (
        rng.random(n).astype(np.float32),  # vec_score
        ranks,  # vec_rank
        (rng.random(n) * 12).astype(np.float32),  # bm25_score
        np.where(rng.random(n) < 0.3, -1, rng.permutation(n)).astype(np.int64),  # bm25_rank
        (rng.random(n) * 365).astype(np.float32),  # age_days
        rng.random(n).astype(np.float32),  # importance
        rng.integers(0, 20, n).astype(np.int64),  # access_count
        rng.integers(20, 3000, n).astype(np.int64),  # text_len
        kernels.make_params(),
    )

    def fuse(impl: Any) -> Any:
        stages = np.empty((n, kernels.N_STAGES), dtype=np.float32)
        keep = np.empty(n, dtype=np.uint8)
        return impl.fuse_and_boost(*fuse_inputs, stages, keep)

    cases.append((f"fuse_and_boost n={n}", partial(fuse, kernels), partial(fuse, reference), None))

    columns = ("numba p50", "numba p90", "twin p50", "twin p90", "plain p50", "vs twin")
    header = f"| {'case':<32} | " + " | ".join(f"{c:>9}" for c in columns) + " |"
    print("microseconds per call; plain = fastest plain-numpy equivalent; vs twin = twin/numba\n")
    print(header)
    print("|" + "|".join("-" * len(col) for col in header.split("|")[1:-1]) + "|")
    for name, fast, twin, plain in cases:
        fast_p50, fast_p90 = measure(fast, args.repeat, args.budget)
        twin_p50, twin_p90 = measure(twin, args.repeat, args.budget)
        plain_p50 = f"{measure(plain, args.repeat, args.budget)[0]:>9.1f}" if plain else f"{'-':>9}"
        print(
            f"| {name:<32} | {fast_p50:>9.1f} | {fast_p90:>9.1f} | {twin_p50:>9.1f} "
            f"| {twin_p90:>9.1f} | {plain_p50} | {twin_p50 / fast_p50:>8.1f}x |"
        )


if __name__ == "__main__":
    main()
