"""Several daemons over one bucket (issue #14): 1, 2 and 3 daemons on a local S3-compatible
server (moto in server mode, the test server of tests/support/memoryd_testing/s3.py).

For each daemon count it starts a fresh moto server and that many daemons on one bucket
(each its own data dir, ``storage.uri = s3://bucket/fleet``, default follow interval
0.25 s), then measures, one phase after the other:

- Store: ``--clients`` threads per daemon, each its own agent, send unary Stores (texts of
  the synthetic corpus, every one new) until ``--stores`` were answered in all. Each Store
  embeds its text, checks duplicates, commits to the shared table (one LanceDB commit, or
  one group commit for the Stores that arrive together on one daemon) and answers. Also
  reported: the table commits the daemons made (their ``memoryd_store_commits_total``) per
  second of the phase: the commits per second one table took under that load.
- Recall: the same threads send unary Recalls (distinct corpus questions: every query
  embedding is a cache miss) until ``--recalls`` were answered.
- Visibility lag (2 and 3 daemons): ``--lag-samples`` times, one at a time with the fleet
  otherwise idle, a Store on daemon A (cycling through the daemons), then daemon B (the
  next one) is asked again and again (every ``--poll-ms``) until it answers with that
  memory: by Get (even samples) or by Recall of the stored text (odd ones). The lag is from
  the Store's answer at the client to the end of the first answer of B that holds it, so
  it includes one probe's round trip (a Get ~1 ms, a Recall a few ms).

Then ``--commits`` single-row LanceDB ``Table.add`` calls, one at a time, on a bucket of
the moto server and on a local directory: what one commit costs by itself.

On this machine (2 cores) the daemons, moto, the client threads and this script all share
the same two cores: a second or third daemon adds no CPU, so throughput cannot grow with
the daemons here; the figures show the cost of sharing one table (commit conflicts and
rebases, following the others' rows), not a fleet's capacity. moto on loopback answers in
about a millisecond; a real object store takes tens of milliseconds per request, so its
commits (several requests each) and lags are longer. ``--quick`` is a correctness run (a
few of everything, ~1-2 minutes): its figures mean nothing.

moto slows down as a table's objects pile up: it keeps a bucket in a Python dict and
answers every LIST (each commit and each follow look makes some) by walking it. With one
daemon on a loaded machine (load average 10-14) Stores went from ~3/s over the first 200
to ~1.4/s after 260, with moto at four times the daemon's CPU; the daemon's defaults keep
every version for 15 minutes on an object store and compact every 200 commits only once
the writer pauses. So the sizes are kept small (200 Stores per daemon count, each count on
a fresh moto server); Store rates here say more about moto than about memoryd, and a real
object store's LIST does not walk the bucket. Read the Store rows as "what commits on one
shared table cost on loopback", the lag and Recall rows as memoryd's.

    ./dev bench fleet.py                 # the full run, ~4-8 minutes on a quiet machine
    ./dev bench fleet.py --quick         # correctness only
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import corpus
import harness
import lancedb
import pyarrow as pa
from memoryd_client import MemoryClient, MemorydError, NotFound
from memoryd_testing.s3 import S3Server

QUICK = {"stores": 30, "recalls": 30, "lag_samples": 10, "commits": 10}
FULL = {"stores": 200, "recalls": 400, "lag_samples": 150, "commits": 200}
LAG_TIMEOUT = 30.0  # a sample not visible by then counts as missing


@dataclass
class Phase:
    latencies: list[float]
    errors: int
    wall: float
    commits: int = 0  # table commits the daemons made meanwhile


def metrics_commits(daemon: harness.Daemon) -> int:
    """The daemon's memoryd_store_commits_total."""
    with urllib.request.urlopen(daemon.metrics_url(), timeout=30) as r:
        text = r.read().decode()
    found = re.search(r"^memoryd_store_commits_total (\S+)$", text, re.MULTILINE)
    assert found, "no memoryd_store_commits_total in the daemon's metrics"
    return int(float(found.group(1)))


