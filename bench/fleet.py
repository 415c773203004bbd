"""Several daemons over one bucket: Store and Recall throughput and latency with 1, 2 and 3
daemons on a local S3-compatible server (moto in server mode, the test server of
tests/support/memoryd_testing/s3.py), and the commit latency of one row on that server
against a local directory.

For each daemon count it starts a moto server, a bucket and that many daemons on it (each
its own data dir, ``storage.uri = s3://bucket/fleet``), then ``--clients`` threads per
daemon send unary Stores (each its own agent, texts of the synthetic corpus) until
``--stores`` were answered in all, then Recalls of the corpus questions for the same
agents. A Store's latency includes embedding; the commit figures below isolate LanceDB:
``--commits`` single-row ``Table.add`` calls on the moto bucket and on a temporary
directory, one at a time.

What this does not measure: cross-daemon visibility lag (daemons following each other's
writes is another part of issue #14), and anything a real object store adds (moto on
loopback answers in about a millisecond, S3 in tens). On a 2-core machine the daemons,
the clients and moto share the same cores: more daemons add no CPU, so the figures show
the cost of sharing one table (commit conflicts, rebases), not a fleet's capacity.

    ./dev bench fleet.py --daemons 1,2 --stores 40 --recalls 20 --commits 20   # quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import corpus
import harness
import lancedb
import pyarrow as pa
from memoryd_client import MemoryClient, MemorydError
from memoryd_testing.s3 import S3Server


def run_fleet(
    s3: S3Server, daemons: int, args: argparse.Namespace, base: Path
) -> list[list[object]]:
    uri = f"s3://{s3.new_bucket()}/fleet"
    env = s3.daemon_env(uri)
    fleet = [
        harness.Daemon(base / f"d{daemons}-{i}", base / f"d{daemons}-{i}.log", env)
        for i in range(daemons)
    ]
    try:
        for d in fleet:
            d.start()
        texts = corpus.take(corpus.memories(args.seed), args.stores)
        questions = corpus.take(corpus.queries(args.seed), args.recalls)
        workers = [(d, f"fleet-{n}-{i}") for n, d in enumerate(fleet) for i in range(args.clients)]
        store = calls(workers, texts, lambda c, agent, text: c.store(agent, text))
        recall = calls(workers, questions, lambda c, agent, text: c.recall(agent, text))
    finally:
        for d in fleet:
            d.stop()
    rows = []
    for name, (latencies, errors, wall) in (("Store", store), ("Recall", recall)):
        s = harness.summary_ms(latencies)
        rate = len(latencies) / wall if wall > 0 else float("nan")
        rows.append([daemons, name, s["n"], errors, rate, s["p50"], s["p95"], s["p99"]])
    return rows


def calls(
    workers: list[tuple[harness.Daemon, str]], texts: list[str], call: Any
) -> tuple[list[float], int, float]:
    """Send ``texts`` round-robin from one thread per worker; (latencies, errors, wall)."""
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
                except MemorydError:
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
    return latencies, errors, time.perf_counter() - started


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--daemons", default="1,2,3", help="daemon counts to run, comma-separated")
    p.add_argument("--stores", type=int, default=600, help="Stores per run, all daemons")
    p.add_argument("--recalls", type=int, default=600, help="Recalls per run, all daemons")
    p.add_argument("--clients", type=int, default=2, help="client threads per daemon")
    p.add_argument("--commits", type=int, default=200, help="single-row commits per store")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic texts")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    base = Path(tempfile.mkdtemp(prefix="memoryd-bench-fleet-"))
    s3 = S3Server().start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    try:
        rows: list[list[object]] = []
        for n in (int(x) for x in args.daemons.split(",")):
            harness.log(
                f"{n} daemon(s) on one bucket: {args.stores} Stores, {args.recalls} Recalls"
            )
            rows += run_fleet(s3, n, args, base)
        harness.log(f"{args.commits} single-row commits on the bucket and on a local directory")
        env = s3.daemon_env("")
        os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
        os.environ["AWS_REGION"] = env["AWS_REGION"]
        bucket = s3.new_bucket()
        commits = [
            ["local directory", *commit_latency(str(base / "commits"), None, args.commits)],
            [
                "moto S3 on loopback",
                *commit_latency(f"s3://{bucket}/c", s3.storage_options(), args.commits),
            ],
        ]
    finally:
        s3.stop()
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
        shutil.rmtree(base, ignore_errors=True)
    harness.report(
        args,
        "Several daemons over one bucket (bench/fleet.py)",
        [
            harness.table(
                ["daemons", "call", "answered", "errors", "calls/s", "p50 ms", "p95 ms", "p99 ms"],
                rows,
            ),
            "One-row commit (LanceDB `Table.add`), one at a time:\n\n"
            + harness.table(["store", "commits", "p50 ms", "p95 ms", "p99 ms", "max ms"], commits),
        ],
    )


if __name__ == "__main__":
    main()
