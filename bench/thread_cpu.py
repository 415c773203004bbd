"""Which of the daemon's threads spend CPU while it answers Recalls, and how much per
Recall: the embedder's worker, the event loop, and everything else (gRPC's, LanceDB's,
the BLAS library's; Python's threads are told apart by thread id: the one busy on a miss
and idle when cached is the embedder's worker). A thread that burns CPU while a Recall
waits for the model takes the core the model would use (2 cores here).

The daemon is started with ``--memories`` memories in one agent (LoCoMo turns, then
synthetic ones, by Stream Store), left idle ``--settle`` seconds (its compactions and
trims), then answers ``--queries`` Recalls one at a time, each a distinct question (cache
miss), then the same again (cached). Each thread's user+system CPU is read from
/proc/<pid>/task/<tid>/stat before and after each phase; Linux only. CPU per Recall is
load-independent enough to read on a shared machine (unlike the wall-clock times).

    ./dev bench thread_cpu.py [--memories 10000] [--queries 300] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import corpus
import harness
import locomo
import peers

TICK = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[str, float]:
    """CPU seconds by thread: the main thread (the event loop) by itself, Python's other
    threads (all named ``python`` by the OS) each by thread id, native threads by name
    (threads of one name summed)."""
    out: dict[str, float] = defaultdict(float)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        if task.name == str(pid):
            name = "main thread (event loop)"
        elif name == "python":
            name = f"python thread {task.name}"
        # a thread id is reused after its thread ends: its start time tells them apart
        out[f"{name}\0{fields[19]}"] += (int(fields[11]) + int(fields[12])) / TICK
    return out


def process_cpu(pid: int) -> float:
    """The whole process's CPU seconds, threads that ended included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def by_name(cpu: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for key, seconds in cpu.items():
        out[key.split("\0")[0]] += seconds
    return out


def diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--settle", type=float, default=30.0, help="idle seconds after the Stores")
    p.add_argument("--data", type=Path, help="locomo10.json (default ../shared/datasets/...)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    from memoryd_client import MemoryClient

    data = args.data or peers.default_data()
    turns = peers.locomo_turn_texts(locomo.load(data, None)) if data.is_file() else []
    texts = peers.corpus_texts(turns, args.memories, args.seed)
    queries = corpus.take(corpus.queries(args.seed), args.queries)
    base = Path(tempfile.mkdtemp(prefix="memoryd-threads-"))
    daemon = harness.Daemon(base / "data", base / "stderr.log", {})
    agent = "threads"
    phases: dict[str, tuple[dict[str, float], float, float]] = {}
    try:
        daemon.start()
        loaded = asyncio.run(harness.bulk_store(daemon.address, [(agent, t) for t in texts]))
        harness.log(f"loaded: {loaded.summary()}; idle {args.settle:g} s")
        time.sleep(args.settle)
        assert daemon.pid is not None
        with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
            for phase in ("idle", "miss", "cached"):
                before, t0 = threads(daemon.pid), time.perf_counter()
                total0 = process_cpu(daemon.pid)
                if phase == "idle":
                    time.sleep(5.0)
                else:
                    for q in queries:
                        client.recall(agent, q, limit=10)
                cpu = by_name(diff(threads(daemon.pid), before))
                phases[phase] = (cpu, time.perf_counter() - t0, process_cpu(daemon.pid) - total0)
    finally:
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)

    names = sorted(
        {n for cpu, _, _ in phases.values() for n in cpu},
        key=lambda n: -phases["miss"][0].get(n, 0.0),
    )
    rows = []
    for name in names:
        idle_cpu, idle_s, _ = phases["idle"]
        row = [name, f"{1000 * idle_cpu.get(name, 0.0) / idle_s:.2f}"]
        for phase in ("miss", "cached"):
            cpu, _, _ = phases[phase]
            row.append(f"{1000 * cpu.get(name, 0.0) / args.queries:.3f}")
        if any(float(x) > 0 for x in row[1:]):
            rows.append(row)
    _, idle_s, idle_total = phases["idle"]
    totals = ["the process (threads that ended included)", f"{1000 * idle_total / idle_s:.2f}"]
    for phase in ("miss", "cached"):
        _, wall, total = phases[phase]
        totals.append(f"{1000 * total / args.queries:.3f} (wall {1000 * wall / args.queries:.2f})")
    rows.append(totals)
    table = harness.table(
        ("thread", "idle: CPU ms per s", "miss: CPU ms per Recall", "cached: CPU ms per Recall"),
        rows,
    )
    harness.report(
        args,
        "Daemon CPU by thread during Recalls (bench/thread_cpu.py)",
        [
            f"{loaded.created} memories in one agent; {args.queries} Recalls per phase, one at "
            f"a time; idle = {5:g} s with no calls after {args.settle:g} s of settling.",
            table,
        ],
    )


if __name__ == "__main__":
    main()
