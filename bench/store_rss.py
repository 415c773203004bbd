"""The daemon's resident memory per memory on the Store path, beside the load path.

``bench/peers.py`` measures a daemon's RSS after it received its memories through Stream
Stores; ``bench/load_rss.py`` measures ``Repository.open`` over a store already written.
This script does both with one daemon and one store, so the two can be compared:

1. a daemon is started on an empty data dir (through this script, ``--serve``: ``memoryd
   serve`` with a SIGUSR1 handler that writes a memory report; memoryd's code is unchanged)
   and its VmRSS read once it has settled: the base;
2. ``--memories`` texts (LoCoMo turns, then ``corpus.py`` memories, one agent, as peers.py
   stores them) are stored through 8 Streams in ``--steps`` equal steps, VmRSS read after
   each (the slope between the steps is the cost per memory, free of what a fresh daemon
   grows by once, e.g. the model's first document batches);
3. after ``--idle`` seconds without writes, the daemon's report: VmRSS and its anonymous
   and file-backed parts; glibc's heap (``mallinfo2``: bytes in use, bytes free but kept);
   Arrow's memory pool; LanceDB's session caches; Python's allocated blocks (and the top
   allocating lines when ``--tracemalloc``); the hot index's own count; then VmRSS again
   after ``malloc_trim(0)`` and after Arrow's pool released what it keeps (what the daemon
   holds but does not use); ``--peek`` reads VmRSS alone (no report, no trim) at earlier
   moments after the last Store, e.g. while the compaction after the burst still runs;
4. the daemon is stopped and started again over the same data dir (the load path), and
   after ``--idle`` seconds its report is read the same way.

Every figure per memory is VmRSS above the base (the empty daemon, model loaded) divided
by the memories stored. Bytes, not timings: the machine's load does not change them much
(though it changes how Stores group into commits).

    ./dev bench store_rss.py --memories 10000
    ./dev bench store_rss.py --memories 30000 --steps 3 --tracemalloc 25
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OUT_ENV = "STORE_RSS_OUT"
TRACE_ENV = "STORE_RSS_TRACEMALLOC"
AGENT = "store-rss"

# -- inside the daemon (--serve) ------------------------------------------------------


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # bytes of the heaps (main arena's sbrk and the other arenas)
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # bytes in mmapped chunks
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes in use (heap chunks)
            "fordblks",  # bytes free in the heaps (kept, not given back)
            "keepcost",
        )
    ]


def _status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0]) * 1024
    return out


def mallinfo() -> dict[str, int]:
    """glibc's ``mallinfo2`` of this process, by field name ({} where there is none)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {name: int(getattr(info, name)) for name, _ in _Mallinfo2._fields_}


def heap_in_use(mi: dict[str, int]) -> int:
    """glibc's bytes in use from a ``mallinfo`` reading: heap chunks plus mmap'd blocks."""
    return mi.get("uordblks", 0) + mi.get("hblkhd", 0)


_seen: dict[str, list[Any]] = {"repositories": [], "embedders": []}


def _install_spies() -> None:
    """Remember the Repository the daemon opens (its store's LanceDB session is read from
    it: a list of every session made would keep the ones the store dropped alive)."""
    from memoryd.storage.repository import Repository

    opened = Repository.open

    def open_and_note(self: Repository) -> float:
        _seen["repositories"].append(self)
        return opened(self)

    Repository.open = open_and_note  # type: ignore[method-assign]

    from memoryd.inference.onnx_embedder import OnnxEmbedder

    made = OnnxEmbedder.__init__

    def init_and_note(self: OnnxEmbedder, *args: Any, **kw: Any) -> None:
        _seen["embedders"].append(self)  # the daemon gc.freeze()s: gc.get_objects misses it
        made(self, *args, **kw)

    OnnxEmbedder.__init__ = init_and_note  # type: ignore[method-assign]


