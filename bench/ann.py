"""Approximate (faiss HNSW + exact re-score) against exact vector search in the hot index.

Loads ``--rows`` clustered synthetic unit vectors into one scope of two hot indexes, one
exact only (``ann_threshold=0``) and one with an approximate index (``--threshold``),
builds the graph as the daemon does (one background thread), then runs the same
``--queries`` through ``HotIndex.search`` on both and prints a markdown table: latency
p50/p99 of each, recall@k of the approximate results against the exact ones, build time
and the memory of the graph next to that of the float32 matrix. A second pass repeats the
queries with a category filter that keeps half of the rows (the filter goes into the
graph walk as a bitmap).

    python bench/ann.py
    python bench/ann.py --rows 300000 --queries 200 --seed 0

The data: ``rows / 200`` random unit centres, each row a centre plus Gaussian noise of
norm ``--noise`` (1.0: same-cluster cosine ~0.5, a row's nearest neighbour ~0.6), queries
drawn the same way. Real sentence embeddings are clustered like this, not uniform; uniform
random vectors are the worst case for every graph index. numpy's BLAS gets one thread,
as the daemon's kernels are serial. The machine is shared: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from memoryd_native import warm_up  # noqa: E402

from memoryd.core.records import Category, Memory  # noqa: E402
from memoryd.storage.ann import AnnSettings  # noqa: E402
from memoryd.storage.hot_index import HotIndex  # noqa: E402

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = "agent:bench"


def clustered(rng: np.random.Generator, centres: np.ndarray, n: int, noise: float) -> np.ndarray:
    dim = centres.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 50_000):  # in slices: the temporaries stay small
        m = min(n, start + 50_000) - start
        x = centres[rng.integers(0, len(centres), m)]
        x += noise * rng.standard_normal((m, dim)).astype(np.float32) / np.sqrt(dim)
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def percentile_ms(times: list[float], q: float) -> float:
    return float(np.percentile(np.array(times) * 1e3, q))


def run_queries(
    index: HotIndex, queries: np.ndarray, k: int, categories: frozenset[Category]
) -> tuple[list[list[str]], list[float]]:
    results, times = [], []
    for q in queries:
        start = time.perf_counter()
        hits = index.search(q, [SCOPE], k, now=NOW, categories=categories)
        times.append(time.perf_counter() - start)
        results.append([m.id for m, _ in hits])
    return results, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--noise", type=float, default=1.0, help="noise norm around a centre")
    parser.add_argument("--threshold", type=int, default=200_000, help="ann_threshold")
    parser.add_argument(
        "--ef-search", type=int, default=AnnSettings.ef_search, help="ann_ef_search"
    )
    parser.add_argument("--build-threads", type=int, default=1, help="ann_build_threads")
    parser.add_argument(
        "--vectors",
        type=Path,
        help="real embeddings instead of synthetic ones: a float32 [n, dim] .npy (e.g. the "
        "corpus peers.py embeds), its first --rows rows",
    )
    parser.add_argument(
        "--query-vectors", type=Path, help="with --vectors: the queries' [n, dim] .npy"
    )
    args = parser.parse_args()
    if args.rows < args.threshold:
        parser.error(f"--rows {args.rows} is below --threshold {args.threshold}: nothing to time")

    rng = np.random.default_rng(args.seed)
    if args.vectors:
        if not args.query_vectors:
            parser.error("--vectors needs --query-vectors")
        vectors = np.ascontiguousarray(np.load(args.vectors, mmap_mode="r")[: args.rows])
        queries = np.ascontiguousarray(np.load(args.query_vectors)[: args.queries])
        args.rows, args.queries, args.dim = len(vectors), len(queries), vectors.shape[1]
        data = f"real embeddings from {args.vectors.name}"
    else:
        centres = rng.standard_normal((max(16, args.rows // 200), args.dim)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        vectors = clustered(rng, centres, args.rows, args.noise)
        queries = clustered(rng, centres, args.queries, args.noise)
        data = f"clustered, noise {args.noise}"
    warm_up()

    exact = HotIndex(args.dim, ann_threshold=0)
    approx = HotIndex(
        args.dim,
        ann_threshold=args.threshold,
        ann_ef_search=args.ef_search,
        ann_build_threads=args.build_threads,
    )
    start = time.perf_counter()
    for i, v in enumerate(vectors):
        m = Memory(
            id=f"m{i:09d}",
            agent_id="bench",
            scope=SCOPE,
            text="",
            summary="",
            category=Category.FACT if i % 2 else Category.DECISION,
            importance=0.5,
            created_at=NOW,
            updated_at=NOW,
        )
        exact.put(m, v)
        approx.put(replace(m), v)
    print(f"loaded {args.rows} rows twice in {time.perf_counter() - start:.1f} s", flush=True)

    start = time.perf_counter()
    approx.maintain_ann()
    if not approx.wait_for_ann():
        raise SystemExit("the build did not finish")
    build_s = time.perf_counter() - start
    (status,) = approx.ann_status()

    rows = []
    filters = {"all rows": frozenset(), "category filter (1/2)": frozenset({Category.FACT})}
    for label, cats in filters.items():
        truth, t_exact = run_queries(exact, queries, args.k, cats)
        before = approx.ann_status()[0]
        found, t_ann = run_queries(approx, queries, args.k, cats)
        after = approx.ann_status()[0]
        per_query = [len(set(a) & set(e)) / len(e) for a, e in zip(found, truth, strict=True)]
        rows.append(
            (
                label,
                t_exact,
                t_ann,
                float(np.mean(per_query)),
                float(np.min(per_query)),
                after.searches - before.searches,
                after.fallbacks - before.fallbacks,
            )
        )

    matrix_mb = args.rows * args.dim * 4 / 2**20
    graph_mb = status.nbytes / 2**20
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print()
    print(
        f"### Hot index: approximate vs exact search, {args.rows:,} x {args.dim} "
        f"({data}), k={args.k}"
    )
    print()
    print(
        f"`python bench/ann.py --rows {args.rows} --queries {args.queries} --seed {args.seed}"
        f" --threshold {args.threshold} --ef-search {args.ef_search}"
        f" --build-threads {args.build_threads}"
        + (f" --vectors {args.vectors} --query-vectors {args.query_vectors}" * bool(args.vectors))
        + f"`; {platform.machine()}, {os.cpu_count()} cores,"
        f" load average {load}"
    )
    print()
    print(
        "| queries | exact p50 ms | exact p99 ms | ANN p50 ms | ANN p99 ms "
        "| recall@k mean | recall@k min | answered by ANN | fell back |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, t_exact, t_ann, rec, rec_min, answered, fell_back in rows:
        print(
            f"| {label} | {percentile_ms(t_exact, 50):.2f} | {percentile_ms(t_exact, 99):.2f} "
            f"| {percentile_ms(t_ann, 50):.2f} | {percentile_ms(t_ann, 99):.2f} "
            f"| {rec:.3f} | {rec_min:.2f} | {answered}/{len(t_ann)} | {fell_back} |"
        )
    print()
    print(
        f"Build (HNSW M={AnnSettings.m}, efConstruction={AnnSettings.ef_construction}, "
        f"8-bit scalar quantiser, "
        f"{args.build_threads} thread): {build_s:.1f} s ({args.rows / build_s:,.0f} rows/s). "
        f"Memory: graph and label maps {graph_mb:,.0f} MiB ({status.nbytes / args.rows:.0f} B/row)"
        f" beside the float32 matrix's {matrix_mb:,.0f} MiB."
    )


if __name__ == "__main__":
    main()