def run_fleet(n: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    s3 = S3Server().start()
    try:
        uri = f"s3://{s3.new_bucket()}/fleet"
        env = {
            **s3.daemon_env(uri),
            "MEMORYD_METRICS__LISTEN": "127.0.0.1:0",
        }
        fleet = [harness.Daemon(base / f"d{n}-{i}", base / f"d{n}-{i}.log", env) for i in range(n)]
        try:
            for d in fleet:
                d.start()
            # A fresh bucket and fresh daemons: every text is new to both.
            texts = corpus.take(corpus.memories(args.seed), args.stores + args.lag_samples)
            questions = corpus.take(corpus.queries(args.seed), args.recalls)
            workers = [
                (d, f"fleet-{k}-{i}") for k, d in enumerate(fleet) for i in range(args.clients)
            ]
            before = sum(metrics_commits(d) for d in fleet)
            store = calls(workers, texts[: args.stores], lambda c, a, t: c.store(a, t))
            store.commits = sum(metrics_commits(d) for d in fleet) - before
            recall = calls(workers, questions, lambda c, a, t: c.recall(a, t))
            lag = visibility_lag(fleet, texts[args.stores :], args) if n > 1 else None
        finally:
            for d in fleet:
                d.stop()
    finally:
        s3.stop()
    return {"store": store, "recall": recall, "lag": lag}


def calls(
    workers: list[tuple[harness.Daemon, str]], texts: list[str], call: Callable[..., Any]
) -> Phase:
    """Send ``texts`` round-robin from one thread per worker (a daemon and an agent)."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()

    def work(k: int) -> None:
        nonlocal errors
        daemon, agent = workers[k]
        with MemoryClient(daemon.address, retries=0, timeout=120.0) as c:
            for text in texts[k :: len(workers)]:
                started = time.perf_counter()
                try:
                    call(c, agent, text)
                except MemorydError as e:
                    harness.log(f"{agent}: {e.code.name} {e.details}")
                    with lock:
                        errors += 1
                    continue
                with lock:
                    latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(workers))]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Phase(latencies, errors, time.perf_counter() - started)


def visibility_lag(
    fleet: list[harness.Daemon], texts: list[str], args: argparse.Namespace
) -> dict[str, list[float | None]]:
    """Store on one daemon, poll the next until it answers with the memory: seconds from
    the Store's answer to the first probe that holds it (None: not within LAG_TIMEOUT)."""
    clients = [MemoryClient(d.address, retries=0, timeout=60.0) for d in fleet]
    agent = f"lag-{uuid.uuid4().hex[:8]}"
    lags: dict[str, list[float | None]] = {"Get": [], "Recall": []}
    poll = args.poll_ms / 1000.0
    try:
        for i, text in enumerate(texts):
            writer, reader = clients[i % len(clients)], clients[(i + 1) % len(clients)]
            memory_id = writer.store(agent, text).memory.id
            acked = time.perf_counter()
            by_get = i % 2 == 0
            lag: float | None = None
            while time.perf_counter() - acked < LAG_TIMEOUT:
                if holds(reader, agent, memory_id, text if not by_get else None):
                    lag = time.perf_counter() - acked
                    break
                time.sleep(poll)
            lags["Get" if by_get else "Recall"].append(lag)
    finally:
        for c in clients:
            c.close()
    return lags


def holds(reader: MemoryClient, agent: str, memory_id: str, query: str | None) -> bool:
    """Whether ``reader`` answers with the memory: by Get, or by a Recall of ``query``."""
    if query is None:
        try:
            reader.get(agent, memory_id)
        except NotFound:
            return False
        return True
    got = reader.recall(agent, query, limit=3)
    return any(r.memory.id == memory_id for r in got.results)


def commit_latency(uri: str, options: dict[str, str] | None, n: int) -> list[object]:
    db = lancedb.connect(uri, storage_options=options)
    table = db.create_table("commits", pa.table({"id": ["0"], "at": [datetime.now(UTC)]}))
    seconds = []
    for i in range(n):
        row = pa.table({"id": [str(i + 1)], "at": [datetime.now(UTC)]})
        started = time.perf_counter()
        table.add(row)
        seconds.append(time.perf_counter() - started)
    s = harness.summary_ms(seconds)
    return [s["n"], s["p50"], s["p95"], s["p99"], s["max"]]


def commits_on_s3(base: Path, n: int) -> list[list[object]]:
    """One-row commits on a fresh moto bucket and on a local directory."""
    s3 = S3Server().start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    saved["AWS_REGION"] = os.environ.get("AWS_REGION")
    try:
        env = s3.daemon_env("")
        os.environ.update({k: env[k] for k in saved})
        bucket = s3.new_bucket()
        return [
            ["local directory", *commit_latency(str(base / "commits"), None, n)],
            ["moto S3 on loopback", *commit_latency(f"s3://{bucket}/c", s3.storage_options(), n)],
        ]
    finally:
        s3.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--daemons", default="1,2,3", help="daemon counts to run, comma-separated")
    p.add_argument("--quick", action="store_true", help="a few of everything: correctness only")
    p.add_argument("--stores", type=int, help=f"Stores per daemon count (default {FULL['stores']})")
    p.add_argument("--recalls", type=int, help=f"Recalls per count (default {FULL['recalls']})")
    p.add_argument(
        "--lag-samples",
        type=int,
        help=f"visibility samples per count (default {FULL['lag_samples']})",
    )
    p.add_argument("--poll-ms", type=float, default=5.0, help="pause between two visibility probes")
    p.add_argument("--clients", type=int, default=2, help="client threads per daemon")
    p.add_argument(
        "--commits", type=int, help=f"single-row commits per store (default {FULL['commits']})"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic texts")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()
    sizes = QUICK if args.quick else FULL
    for name, default in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    counts = [int(x) for x in args.daemons.split(",")]

    base = Path(tempfile.mkdtemp(prefix="memoryd-bench-fleet-"))
    started = time.monotonic()
    try:
        runs = {}
        for n in counts:
            harness.log(
                f"{n} daemon(s) on one bucket: {args.stores} Stores, {args.recalls} Recalls"
                + (f", {args.lag_samples} visibility samples" if n > 1 else "")
            )
            runs[n] = run_fleet(n, args, base)
        harness.log(f"{args.commits} single-row commits on a bucket and on a local directory")
        commits = commits_on_s3(base, args.commits)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    harness.log(f"done in {time.monotonic() - started:.0f}s")

    calls_rows, lag_rows = [], []
    for n, run in runs.items():
        for name in ("store", "recall"):
            phase: Phase = run[name]
            s = harness.summary_ms(phase.latencies)
            rate = len(phase.latencies) / phase.wall if phase.wall > 0 else float("nan")
            per_s = f"{phase.commits / phase.wall:.1f}" if name == "store" else ""
            row = [n, name.capitalize(), s["n"], phase.errors, rate, s["p50"], s["p95"], s["p99"]]
            calls_rows.append([*row, per_s])
        for how, lags in (run["lag"] or {}).items():
            seen = [x for x in lags if x is not None]
            s = harness.summary_ms(seen)
            missing = len(lags) - len(seen)
            lag_rows.append([n, how, s["n"], missing, s["p50"], s["p95"], s["p99"], s["max"]])
    cores = os.cpu_count()
    harness.report(
        args,
        "Several daemons over one bucket (bench/fleet.py)",
        [
            f"The moto S3 server, the daemons, the client threads ({args.clients} per daemon) "
            f"and this script all on the same {cores} cores"
            + (" (`--quick`: a correctness run, not figures)" if args.quick else "")
            + ". Unary calls, each client thread its own agent:",
            harness.table(
                [
                    "daemons",
                    "call",
                    "answered",
                    "errors",
                    "calls/s",
                    "p50 ms",
                    "p95 ms",
                    "p99 ms",
                    "table commits/s",
                ],
                calls_rows,
            ),
            "Cross-daemon visibility: Store on one daemon, probe the next every "
            f"{args.poll_ms:g} ms until it answers with the memory; ms from the Store's "
            f"answer (missing: not within {LAG_TIMEOUT:.0f} s):\n\n"
            + harness.table(
                ["daemons", "probe", "samples", "missing", "p50 ms", "p95 ms", "p99 ms", "max ms"],
                lag_rows,
            ),
            "One-row commit (LanceDB `Table.add`), one at a time:\n\n"
            + harness.table(["store", "commits", "p50 ms", "p95 ms", "p99 ms", "max ms"], commits),
        ],
    )


if __name__ == "__main__":
    main()