def _report(trace_top: int) -> dict[str, Any]:
    import pyarrow as pa

    from memoryd.storage import heap

    before_gc = mallinfo()  # what the cyclic GC has not collected yet is still in use here
    collected = gc.collect()
    out: dict[str, Any] = {"status": _status(), "mallinfo": mallinfo()}
    out["before_gc"] = {"mallinfo": before_gc, "collected": collected}
    pool = pa.default_memory_pool()
    out["arrow"] = {
        "backend": pool.backend_name,
        "bytes_allocated": pool.bytes_allocated(),
        "max_memory": pool.max_memory(),
        "total_allocated_bytes": pa.total_allocated_bytes(),
    }
    out["lance_sessions"] = []
    repos = _seen["repositories"]
    for s in [repos[-1]._durable._session] if repos else []:
        entry = {}
        for name in ("size_bytes", "approx_num_items"):  # properties in lancedb 0.40
            with contextlib.suppress(Exception):
                value = getattr(s, name)
                entry[name] = int(value() if callable(value) else value)
        out["lance_sessions"].append(entry)
    out["python_blocks"] = sys.getallocatedblocks()
    out["pymalloc"] = _pymalloc_stats()
    if repos:
        r = repos[-1]
        out["index"] = {
            "memories": len(r),
            "index_bytes": r.index_bytes(),
            "row_capacity": sum(p.vectors.shape[0] for p in r._parts.values()),
            "idempotency": len(r._idempotency),
            "keys": len(r._keys),
            "touched": len(r._touched),
            "token_file": r._token_file.size,
            "commits": r._durable.commits,
        }
    import tracemalloc

    if tracemalloc.is_tracing():
        current, peak = tracemalloc.get_traced_memory()
        snap = tracemalloc.take_snapshot()
        top = snap.statistics("lineno")[:trace_top]
        out["tracemalloc"] = {
            "current": current,
            "peak": peak,
            "top": [(str(s.traceback[0]), s.size, s.count) for s in top],
        }
    # What the process holds without using it: glibc's free chunks, Arrow's pool cache.
    before = _status()["VmRSS"]
    heap.release_free_pages()  # malloc_trim(0)
    out["after_malloc_trim"] = _status()["VmRSS"]
    with contextlib.suppress(Exception):
        pool.release_unused()
    out["after_arrow_release"] = _status()["VmRSS"]
    out["rss_before_trims"] = before
    return out


def _pymalloc_stats() -> dict[str, int]:
    """Python's small-object allocator (its own 1 MiB arenas, mmap'd: not in mallinfo2):
    the totals of ``sys._debugmallocstats()``, by name ("arenas allocated current",
    "bytes in allocated blocks", "bytes in available blocks", ...)."""
    import tempfile

    found: dict[str, int] = {}
    with tempfile.TemporaryFile("w+") as f:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(f.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        for line in f:
            name, sep, value = line.rpartition("=")
            if sep and line.startswith("#"):
                with contextlib.suppress(ValueError):
                    found[name.strip("# ").strip()] = int(value.strip().replace(",", ""))
    return found


def serve(argv: list[str]) -> int:
    """``memoryd serve``; SIGUSR1 writes the memory report to $STORE_RSS_OUT.<n>.json."""
    import tracemalloc

    from memoryd import cli

    cli._limit_malloc_arenas()  # as `memoryd serve` does, before any import starts a thread
    out = Path(os.environ[OUT_ENV])
    trace_top = int(os.environ.get(TRACE_ENV, "0"))
    if trace_top:
        tracemalloc.start(1)
    _install_spies()
    count = [0]
    watched = [0]

    def write(name: str, data: Any) -> None:  # read by ask_report once it is whole
        path = out.with_name(f"{out.name}.{os.getpid()}.{name}.json")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)

    def on_signal(signum: int, frame: Any) -> None:
        count[0] += 1
        write(str(count[0]), _report(trace_top))

    def on_teardown(signum: int, frame: Any) -> None:
        write("teardown", _teardown())

    def on_watch(signum: int, frame: Any) -> None:
        watched[0] += 1
        write(f"watch{watched[0]}", _watch())

    signal.signal(signal.SIGUSR1, on_signal)
    signal.signal(signal.SIGUSR2, on_teardown)
    signal.signal(WATCH_SIGNAL, on_watch)
    return cli.main(argv)


WATCH_SIGNAL = signal.SIGRTMIN


def _watch() -> dict[str, Any]:
    """A light look (no gc, no trim): glibc's heap as it is and the writer's counters."""
    out: dict[str, Any] = {"mallinfo": mallinfo()}
    repos = _seen["repositories"]
    if repos:
        d = repos[-1]._durable
        for name in ("commits", "compactions", "cleanups", "heap_trims", "cache_drops"):
            out[name] = getattr(d, name)
        out["compacting"] = bool(d._compacting)
    out["python_blocks"] = sys.getallocatedblocks()
    return out


