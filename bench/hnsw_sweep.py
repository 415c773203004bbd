"""HNSW graph settings against recall on real embeddings: faiss's IndexHNSWSQ (8-bit,
inner product, as ``memoryd/storage/ann.py`` builds it) over ``--vectors``, each query's
short list of ``--fetch`` labels re-scored exactly as the daemon does, and compared with
the exact top ``--k`` (over the vectors rounded to float16, as the hot index holds them).

Per M / efConstruction (``--configs``) and efSearch (``--ef``): recall@k mean and min, the
number of queries under half, the build seconds (one thread) and the search ms per query.
The inputs are float32 ``[n, dim]`` .npy files, e.g. the corpus and question embeddings
``bench/peers.py`` keeps in ``bench/out/peers-vectors-*.npy`` (the 100k corpus: LoCoMo's
turns, then synthetic memories; LoCoMo's 1,536 questions). Run from the repository root:

    ./dev bench hnsw_sweep.py --vectors V.npy --query-vectors Q.npy [--configs 16:64,32:200] \\
        [--ef 128,256,512] [--queries 500]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import faiss  # noqa: E402
import harness  # noqa: E402
import numpy as np  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--vectors", type=Path, required=True)
    p.add_argument("--query-vectors", type=Path, required=True)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--configs", default="16:64,16:200,24:128,32:100,32:200,48:128", help="M:efC")
    p.add_argument("--ef", default="128,256,512")
    p.add_argument("--fetch", type=int, default=64, help="labels asked of the graph (daemon: 64)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    faiss.omp_set_num_threads(1)
    v = np.ascontiguousarray(np.load(args.vectors, mmap_mode="r")[: args.rows], np.float32)
    q = np.ascontiguousarray(np.load(args.query_vectors)[: args.queries], np.float32)
    scores = q @ v.astype(np.float16).astype(np.float32).T
    truth = np.argsort(-scores, axis=1)[:, : args.k]
    rows = []
    for spec in args.configs.split(","):
        m, efc = (int(x) for x in spec.split(":"))
        index = faiss.IndexHNSWSQ(v.shape[1], faiss.ScalarQuantizer.QT_8bit, m,
                                  faiss.METRIC_INNER_PRODUCT)  # fmt: skip
        index.hnsw.efConstruction = efc
        started = time.perf_counter()
        index.train(v[:: max(1, len(v) // 10_000)])
        index.add(v)
        build = time.perf_counter() - started
        for ef in (int(x) for x in args.ef.split(",")):
            index.hnsw.efSearch = max(ef, args.fetch)
            started = time.perf_counter()
            _, found = index.search(q, args.fetch)
            ms = (time.perf_counter() - started) / len(q) * 1000
            recalls = []
            for i, labels in enumerate(found):
                labels = labels[labels >= 0]
                top = labels[np.argsort(-scores[i, labels])[: args.k]]
                recalls.append(len(set(top.tolist()) & set(truth[i].tolist())) / args.k)
            r = np.array(recalls)
            rows.append((m, efc, ef, f"{r.mean():.3f}", f"{r.min():.2f}", int((r < 0.5).sum()),
                         f"{build:.1f}", f"{ms:.2f}"))  # fmt: skip
            harness.log(f"M {m} efC {efc} ef {ef}: recall {r.mean():.3f}")
    table = harness.table(
        ("M", "efConstruction", "efSearch", f"recall@{args.k} mean", "min", "queries under 0.5",
         "build s", "search ms/query"),
        rows,
    )  # fmt: skip
    harness.report(
        args,
        f"HNSW settings against recall, {len(v):,} real vectors, {len(q)} queries",
        [table],
    )


if __name__ == "__main__":
    main()
