"""The embedding model alone, in this process: the packaged model (int8 weights computed in
fp32) against the daemon's int8 re-quantisation of it (``embedder.quantize``).

For each model: one short query's latency (p50 over ``--calls``), and texts per second when
``--texts`` synthetic memories (``corpus.memories``) are embedded in runs of each batch size
(one intra-op thread, as the daemon's workers use); then how close the int8 vectors are to
the fp32 ones (cosine per text). Run from the repository root:

    python bench/embedder.py [--threads 1] [--batches 1,4,8,16,32] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import corpus
import harness
import numpy as np

from memoryd.config import load_settings
from memoryd.inference.onnx_embedder import OnnxEmbedder, builtin_model_files
from memoryd.server import embedder_files


def per_text(model: OnnxEmbedder, texts: list[str], batch: int, rounds: int) -> float:
    """Texts per second, the median of ``rounds`` passes over ``texts`` in runs of ``batch``."""
    model.embed(texts[:batch])
    rates = []
    for _ in range(rounds):
        started = time.perf_counter()
        for i in range(0, len(texts), batch):
            model.embed(texts[i : i + batch])
        rates.append(len(texts) / (time.perf_counter() - started))
    return float(np.median(rates))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--threads", type=int, default=1, help="ONNX intra-op threads")
    p.add_argument("--batches", default="1,4,8,16,32")
    p.add_argument("--texts", type=int, default=128, help="memories embedded per pass")
    p.add_argument("--rounds", type=int, default=3, help="passes per batch size (median)")
    p.add_argument("--calls", type=int, default=100, help="single-query calls timed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    batches = [int(b) for b in args.batches.split(",") if b]

    int8 = embedder_files(load_settings(None, {"embedder": {"quantize": "int8"}}))
    models = {
        "packaged (fp32 compute)": OnnxEmbedder(
            builtin_model_files(), intra_op_threads=args.threads
        ),
        "int8 re-quantised (default)": OnnxEmbedder(int8, intra_op_threads=args.threads),
    }
    texts = corpus.take(corpus.memories(args.seed), args.texts)
    queries = corpus.take(corpus.queries(args.seed), args.calls)

    rows = []
    for name, model in models.items():
        harness.log(f"timing {name}")
        model.embed(queries[:1])
        latencies = []
        for q in queries:
            started = time.perf_counter()
            model.embed([q])
            latencies.append(time.perf_counter() - started)
        rates = [f"{per_text(model, texts, b, args.rounds):.0f}" for b in batches]
        rows.append([name, f"{1e3 * float(np.median(latencies)):.2f}", *rates])

    reference = models["packaged (fp32 compute)"].embed(texts)
    quantized = models["int8 re-quantised (default)"].embed(texts)
    cosine = np.sum(reference * quantized, axis=1)
    headers = ["model", "query p50 ms", *[f"texts/s, runs of {b}" for b in batches]]
    sections = [
        harness.table(headers, rows),
        f"int8 vs fp32 vectors of the same {len(texts)} memories: cosine min "
        f"{cosine.min():.4f}, mean {cosine.mean():.4f}; {args.threads} intra-op thread(s).",
    ]
    harness.report(args, "Embedding model", sections)


if __name__ == "__main__":
    main()