def _in_use() -> int:
    """glibc's bytes in use after a collection and a trim."""
    from memoryd.storage import heap

    gc.collect()
    heap.release_free_pages()
    return heap_in_use(mallinfo())


def _teardown() -> dict[str, Any]:
    """glibc's bytes in use, then again after dropping each part in turn (the daemon is
    of no use after: the driver stops it): what each part held."""
    steps = [("before", _in_use())]
    repos = _seen["repositories"]
    if repos:
        durable = repos[-1]._durable
        durable.close()  # the writer and the compactor stop: nothing reads the handles
        for name in ("_table", "_access", "_keys", "_db", "_session", "_probe_db"):
            setattr(durable, name, None)
        steps.append(("LanceDB's tables, connection and session dropped", _in_use()))
    for embedder in _seen["embedders"]:
        embedder._session = None
        embedder._tokenizer = None
    steps.append(("the model's session and tokenizer dropped", _in_use()))
    if repos:
        repos[-1]._parts.clear()
        repos[-1]._memories.clear()
        steps.append(("the hot index's parts and records cleared", _in_use()))
    # The daemon freezes the heap (server.freeze_heap): a reference cycle frozen while
    # alive is never collected. Unfrozen, the collection finds them; kept to be counted.
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.unfreeze()
    gc.collect()
    garbage = _census(list(gc.garbage))
    gc.garbage.clear()
    gc.set_debug(0)
    steps.append(("frozen objects unfrozen, garbage collected", _in_use()))
    census = _census(gc.get_objects()) | {"threads": len(os.listdir("/proc/self/task"))}
    return {"steps": steps, "census": census, "garbage": garbage}


def _census(objects: list[Any], top: int = 25) -> dict[str, Any]:
    """What Python holds in ``objects`` (all it tracks, or the garbage a collection
    found): objects by type (count and ``sys.getsizeof``), numpy's data owned by arrays
    they refer to, Arrow's buffers."""
    import numpy as np

    by_type: dict[str, list[int]] = {}
    arrays: dict[int, Any] = {}
    arrow = [0, 0]
    for o in objects:
        t = type(o)
        name = f"{getattr(t, '__module__', '')}.{t.__qualname__}"
        entry = by_type.setdefault(name, [0, 0])
        entry[0] += 1
        with contextlib.suppress(Exception):
            entry[1] += sys.getsizeof(o)
        for r in gc.get_referents(o):
            if isinstance(r, np.ndarray):
                while isinstance(r.base, np.ndarray):
                    r = r.base
                arrays[id(r)] = r
            elif str(getattr(type(r), "__module__", "")).startswith("pyarrow"):
                arrow[0] += 1
                with contextlib.suppress(Exception):
                    arrow[1] += int(r.nbytes)
    owned = [a for a in arrays.values() if a.flags.owndata]
    ranked = sorted(by_type.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "objects": len(objects),
        "by_type": ranked,
        "numpy": {"arrays": len(owned), "bytes": sum(a.nbytes for a in owned)},
        "numpy_foreign": {
            "arrays": len(arrays) - len(owned),
            "bytes": sum(a.nbytes for a in arrays.values() if not a.flags.owndata),
        },
        "arrow": {"objects": arrow[0], "bytes": arrow[1]},
    }


# -- the driver -----------------------------------------------------------------------


def busiest(cpu: dict[str, float], top: int = 3) -> str:
    """The threads (by name) that used the most CPU, those over 0.05 s."""
    ranked = sorted(((s, n) for n, s in cpu.items() if s >= 0.05), reverse=True)[:top]
    return ", ".join(f"{n} {s:.2f}" for s, n in ranked)


def vm_rss(pid: int) -> int:
    import harness

    return harness.proc_status(pid).get("VmRSS", 0)


def ask_report(
    pid: int, out: Path, n: int | str, timeout: float = 600.0, sig: int = signal.SIGUSR1
) -> Any:
    path = out.with_name(f"{out.name}.{pid}.{n}.json")
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no report from the daemon in {timeout}s")
        time.sleep(0.2)
    return json.loads(path.read_text())


