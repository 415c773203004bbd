"""What the embedding model keeps of the heap after a long mix of Stores' batches and queries.

One process per variant (a clean heap each): the daemon's embedder (its default model and
settings) embeds ``--texts`` memories (LoCoMo turns, then ``corpus.py`` memories, as
``peers.py`` and ``store_rss.py`` store them) in batches of 1-32 texts drawn at random, with
a short query (``corpus.queries``) after half of the batches, as a daemon taking Stores and
Recalls does. glibc's bytes in use (``mallinfo2``, after ``malloc_trim``) are read after the
warm-up and then every ``--every`` texts: what a variant keeps varies with the moment it is
read (an arena's regions come and go), so the table gives the median and the largest of
those readings. Variants:

- ``shipped``: the embedder as memoryd builds it (no ONNX Runtime CPU arena);
- ``arena``: the same with ONNX Runtime's CPU arena on, handing back a run's regions after
  runs of over 64 token slots (batch x padded width), as memoryd did before 2026-12-02.

Bytes, not timings (the seconds are printed for orientation only). Run from the repository
root:

    ./dev bench model_heap.py --texts 12000
"""

from __future__ import annotations

import argparse
import ctypes
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import corpus
import harness
from store_rss import mallinfo

VARIANTS = ("shipped", "arena")


def heap_in_use() -> int:
    """glibc's bytes in use after ``malloc_trim(0)``."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    info = mallinfo()
    return info.get("uordblks", 0) + info.get("hblkhd", 0)


def with_arena(model: Any) -> None:
    """Swap the session for one with the CPU arena on, shrunk after runs over 64 slots."""
    import onnxruntime as ort

    old = model._session.get_session_options()
    options = ort.SessionOptions()
    options.intra_op_num_threads = old.intra_op_num_threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = True
    session = ort.InferenceSession(
        str(model.files.model), sess_options=options, providers=["CPUExecutionProvider"]
    )
    shrink = ort.RunOptions()
    shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    class Shrinking:
        def __getattr__(self, name: str) -> Any:
            return getattr(session, name)

        def run(self, outputs: Any, feeds: dict[str, Any], options: Any = None) -> Any:
            large = feeds["input_ids"].size > 64
            return session.run(outputs, feeds, shrink if large else options)

    model._session = Shrinking()


def measure(variant: str, texts: int, every: int, seed: int) -> dict[str, Any]:
    from memoryd.config import load_settings
    from memoryd.inference.onnx_embedder import OnnxEmbedder
    from memoryd.server import embedder_files

    settings = load_settings()
    e = settings.embedder
    model = OnnxEmbedder(
        embedder_files(settings), max_tokens=e.max_tokens, intra_op_threads=e.intra_op_threads
    )
    if variant == "arena":
        with_arena(model)
    arena = bool(model._session.get_session_options().enable_cpu_mem_arena)
    import locomo
    import peers

    data = peers.default_data()
    turns = peers.locomo_turn_texts(locomo.load(data, None)) if data.is_file() else []
    memories = peers.corpus_texts(turns, texts, seed)
    queries = corpus.take(corpus.queries(seed), 1000)
    model.embed_full(memories[:32])
    model.embed(queries[:8])
    base = heap_in_use()
    rng = random.Random(seed)
    started = time.perf_counter()
    i = runs = 0
    kept: list[int] = []
    while i < len(memories):
        n = rng.choice((1, 2, 4, 8, 16, 32))
        model.embed_full(memories[i : i + n])
        if (i + n) // every > i // every:
            kept.append(heap_in_use() - base)
        i += n
        runs += 1
        if rng.random() < 0.5:
            model.embed([queries[rng.randrange(len(queries))]])
            runs += 1
    seconds = time.perf_counter() - started
    kept.append(heap_in_use() - base)
    return {"arena": arena, "base": base, "kept": kept, "runs": runs, "s": seconds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--texts", type=int, default=12_000, help="memories embedded")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--every", type=int, default=500, help="texts between heap readings")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    p.add_argument("--measure", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.texts, args.every, args.seed)))
        return
    rows = []
    for variant in [v for v in args.variants.split(",") if v]:
        if variant not in VARIANTS:
            raise SystemExit(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
        harness.log(f"{variant}: embedding {args.texts:,} texts")
        cmd = [sys.executable, __file__, "--measure", variant]
        cmd += ["--texts", str(args.texts), "--every", str(args.every), "--seed", str(args.seed)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        kept = sorted(r["kept"])
        rows.append(
            [
                variant,
                "on" if r["arena"] else "off",
                f"{r['runs']:,}",
                f"{r['base'] / 2**20:,.1f}",
                f"{len(kept)}",
                f"{kept[len(kept) // 2] / 2**20:+,.1f}",
                f"{kept[-1] / 2**20:+,.1f}",
                f"{r['kept'][-1] / 2**20:+,.1f}",
                f"{r['s']:,.0f}",
            ]
        )
    harness.report(
        args,
        f"The model's heap after {args.texts:,} texts in mixed batches and queries",
        [
            harness.table(
                (
                    "variant",
                    "ONNX Runtime CPU arena",
                    "model runs",
                    "glibc in use after warm-up MiB",
                    "readings",
                    "kept MiB, median",
                    "largest",
                    "at the end",
                    "seconds (orientation only)",
                ),
                rows,
            )
        ],
    )


if __name__ == "__main__":
    main()
