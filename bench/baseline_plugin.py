"""memoryd Recall against the plugin path agents use today, on the same rows.

The plugin path, in this process: embed the query with the same ONNX model as the daemon
(``OnnxEmbedder(embedder_files(settings), intra_op_threads=1)``: the same ``MEMORYD_*``
settings, so the same int8 model by default), then a LanceDB flat search
``table.search(v).distance_type("cosine").where("agent_id = '...'", prefilter=True)
.limit(k)`` on a table that holds the same rows (bulk-added in one ``create_table``, with
an ``agent_id`` column). memoryd: ``Recall`` over gRPC with the sync client, every query
distinct (its embedding cache never hits).

For each size of ``--sizes`` (cumulative, one agent), the texts are stored in the daemon
through concurrent Stream stores (the daemon embeds them), then the plugin table is made
from exactly the rows the daemon acknowledged: with ``--rows-from daemon`` (default when
this script started the daemon) their vectors are read from the daemon's own LanceDB
table, with ``--rows-from embed`` they are embedded here. Queries then alternate between
the two paths, one at a time, so both see the same machine noise.

``top-k overlap`` is the share of memoryd's top k that the plugin also returns. memoryd
ranks with its configured pipeline (hybrid vector + BM25 fusion and boosts), so the
overlap is well under 1; with ``--fusion vector`` it ranks by cosine alone, like the
plugin, on the same vectors, and the overlap must be ~1.0 (a check that both paths
answer the same question).

    python bench/baseline_plugin.py                          # 1,000 and 10,000 rows
    python bench/baseline_plugin.py --sizes 1000,10000,100000  # 100k: long load, see README
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import corpus
import harness
import lancedb
import numpy as np
import pyarrow as pa
from memoryd_client import MemoryClient

from memoryd.config import load_settings
from memoryd.inference.onnx_embedder import OnnxEmbedder
from memoryd.server import embedder_files

HEADERS = (
    "rows", "memoryd rows", "plugin p50 ms", "plugin p99 ms", "of which embed p50",
    "of which search p50", "memoryd p50 ms", "memoryd p99 ms", "plugin/memoryd p50",
    "plugin/memoryd p99", "top-k overlap", "queries",
)  # fmt: skip
LOAD_HEADERS = (
    "size", "stored now", "created", "duplicates", "errors", "stores/s", "plugin table rows",
)  # fmt: skip


def daemon_rows(daemon: harness.Daemon, agent: str, ids: set[str]) -> pa.Table:
    """The acknowledged rows of ``agent``, vectors included, from the daemon's table."""
    uri = os.environ.get("MEMORYD_STORAGE__URI") or str(daemon.data_dir / "lancedb")
    name = os.environ.get("MEMORYD_STORAGE__TABLE", "memories")
    table = lancedb.connect(uri).open_table(name)
    data = table.to_arrow().select(["id", "agent_id", "text", "vector"])
    keep = np.array([i in ids for i in data.column("id").to_pylist()])
    return data.filter(pa.array(keep))


def embedded_rows(embedder: OnnxEmbedder, acked: list[harness.Acked], batch: int = 64) -> pa.Table:
    vectors = np.concatenate(
        [
            embedder.embed([a.text for a in acked[i : i + batch]])
            for i in range(0, len(acked), batch)
        ]
    )
    dim = vectors.shape[1]
    return pa.table(
        {
            "id": [a.id for a in acked],
            "agent_id": [a.agent_id for a in acked],
            "text": [a.text for a in acked],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
        }
    )