def settle(pid: int, seconds: float) -> int:
    """VmRSS after ``seconds`` of nothing asked of the daemon (its writer goes idle and
    compacts; its jobs run)."""
    time.sleep(seconds)
    return vm_rss(pid)


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def per(n: float, memories: int) -> str:
    return f"{n / max(1, memories):,.0f}"


def report_rows(label: str, r: dict[str, Any], base: int, n: int) -> list[list[str]]:
    st = r["status"]
    mi = r.get("mallinfo", {})
    lance = sum(s.get("size_bytes", 0) for s in r.get("lance_sessions", []))
    idx = r.get("index", {})
    return [
        [
            label,
            mib(st["VmRSS"]),
            per(st["VmRSS"] - base, n),
            mib(st.get("RssAnon", 0)),
            mib(st.get("RssFile", 0)),
            mib(heap_in_use(mi)),
            mib(mi.get("fordblks", 0)),
            mib(r["arrow"]["bytes_allocated"]),
            mib(lance),
            per(idx.get("index_bytes", 0), n),
            per(r["after_malloc_trim"] - base, n),
            per(r["after_arrow_release"] - base, n),
        ]
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=4, help="VmRSS read after each of these")
    p.add_argument("--idle", type=float, default=15.0, help="seconds to settle before a report")
    p.add_argument(
        "--peek",
        type=float,
        nargs="*",
        default=[],
        help="also read VmRSS alone at these seconds after the last Store (before --idle)",
    )
    p.add_argument("--tracemalloc", type=int, default=0, help="top N lines (slows the daemon)")
    p.add_argument(
        "--teardown",
        action="store_true",
        help="after each path's report, drop LanceDB's handles, the model, the hot index in\n"
        "turn and read glibc's bytes in use after each; the daemon is then killed, so the\n"
        "restart is one after a kill (no saved token map: it analyses every text again)",
    )
    p.add_argument(
        "--watch",
        type=float,
        default=0.0,
        help="during the Store path's idle, every this many seconds: VmRSS, glibc's bytes in\n"
        "use (no trim) and the writer's counters (compactions, trims, cache drops)",
    )
    p.add_argument("--data", type=Path, help="LoCoMo's locomo10.json (default: shared/)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic memories")
    p.add_argument("--keep", type=Path, help="keep the data dir here (must not exist yet)")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    harness_args(p)
    args = p.parse_args()

    import harness
    import locomo
    import peers
    import thread_cpu

    data = args.data or peers.default_data()
    turns = peers.locomo_turn_texts(locomo.load(data, None)) if data.is_file() else []
    texts = peers.corpus_texts(turns, args.memories, args.seed)
    base_dir = Path(tempfile.mkdtemp(prefix="memoryd-store-rss-"))
    data_dir = args.keep or base_dir / "data"
    out = base_dir / "report"
    env = {OUT_ENV: str(out)} | ({TRACE_ENV: str(args.tracemalloc)} if args.tracemalloc else {})
    daemon = harness.Daemon(
        data_dir, base_dir / "stderr.log", env, program=(str(Path(__file__).resolve()), "--serve")
    )
    asked = 0
    teardowns: list[dict[str, Any]] = []
    watches: list[tuple[float, int, dict[str, Any]]] = []
    try:
        daemon.start()
        harness.log(f"memoryd pid {daemon.pid} on {daemon.address}")
        base = settle(daemon.pid, 5.0)
        asked += 1
        fresh = ask_report(daemon.pid, out, asked)
        steps: list[tuple[int, int]] = []
        created = duplicates = 0
        bounds = [round(args.memories * (i + 1) / args.steps) for i in range(args.steps)]
        start = 0
        for end in bounds:
            items = [(AGENT, t) for t in texts[start:end]]
            loaded = asyncio.run(
                harness.bulk_store(
                    daemon.address,
                    items,
                    clients=args.load_clients,
                    pipeline=args.load_pipeline,
                    label="stored",
                )
            )
            if loaded.errors:
                raise SystemExit(f"memoryd refused stores: {dict(loaded.errors)}")
            created += loaded.created
            duplicates += loaded.duplicates
            start = end
            steps.append((created, vm_rss(daemon.pid)))
            harness.log(f"{created} memories: VmRSS {mib(steps[-1][1])} MiB")
        n = created
        stored_at = time.monotonic()
        peeks: list[tuple[float, int]] = []
        for at in sorted(t for t in args.peek if t < args.idle):
            time.sleep(max(0.0, stored_at + at - time.monotonic()))
            peeks.append((at, vm_rss(daemon.pid)))
        if args.watch:
            at = 0.0
            last_cpu = thread_cpu.threads(daemon.pid)
            while at + args.watch < args.idle:
                at += args.watch
                time.sleep(max(0.0, stored_at + at - time.monotonic()))
                look = ask_report(daemon.pid, out, f"watch{len(watches) + 1}", sig=WATCH_SIGNAL)
                cpu = thread_cpu.threads(daemon.pid)
                look["busy"] = busiest(thread_cpu.by_name(thread_cpu.diff(cpu, last_cpu)))
                last_cpu = cpu
                watches.append((at, vm_rss(daemon.pid), look))
        time.sleep(max(0.0, stored_at + args.idle - time.monotonic()))
        asked += 1
        stored = ask_report(daemon.pid, out, asked)
        if args.teardown:
            teardowns.append(ask_report(daemon.pid, out, "teardown", sig=signal.SIGUSR2))
        daemon.stop(kill=args.teardown)
        daemon.start()
        harness.log(f"restarted: memoryd pid {daemon.pid}")
        settle(daemon.pid, args.idle)
        asked = 0  # a new process counts its reports from 1
        asked += 1
        loaded_report = ask_report(daemon.pid, out, asked)
        if args.teardown:
            teardowns.append(ask_report(daemon.pid, out, "teardown", sig=signal.SIGUSR2))
        daemon.stop(kill=args.teardown)
    finally:
        if daemon.alive():
            daemon.stop()
        if args.keep is None:
            shutil.rmtree(base_dir, ignore_errors=True)
        else:
            harness.log(f"kept {base_dir} (data in {data_dir})")

    step_rows = []
    prev_n, prev_rss = 0, base
    for count, rss in steps:
        step_rows.append(
            [
                f"{count:,}",
                mib(rss),
                per(rss - base, count),
                per(rss - prev_rss, count - prev_n),
            ]
        )
        prev_n, prev_rss = count, rss
    watch_rows = []
    for at, rss, look in watches:
        watch_rows.append(
            [f"{at:.0f}", mib(rss), mib(heap_in_use(look.get("mallinfo", {})))]
            + [
                str(look.get(k))
                for k in ("commits", "compactions", "cleanups", "heap_trims", "cache_drops")
            ]
            + ["yes" if look.get("compacting") else "", f"{look.get('python_blocks', 0):,}"]
            + [look.get("busy", "")]
        )
    for at, rss in peeks:
        step_rows.append([f"{n:,}, idle {at:.0f} s", mib(rss), per(rss - base, n), ""])
    headers = (
        "when",
        "VmRSS MiB",
        "B per memory above the empty daemon",
        "RssAnon MiB",
        "RssFile MiB",
        "glibc in use MiB",
        "glibc free, kept MiB",
        "Arrow pool MiB",
        "LanceDB caches MiB",
        "index_bytes per memory",
        "B per memory after malloc_trim(0)",
        "... and Arrow's release_unused()",
    )
    rows = (
        report_rows("empty daemon (base)", fresh, base, n)
        + report_rows(f"after {n:,} Stores, idle {args.idle:.0f} s", stored, base, n)
        + report_rows(f"restarted over them, idle {args.idle:.0f} s", loaded_report, base, n)
    )
    sections = [
        f"{n:,} memories stored in one agent ({duplicates} DUPLICATE answers) through "
        f"{args.load_clients} Streams x {args.load_pipeline} in flight; base VmRSS "
        f"{mib(base)} MiB (the empty daemon, model loaded, 5 s after SERVING); Arrow's pool: "
        f"{stored['arrow']['backend']}",
        harness.table(
            (
                "memories stored",
                "VmRSS MiB",
                "B per memory above the base",
                "B per memory of this step",
            ),
            step_rows,
        ),
        harness.table(headers, rows),
    ]
    if watch_rows:
        sections.append(
            "the Store path's idle, looked at every "
            f"{args.watch:.0f} s (glibc's heap as it is, no trim):\n\n"
            + harness.table(
                (
                    "s after the last Store",
                    "VmRSS MiB",
                    "glibc in use MiB",
                    "commits",
                    "compactions",
                    "cleanups",
                    "heap trims",
                    "cache drops",
                    "compacting",
                    "Python's blocks",
                    "threads' CPU s since the last look",
                ),
                watch_rows,
            )
        )
    for label, r in (("after the Stores", stored), ("after the restart", loaded_report)):
        extra = {k: v for k, v in r.get("index", {}).items()}
        extra["python_blocks"] = r.get("python_blocks", 0)
        if "before_gc" in r:  # glibc's bytes in use before the report's gc.collect()
            b = r["before_gc"]
            extra["in_use_before_gc_mib"] = round(heap_in_use(b["mallinfo"]) / 2**20, 1)
            extra["gc_collected"] = b["collected"]
        # glibc's free chunks: each keeps the partial pages at its ends resident after a trim
        extra["glibc free chunks"] = r.get("mallinfo", {}).get("ordblks", 0)
        pm = r.get("pymalloc", {})
        for key in (
            "arenas allocated current",
            "bytes in allocated blocks",
            "bytes in available blocks",
        ):
            if key in pm:
                extra[f"pymalloc {key}"] = pm[key]
        extra["lance_sessions"] = r.get("lance_sessions", [])
        sections.append(f"{label}: {json.dumps(extra)}")
        if "tracemalloc" in r:
            t = r["tracemalloc"]
            sections.append(
                f"tracemalloc {label}: {mib(t['current'])} MiB traced\n\n"
                + harness.table(
                    ("line", "MiB", "blocks", "B per memory"),
                    [
                        (line, mib(size), f"{count:,}", per(size, n))
                        for line, size, count in t["top"]
                    ],
                )
            )
    for label, torn in zip(("Store path", "restart"), teardowns, strict=False):
        steps_ = torn["steps"]
        rows_ = []
        for i, (what, in_use) in enumerate(steps_):
            freed = "" if i == 0 else mib(steps_[i - 1][1] - in_use)
            rows_.append((what, mib(in_use), freed))
        sections.append(
            f"teardown, {label}:\n\n"
            + harness.table(("step", "glibc in use MiB", "freed by the step MiB"), rows_)
        )
    if teardowns:
        sections.append(census_table(teardowns, "census", "Python census after the teardown"))
        sections.append(
            census_table(teardowns, "garbage", "the garbage found once the heap was unfrozen")
        )
    harness.report(
        args, f"Daemon RSS per memory, Store path and load path: {n:,} memories", sections
    )


