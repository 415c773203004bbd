"""Time to SERVING: start the daemon ``--runs`` times on one data dir, read its log.

Each run reports the daemon's own figure ("SERVING after X.XXs": bind, load the
embedder, open the store and rebuild the hot index, compile or load the numba kernels),
its breakdown line, and the wall time from spawning the process to its "serving on"
line (which adds interpreter start and imports). With ``--numba-cache fresh`` (default)
the runs share a new empty NUMBA_CACHE_DIR, so run 1 compiles every kernel cold and the
later runs load them from that cache; ``--numba-cache default`` uses numba's usual cache
(``__pycache__`` beside the kernels). ``--memories N`` stores N memories first (one
untimed start), so the runs also time rebuilding the hot index from LanceDB.

    python bench/startup.py                      # empty store, cold then warm cache
    python bench/startup.py --memories 10000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

import corpus
import harness

HEADERS = (
    "run", "numba cache", "memories", "SERVING after s", "embedder s", "store + index s",
    "kernels s", "spawn to serving line s", "RSS MiB",
)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=2, help="starts to time")
    p.add_argument("--memories", type=int, default=0, help="stored before the timed starts")
    p.add_argument("--agents", type=int, default=10, help="agents the memories spread over")
    p.add_argument("--numba-cache", choices=("fresh", "default"), default="fresh")
    p.add_argument("--data-dir", type=Path, help="data dir (default: a temp dir, removed)")
    p.add_argument("--keep-data", action="store_true", help="keep the temp dir")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic texts")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    base = Path(tempfile.mkdtemp(prefix="memoryd-bench-startup-"))
    data_dir = args.data_dir or base / "data"
    env = {"NUMBA_CACHE_DIR": str(base / "numba")} if args.numba_cache == "fresh" else {}
    rows = []
    try:
        if args.memories:
            loader = harness.Daemon(data_dir, base / "load.log").start()
            agents = [f"bench-startup-{i:04d}" for i in range(args.agents)]
            texts = corpus.take(corpus.memories(args.seed), args.memories)
            harness.log(f"storing {args.memories} memories over {args.agents} agents")
            loaded = asyncio.run(
                harness.bulk_store(loader.address, harness.agents_round_robin(agents, texts))
            )
            harness.log(f"stored: {loaded.summary()}")
            loader.stop()
        daemon = harness.Daemon(data_dir, base / "stderr.log", env=env)
        for run in range(1, args.runs + 1):
            t0 = time.perf_counter()
            daemon.start()
            wall = time.perf_counter() - t0
            s = daemon.startup()
            rss = harness.proc_status(daemon.pid).get("VmRSS")
            harness.log(f"run {run}: {s}, spawn to serving line {wall:.2f}s")
            cache = args.numba_cache + (
                " (cold)" if args.numba_cache == "fresh" and run == 1 else ""
            )
            nan = float("nan")
            rows.append(
                [run, cache, int(s.get("store_rows", 0)), s.get("serving_s", nan),
                 s.get("embedder_s", nan), s.get("store_s", nan), s.get("kernels_s", nan),
                 wall, harness.mib(rss)]
            )  # fmt: skip
            code = daemon.stop()
            if code != 0:
                harness.log(f"memoryd exited {code}:\n{daemon.log_tail()}")
    finally:
        if args.keep_data:
            harness.log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    harness.report(args, "Time to SERVING", [harness.table(HEADERS, rows)])


if __name__ == "__main__":
    main()
