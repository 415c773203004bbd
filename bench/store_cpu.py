"""What a Store costs the daemon, thread by thread: CPU seconds per Store (issue #17).

Wall-clock rates move with the neighbours on a shared machine; the CPU time each of the
daemon's threads spends per Store moves far less. This script starts a daemon, stores
``--warmup`` memories through Streams (as ``harness.bulk_store`` loads), reads every
thread's CPU time from ``/proc/PID/task/*/stat``, stores ``--stores`` more, reads again,
and reports per thread kind: the event loop (the main thread: gRPC, validation, the
near-duplicate scan, language detection, BM25 analysis, token quantisation, the index),
the other Python threads (the embedder's workers: the model, and the jobs), LanceDB's
threads (the commits), plus the Store rate of the run.

``--cprofile`` runs the daemon under cProfile with a per-thread CPU clock
(``time.thread_time``) for the event loop's thread, restarted (SIGUSR2) after the
warm-up, and lists the functions with the most own CPU time per measured Store. cProfile's
own cost lands on every call it sees (a function calling many small builtins looks far
costlier than it is): read it for the ranking, and time a function alone to size it.

    ./dev bench store_cpu.py                        # 1,500 Stores after 100
    ./dev bench store_cpu.py --cprofile 30
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import corpus
import harness

TICK = os.sysconf("SC_CLK_TCK")

# Run as the daemon with --cprofile: profile `memoryd` on a per-thread CPU clock.
PROFILED_DAEMON = """
import cProfile, os, runpy, signal, sys, time
profiles = [cProfile.Profile(time.thread_time)]
def restart(signum, frame):  # SIGUSR2: forget start-up and warm-up, profile from now
    profiles[0].disable()
    profiles[0] = cProfile.Profile(time.thread_time)
    profiles[0].enable()
signal.signal(signal.SIGUSR2, restart)
def dump():
    profiles[0].disable()
    profiles[0].dump_stats(os.environ["STORE_CPU_PROFILE"])
import memoryd.cli
real_exit = memoryd.cli._exit_now
def exit_now(code):  # a stop that abandons a compaction ends with os._exit: no finally
    dump()
    real_exit(code)
memoryd.cli._exit_now = exit_now
sys.argv = ["memoryd", *sys.argv[1:]]
profiles[0].enable()
try:
    runpy.run_module("memoryd", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    dump()
"""


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Every thread of ``pid``: (name, CPU seconds so far)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def kind(tid: int, pid: int, name: str) -> str:
    if tid == pid:
        return "event loop (main thread)"
    if name.startswith("lance"):
        return "LanceDB threads (commits)"
    if name == "python":
        return "other Python threads (embedder workers, jobs)"
    return f"other ({name})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stores", type=int, default=1500, help="measured Stores")
    p.add_argument("--warmup", type=int, default=100, help="Stores before the measurement")
    p.add_argument("--cprofile", type=int, default=0, help="also list the top N functions")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic memories")
    harness.add_load_args(p)
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    texts = corpus.take(corpus.memories(args.seed), args.warmup + args.stores)
    base = Path(tempfile.mkdtemp(prefix="memoryd-store-cpu-"))
    profile_path = base / "daemon.prof"
    program: tuple[str, ...] = ("-m", "memoryd")
    env = {}
    if args.cprofile:
        script = base / "profiled_daemon.py"
        script.write_text(PROFILED_DAEMON)
        program = (str(script),)
        env["STORE_CPU_PROFILE"] = str(profile_path)
    daemon = harness.Daemon(base / "data", base / "stderr.log", env=env, program=program)
    try:
        daemon.start()
        pid = daemon.pid
        harness.log(f"memoryd pid {pid} on {daemon.address}")
        warm = [("bench", t) for t in texts[: args.warmup]]
        asyncio.run(harness.bulk_store(daemon.address, warm, label="warm-up"))
        if args.cprofile:
            os.kill(pid, signal.SIGUSR2)  # the profile starts here
            time.sleep(0.5)
        before = thread_cpu(pid)
        started = time.perf_counter()
        result = harness.load(
            args, daemon.address, [("bench", t) for t in texts[args.warmup :]], "stored"
        )
        wall = time.perf_counter() - started
        after = thread_cpu(pid)
        daemon.stop()
        n = result.created + result.duplicates
        per_kind: dict[str, float] = {}
        for tid, (name, cpu) in after.items():
            used = cpu - before.get(tid, (name, 0.0))[1]
            label = kind(tid, pid, name)
            per_kind[label] = per_kind.get(label, 0.0) + used
        total = sum(per_kind.values())
        rows = [
            (label, f"{used:.2f}", f"{1000 * used / max(1, n):.3f}", f"{100 * used / total:.0f}%")
            for label, used in sorted(per_kind.items(), key=lambda kv: -kv[1])
        ]
        rows.append(("all threads", f"{total:.2f}", f"{1000 * total / max(1, n):.3f}", "100%"))
        sections = [
            f"{n} Stores (one agent; {result.duplicates} DUPLICATE, errors "
            f"{dict(result.errors) or 'none'}) through {args.load_clients} Streams x "
            f"{args.load_pipeline} in flight, after {args.warmup}: {n / wall:.0f} Stores/s "
            "(wall clock: moves with the machine's load)",
            harness.table(("threads", "CPU s", "CPU ms per Store", "share"), rows),
        ]
        if args.cprofile and profile_path.exists():
            sections.append(top_functions(profile_path, n, args.cprofile))
        harness.report(args, "CPU per Store, by daemon thread (bench/store_cpu.py)", sections)
    finally:
        if daemon.alive():
            daemon.stop()
        shutil.rmtree(base, ignore_errors=True)


def top_functions(path: Path, stores: int, top: int) -> str:
    """The event loop's functions with the most own CPU per Store, over the measured
    Stores (the profile restarts after the warm-up)."""
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    rows = []
    for (file, line, fn), (_, calls, own, cum, _) in stats.items():
        if own > 0:
            rows.append((own, calls, cum, f"{Path(file).name}:{line} {fn}"))
    rows.sort(reverse=True)
    return (
        f"**cProfile** (thread CPU clock, profiler overhead included), top {top} by own time\n\n"
        + harness.table(
            ("function", "calls per Store", "own us per Store", "cumulative us per Store"),
            [
                (
                    name,
                    f"{calls / stores:.1f}",
                    f"{1e6 * own / stores:.0f}",
                    f"{1e6 * cum / stores:.0f}",
                )
                for own, calls, cum, name in rows[:top]
            ],
        )
    )


if __name__ == "__main__":
    sys.exit(main())
