"""How much a query's embedding costs when the model has been idle, and what the daemon's
hand-off to its embedder thread adds on top.

peers.py gives "the model alone" as the p50 of queries embedded back to back, and every
in-process peer embeds its next query right after its last search. The daemon's worker
runs the model once per Recall, with the client's turn, the transport and the search in
between. On this machine the same model call is slower after an idle gap, whether the
calling thread sleeps or spins through the gap (so it is the model's weights leaving the
shared caches, not the core going idle). This script measures, in this process, on the
daemon's model (``embedder_files``: the int8 MiniLM by default) with its token vectors,
as a Recall asks for them:

- the model called directly, with an idle gap of each ``--gaps`` (ms) before each call,
  the gap slept (``sleep``) or spun (``spin``);
- the same query through the daemon's ``BatchingEmbedder`` (``await
  embed_query_with_tokens``: the hand-off to a worker thread and back), same gaps, and
  the part of it the worker spent in the model, so hand-off = through - model in worker;
- with ``--read-mib``, each gap also reads that many MiB of other memory first (a moving
  window over a 64 MiB array), as a Recall's search, transport and client do between two
  model runs in the daemon: what the model pays when its weights have left the caches.

Each cell is the p50 over ``--calls`` distinct LoCoMo questions (a cache miss each); the
kinds alternate call by call so that load moves them together. Run from the repository root:

    ./dev bench model_gap.py [--gaps 0,2,5,20] [--read-mib 0,4,32] [--calls 300]
                             [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

import harness
import locomo
import numpy as np

from memoryd.config import load_settings
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.inference.onnx_embedder import OnnxEmbedder
from memoryd.server import embedder_files


def questions(path: Path, n: int) -> list[str]:
    data = json.loads(path.read_text())
    qs = list(dict.fromkeys(qa["question"] for conv in data for qa in conv["qa"]))
    if len(qs) < n:
        raise SystemExit(f"{path} has {len(qs)} distinct questions; --calls {n} asks for more")
    return qs


def idle(seconds: float, how: str) -> None:
    if seconds <= 0:
        return
    if how == "sleep":
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Timed:
    """The daemon's model, recording how long each call took in the worker thread."""

    def __init__(self, model: OnnxEmbedder):
        self.model = model
        self.name, self.dim = model.name, model.dim
        self.last = 0.0

    def embed_full(self, texts: list[str], *, tokens: bool = True, started=None):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = self.model.embed_full(texts, tokens=tokens, started=started)
        self.last = time.perf_counter() - t0
        return out


async def measure(args: argparse.Namespace) -> list[tuple[str, ...]]:
    settings = load_settings(None, {})
    files = embedder_files(settings)
    threads = settings.embedder.intra_op_threads
    # One session for both ways (its calls never overlap: the direct ones run while the
    # worker waits), so that neither evicts the other's weights.
    direct = OnnxEmbedder(files, max_tokens=settings.embedder.max_tokens, intra_op_threads=threads)
    timed = Timed(direct)
    # No query cache: each call through it runs the model on the question as asked (an
    # earlier version made the texts distinct with a suffix, which doubled their tokens)
    batcher = BatchingEmbedder(lambda: timed, workers=1, cache_size=0)
    batcher.start()
    gaps = [float(g) for g in args.gaps.split(",") if g]
    reads = [float(r) for r in args.read_mib.split(",") if r]
    other = np.ones(64 * 2**20 // 8)  # what the gap reads: 64 MiB, twice the L3 here
    at = 0

    def read(mib: float) -> None:
        nonlocal at
        n = int(mib * 2**20) // 8
        if n <= 0:
            return
        if at + n > len(other):
            at = 0
        other[at : at + n].sum()
        at += n

    qs = questions(args.data, args.calls)
    rows = []
    try:
        for gap, mib in [(g, r) for g in gaps for r in reads]:
            cells: dict[str, list[float]] = {
                "sleep": [], "spin": [], "through": [], "worker": []
            }  # fmt: skip
            for i in range(args.warmup + args.calls):
                q = qs[i % len(qs)]
                for how in ("sleep", "spin"):
                    read(mib)
                    idle(gap / 1000.0, how)
                    t = time.perf_counter()
                    direct.embed_full([q], tokens=True)
                    if i >= args.warmup:
                        cells[how].append(time.perf_counter() - t)
                read(mib)
                await asyncio.sleep(gap / 1000.0)
                t = time.perf_counter()
                await batcher.embed_query_with_tokens(q)
                if i >= args.warmup:
                    cells["through"].append(time.perf_counter() - t)
                    cells["worker"].append(timed.last)
            p50 = {k: 1000.0 * statistics.median(v) for k, v in cells.items()}
            pairs = zip(cells["through"], cells["worker"], strict=True)
            hand_off = [1000.0 * (a - b) for a, b in pairs]
            rows.append((
                f"{gap:g}", f"{mib:g}", f"{p50['sleep']:.3f}", f"{p50['spin']:.3f}",
                f"{p50['through']:.3f}", f"{p50['worker']:.3f}",
                f"{statistics.median(hand_off):.3f}",
            ))  # fmt: skip
    finally:
        batcher.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--gaps", default="0,2,5,20", help="idle ms before each call, comma list")
    p.add_argument(
        "--read-mib", default="0", help="MiB of other memory read in each gap, comma list"
    )
    p.add_argument("--calls", type=int, default=300, help="timed calls per gap and kind")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="LoCoMo's locomo10.json")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    rows = asyncio.run(measure(args))
    table = harness.table(
        ("idle gap ms", "MiB read in the gap", "model p50 ms, gap slept", "model p50 ms, gap spun",
         "through the batcher p50 ms", "of which the model in the worker p50 ms",
         "hand-off p50 ms (through - model, per call)"),
        rows,
    )  # fmt: skip
    harness.report(args, "A query's embedding after an idle gap (bench/model_gap.py)", [table])


if __name__ == "__main__":
    main()
