"""Which embedder worker runs a query, and what it costs: the daemon's rule (a query runs
on worker 0 whenever it is free, ``BatchingEmbedder._takes``) against the rule before it
(whichever of the two workers the condition woke), in one process, on the daemon's model.

Two ``BatchingEmbedder`` of two workers each (four ONNX sessions of the daemon's model,
``embedder_files``: int8 MiniLM by default); the second one's ``_takes`` patched back to
"any worker takes any run". Queries go one at a time, as a gateway's turns come, the two
embedders alternating call by call (so load moves both alike), each query a distinct
LoCoMo question with token vectors (a Recall's miss). Between calls, ``--between`` ms of
work like a Recall's search: a pass over a ``--touch`` MiB int8 array (10k memories'
codes are 3.7 MiB) and a sleep for the rest. Per rule: the p50 of the call through the
embedder, of the model's own run timed in the worker, and the share of queries run on
worker 0. The model called directly, back to back, is given as the reference.

    ./dev bench query_worker.py [--calls 400] [--between 2] [--touch 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import harness
import locomo
import numpy as np
from model_gap import questions

from memoryd.config import load_settings
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.inference.onnx_embedder import OnnxEmbedder
from memoryd.server import embedder_files


class Timed:
    """One worker's model, recording its last run's seconds and which worker ran it."""

    def __init__(self, model: OnnxEmbedder, worker: int, log: list[tuple[int, float]]):
        self.model, self.worker, self.log = model, worker, log
        self.name, self.dim = model.name, model.dim

    def embed_full(self, texts: list[str], *, tokens: bool = True, started=None):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = self.model.embed_full(texts, tokens=tokens, started=started)
        self.log.append((self.worker, time.perf_counter() - t0))
        return out


def any_worker(self: BatchingEmbedder, worker: int) -> bool:
    """The rule before: any worker takes any run (the one the condition woke)."""
    return bool(self._docs) or bool(self._queries)


def embedder(files, settings, old: bool) -> tuple[BatchingEmbedder, list[tuple[int, float]]]:  # type: ignore[no-untyped-def]
    log: list[tuple[int, float]] = []
    made = iter(range(2))
    e = settings.embedder

    def factory() -> Timed:
        model = OnnxEmbedder(files, max_tokens=e.max_tokens, intra_op_threads=e.intra_op_threads)
        return Timed(model, next(made), log)

    batcher = BatchingEmbedder(factory, workers=2)
    if old:
        batcher._takes = any_worker.__get__(batcher)  # type: ignore[method-assign]
    batcher.start()
    return batcher, log


def search_like(codes: np.ndarray, seconds: float) -> None:
    end = time.perf_counter() + seconds
    int(codes.sum(dtype=np.int64))  # every byte read once, as an exact scan does
    left = end - time.perf_counter()
    if left > 0:
        time.sleep(left)


async def measure(args: argparse.Namespace) -> list[tuple[str, ...]]:
    settings = load_settings(None, {})
    files = embedder_files(settings)
    qs = questions(args.data, args.calls + args.warmup)
    codes = np.random.default_rng(0).integers(-127, 127, args.touch << 20, dtype=np.int8)
    rules = {"worker 0 when free (now)": embedder(files, settings, False)}
    rules["any worker (before)"] = embedder(files, settings, True)
    through: dict[str, list[float]] = {k: [] for k in rules}
    try:
        for i, q in enumerate(qs):
            for name, (batcher, log) in rules.items():
                search_like(codes, args.between / 1000.0)
                t0 = time.perf_counter()
                await batcher.embed_query_with_tokens(q)  # each embedder caches its own
                if i >= args.warmup:
                    through[name].append(time.perf_counter() - t0)
                elif i == args.warmup - 1:
                    log.clear()
    finally:
        for batcher, _ in rules.values():
            batcher.close()
    direct = OnnxEmbedder(
        files, max_tokens=settings.embedder.max_tokens,
        intra_op_threads=settings.embedder.intra_op_threads,
    )  # fmt: skip
    alone = []
    for q in qs[: args.warmup]:
        direct.embed_full([q], tokens=True)
    for q in qs[args.warmup :]:
        t0 = time.perf_counter()
        direct.embed_full([q], tokens=True)
        alone.append(time.perf_counter() - t0)
    rows = []
    for name, (_, log) in rules.items():
        model = [s for _, s in log]
        first = sum(1 for w, _ in log if w == 0) / max(1, len(log))
        rows.append((
            name, f"{1000 * statistics.median(through[name]):.3f}",
            f"{1000 * statistics.median(model):.3f}", f"{100 * first:.0f}%",
        ))  # fmt: skip
    rows.append(("the model alone, back to back", "", f"{1000 * statistics.median(alone):.3f}", ""))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--calls", type=int, default=400, help="timed queries per rule")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--between", type=float, default=2.0, help="ms of search-like work between")
    p.add_argument("--touch", type=int, default=4, help="MiB read between calls")
    p.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="LoCoMo's locomo10.json")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    rows = asyncio.run(measure(args))
    table = harness.table(
        ("rule", "through the embedder p50 ms", "the model in the worker p50 ms",
         "queries run by worker 0"),
        rows,
    )  # fmt: skip
    harness.report(
        args,
        "Which embedder worker runs a query (bench/query_worker.py)",
        [
            f"{args.calls} distinct LoCoMo questions per rule, one at a time, the rules "
            f"alternating call by call; {args.between:g} ms between calls, reading "
            f"{args.touch} MiB.",
            table,
        ],
    )


if __name__ == "__main__":
    main()