def measure(
    args: argparse.Namespace,
    table: Any,
    embedder: OnnxEmbedder,
    client: MemoryClient,
    queries: list[str],
) -> dict[str, list[float]]:
    where = f"agent_id = '{args.agent}'"
    options = harness.VECTOR_ONLY if args.fusion == "vector" else None
    out: dict[str, list[float]] = {"plugin": [], "embed": [], "search": [], "memoryd": []}
    overlap: list[float] = []
    for n, q in enumerate(queries):
        t0 = time.perf_counter()
        vector = embedder.embed([q])[0]
        t1 = time.perf_counter()
        hits = (
            table.search(vector)
            .distance_type("cosine")
            .where(where, prefilter=True)
            .limit(args.k)
            .select(["id", "text", "_distance"])
            .to_list()
        )
        t2 = time.perf_counter()
        recalled = client.recall(args.agent, q, limit=args.k, options=options)
        t3 = time.perf_counter()
        if n < args.warmup:
            continue
        out["plugin"].append(t2 - t0)
        out["embed"].append(t1 - t0)
        out["search"].append(t2 - t1)
        out["memoryd"].append(t3 - t2)
        ours = {h.memory.id for h in recalled.results}
        overlap.append(len(ours & {h["id"] for h in hits}) / max(1, len(ours)))
    out["overlap"] = overlap
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1000,10000", help="comma-separated row counts")
    p.add_argument("--queries", type=int, default=300, help="timed queries per size")
    p.add_argument("--warmup", type=int, default=10, help="untimed queries per size")
    p.add_argument("--k", type=int, default=5, help="results per query (Recall limit)")
    p.add_argument("--agent", default="bench-plugin", help="the one agent of the rows")
    p.add_argument(
        "--fusion",
        choices=("daemon", "vector"),
        default="daemon",
        help="memoryd's ranking: its configured pipeline (hybrid, rerank, boosts), or cosine "
        "only (no rerank, boosts, decay, MMR), which must return the plugin's top k (overlap "
        "1.0)",
    )
    p.add_argument(
        "--rows-from",
        choices=("daemon", "embed"),
        help="vectors of the plugin table: read from the daemon's table, or embedded here "
        "(default daemon; embed with --address)",
    )
    harness.add_load_args(p)
    harness.add_common_args(p)
    args = p.parse_args()
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s})
    except ValueError:
        p.error("--sizes takes integers, e.g. 1000,10000")
    args.rows_from = args.rows_from or ("embed" if args.address else "daemon")
    if args.rows_from == "daemon" and args.address:
        p.error("--rows-from daemon needs the daemon this script starts (no --address)")

    texts = corpus.memories(args.seed)
    queries = corpus.queries(args.seed)
    embedder = OnnxEmbedder(embedder_files(load_settings(None, {})), intra_op_threads=1)
    lance_dir = Path(tempfile.mkdtemp(prefix="memoryd-bench-plugin-"))
    db = lancedb.connect(str(lance_dir))
    rows: list[list[object]] = []
    load_rows: list[list[object]] = []
    acked: list[harness.Acked] = []
    taken = 0
    try:
        with (
            harness.target_from_args(args) as target,
            MemoryClient(target.address, timeout=60.0, retries=0) as client,
        ):
            for size in sizes:
                batch = corpus.take(texts, size - taken)
                taken = size
                harness.log(f"storing {len(batch)} memories (to {size}) through Stream")
                loaded = harness.load(
                    args, target.address, [(args.agent, t) for t in batch], f"to {size}:"
                )
                acked += loaded.acked
                t0 = time.perf_counter()
                if args.rows_from == "daemon":
                    assert target.daemon is not None
                    data = daemon_rows(target.daemon, args.agent, {a.id for a in acked})
                else:
                    data = embedded_rows(embedder, list({a.id: a for a in acked}.values()))
                table = db.create_table(f"plugin_{size}", data)
                took = f"{time.perf_counter() - t0:.1f}"
                errors = dict(loaded.errors) or 0
                load_rows.append(
                    [size, len(batch), loaded.created, loaded.duplicates, errors,
                     f"{loaded.rate:.0f}", table.count_rows(), took]
                )  # fmt: skip
                harness.log(f"{size}: {args.warmup} + {args.queries} queries, alternating")
                m = measure(
                    args, table, embedder, client, corpus.take(queries, args.warmup + args.queries)
                )
                plug, ours = harness.summary_ms(m["plugin"]), harness.summary_ms(m["memoryd"])
                embed, search = harness.summary_ms(m["embed"]), harness.summary_ms(m["search"])
                ratio50, ratio99 = plug["p50"] / ours["p50"], plug["p99"] / ours["p99"]
                held = int(harness.stats(target.address, args.agent).total)
                if held != table.count_rows():
                    harness.log(
                        f"the daemon's agent holds {held} memories, the plugin table "
                        f"{table.count_rows()}: this row does not compare like with like "
                        "(a kept --data-dir from a run with bigger --sizes?)"
                    )
                rows.append(
                    [table.count_rows(), held, plug["p50"], plug["p99"], embed["p50"],
                     search["p50"], ours["p50"], ours["p99"], ratio50, ratio99,
                     float(np.mean(m["overlap"])), len(m["plugin"])]
                )  # fmt: skip
    finally:
        shutil.rmtree(lance_dir, ignore_errors=True)
    load_headers = [*LOAD_HEADERS, f"plugin table from {args.rows_from} s"]
    harness.report(
        args,
        "Plugin path (ONNX embed + LanceDB prefiltered search) vs memoryd Recall",
        [harness.table(HEADERS, rows), harness.table(load_headers, load_rows)],
    )


if __name__ == "__main__":
    main()