def census_table(teardowns: list[dict[str, Any]], part: str, title: str) -> str:
    """A census of each teardown side by side (Store path, restart)."""
    import harness

    censuses = [t[part] for t in teardowns]
    sized = [{name: v for name, v in c["by_type"]} for c in censuses]
    names = sorted({n for s in sized for n in s}, key=lambda n: -sized[0].get(n, [0, 0])[1])
    rows = [
        ("objects (gc)", *(f"{c['objects']:,}" for c in censuses)),
        *(
            [("threads", *(str(c["threads"]) for c in censuses))]
            if "threads" in censuses[0]
            else []
        ),
        *(
            (
                f"{kind} ({key})",
                *(
                    f"{c[key]['arrays' if key != 'arrow' else 'objects']:,}, "
                    f"{mib(c[key]['bytes'])} MiB"
                    for c in censuses
                ),
            )
            for kind, key in (
                ("numpy data", "numpy"),
                ("numpy views of other memory", "numpy_foreign"),
                ("Arrow objects referred to", "arrow"),
            )
        ),
        *(
            (name, *(f"{s[name][0]:,}, {mib(s[name][1])} MiB" if name in s else "" for s in sized))
            for name in names
        ),
    ]
    labels = ("Store path", "restart")[: len(censuses)]
    return f"{title} (count, getsizeof):\n\n" + harness.table(("what", *labels), rows)


def harness_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--load-clients", type=int, default=8, help="Streams used to store")
    p.add_argument("--load-pipeline", type=int, default=32, help="ops in flight per Stream")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(serve(sys.argv[2:]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
