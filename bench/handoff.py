"""The embedder's hand-off, split in two: from a query's submission to its model run
starting on a worker thread (the wake-up of the worker, and of any other worker that
looks), and from the run's end to the caller resuming on the event loop.

In this process, on the daemon's model and its ``BatchingEmbedder`` with ``--workers``
threads (the daemon's default is 2), one cache-miss query at a time (distinct LoCoMo
questions, a 2 ms idle gap before each, as between a gateway's turns); prints the p50 of
each part. Compare another checkout by running it with that tree first on PYTHONPATH.

    ./dev bench handoff.py [--calls 300] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import locomo
import model_gap

from memoryd.config import load_settings
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.inference.onnx_embedder import OnnxEmbedder
from memoryd.server import embedder_files


class Stamped:
    """The daemon's model, noting when each run started and ended."""

    def __init__(self, model: OnnxEmbedder):
        self.model, self.name, self.dim = model, model.name, model.dim
        self.start = self.end = 0.0

    def embed_full(self, texts: list[str], *, tokens: bool = True, started=None):  # type: ignore[no-untyped-def]
        self.start = time.perf_counter()
        out = self.model.embed_full(texts, tokens=tokens, started=started)
        self.end = time.perf_counter()
        return out


async def measure(calls: int, workers: int, data: Path) -> tuple[float, float]:
    settings = load_settings(None, {})
    e = settings.embedder
    models = [
        Stamped(OnnxEmbedder(embedder_files(settings), max_tokens=e.max_tokens,
                             intra_op_threads=e.intra_op_threads))
        for _ in range(workers)
    ]  # fmt: skip
    made = iter(models)
    batcher = BatchingEmbedder(lambda: next(made), workers=workers)
    batcher.start()
    questions = model_gap.questions(data, calls)
    there, back = [], []
    try:
        for i in range(calls + 20):
            await asyncio.sleep(0.002)
            submitted = time.perf_counter()
            await batcher.embed_query_with_tokens(f"{questions[i % len(questions)]} ({i})")
            resumed = time.perf_counter()
            ran = max(models, key=lambda m: m.end)  # the worker that ran it
            if i >= 20:
                there.append(1000.0 * (ran.start - submitted))
                back.append(1000.0 * (resumed - ran.end))
    finally:
        batcher.close()
    return statistics.median(there), statistics.median(back)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300, help="timed queries")
    p.add_argument("--workers", type=int, default=2, help="embedder worker threads")
    p.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="LoCoMo's locomo10.json")
    args = p.parse_args()
    there, back = asyncio.run(measure(args.calls, args.workers, args.data))
    print(
        f"{args.workers} workers, {args.calls} queries: submitted -> model run starts p50 "
        f"{there:.3f} ms; model run ends -> caller resumes p50 {back:.3f} ms"
    )


if __name__ == "__main__":
    main()
