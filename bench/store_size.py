"""How big a store grows: bytes on disk per memory, and LanceDB's version files.

Starts a daemon with the default settings on a temporary data dir, stores ``--memories``
texts of the synthetic corpus for one agent through the Stream RPC (``--clients 1
--pipeline 1`` by default: one Store at a time, one LanceDB commit each, the case that
used to leave a version file per Store behind), then reads the data dir: right after the
last Store, again once the daemon has been idle long enough to drop old versions
(``storage.lance_store``: a compaction a second after the burst, then a cleanup once the
versions it kept are 10 s old), and after a restart. Disk use is what ``du`` counts
(allocated blocks); the memories' table, the access log and the rest are shown apart.

    ./dev bench store_size.py                        # 2,000 memories
    ./dev bench store_size.py --memories 200 --wait 90    # quick
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

TABLE = "memories"  # storage.table's default, under <data_dir>/lancedb (storage.uri "")


def disk_bytes(path: Path) -> int:
    """Allocated bytes under ``path``, as ``du`` counts them."""
    if not path.exists():
        return 0
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in files)


def reading(data_dir: Path, stored: int, when: str) -> list[object]:
    table = data_dir / "lancedb" / f"{TABLE}.lance"
    versions = len(list((table / "_versions").glob("*.manifest")))
    fragments = len(list((table / "data").glob("*.lance")))
    total = disk_bytes(data_dir)
    table_bytes = disk_bytes(table)
    return [
        when,
        stored,
        versions,
        fragments,
        harness.mib(table_bytes),
        harness.mib(total - table_bytes),
        harness.mib(total),
        f"{total / max(stored, 1) / 1024:.1f}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=2000, help="memories to store")
    p.add_argument("--clients", type=int, default=1, help="Streams storing at once")
    p.add_argument("--pipeline", type=int, default=1, help="Stores in flight per Stream")
    p.add_argument("--wait", type=float, default=180, help="seconds to wait for the cleanup")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic texts")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    base = Path(tempfile.mkdtemp(prefix="memoryd-bench-size-"))
    data_dir = base / "data"
    daemon = harness.Daemon(data_dir, base / "stderr.log")
    rows = []
    try:
        daemon.start()
        texts = corpus.take(corpus.memories(args.seed), args.memories)
        harness.log(f"storing {len(texts)} memories, {args.clients}x{args.pipeline} in flight")
        loaded = asyncio.run(
            harness.bulk_store(
                daemon.address,
                [("bench-size", t) for t in texts],
                clients=args.clients,
                pipeline=args.pipeline,
            )
        )
        harness.log(f"stored: {loaded.summary()}")
        stored = loaded.created
        rows.append(reading(data_dir, stored, "right after the last Store"))
        table = data_dir / "lancedb" / f"{TABLE}.lance"
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            if len(list((table / "_versions").glob("*.manifest"))) <= 1:
                break
            time.sleep(2)
        waited = args.wait - max(0.0, deadline - time.monotonic())
        rows.append(reading(data_dir, stored, f"idle, {waited:.0f} s later"))
        daemon.stop()
        daemon.start()
        rows.append(reading(data_dir, stored, "after a restart"))
    finally:
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
    headers = [
        "when", "memories", "version files", "data files", "table MiB", "other MiB",
        "data dir MiB", "KiB per memory",
    ]  # fmt: skip
    harness.report(
        args,
        f"Store size, {args.memories} memories, default settings",
        [harness.table(headers, rows)],
    )


if __name__ == "__main__":
    main()
