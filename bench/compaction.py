"""The compaction after a burst of Stores on a large store: memoryd's against LanceDB's.

Every commit adds a fragment, and the store compacts them after ``storage.compact_every``
commits (lance_store.py). LanceDB's ``optimize`` compacts with Lance's default target of
1,048,576 rows a fragment, so every fragment of a table under a million rows is merged
with the burst's: at 1M memories ~13 GB rewritten to add 200 rows. memoryd's compaction
(``LanceStore._optimize_memories``) merges fragments under ``COMPACT_TARGET_ROWS`` and
leaves the larger ones as they are.

Per ``--rows`` entry: a store of N memories in one agent is written as million.py writes
it (one commit: large fragments), then for each compaction in turn (memoryd's first, then
LanceDB's on the same table) ``--burst`` commits of one new memory each, as a trickle of
Stores commits them, and the compaction is timed in this process: wall seconds, CPU
seconds, bytes written to the disk (/proc/self/io write_bytes), peak RSS above the RSS
before it (VmHWM after resetting it), and the fragments before and after. Both clean up
versions replaced more than 10 s ago, as the daemon does.

Then, with ``--forgets K``, the purge of the fragment LanceDB's compaction just wrote (the
whole table in one fragment, as every store compacted before 6b78f6c holds it): K rows
are deleted, a purge begins, and ``--forget-after`` seconds into it one more row of that
fragment is deleted as the daemon's writer deletes (``_rewrite_lock``, then
``commit_lock``); timed: the purge (wall seconds to its end, bytes written, steps), and how
long that Forget waited. Twice: with the rewrite holding the Forgets off for its whole run
(``LONE_TASK_TRIES`` 0: the code before), and run beside them (the default: the Forget
makes Lance refuse the rewrite, which runs again). LanceDB's compaction merges the table
into one fragment again between the two. Last, steady: the same on the table that purge
left (fragments of about 16,384 rows, as memoryd writes and compacts a store), where K
scattered Forgets dirty up to K fragments.

    ./dev bench compaction.py --rows 20000 --burst 50                # smoke
    ./dev bench compaction.py --rows 100000,1000000 --tmp /work/tmp-compaction
    ./dev bench compaction.py --rows 100000,1000000 --forgets 100 --tmp /work/tmp-compaction
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import harness
import million
import peers

from memoryd.config import load_settings
from memoryd.storage import lance_store
from memoryd.storage.lance_store import KEEP_VERSIONS_SECONDS, LanceStore, id_filter, to_arrow

KEEP = timedelta(seconds=KEEP_VERSIONS_SECONDS)


def write_bytes() -> int:
    return million.proc_io("self")["write_bytes"]


def fragments(store: LanceStore) -> list[int]:
    ds = store._table.to_lance()
    return sorted(f.metadata.physical_rows for f in ds.get_fragments())


def shape(rows: list[int]) -> str:
    small = sum(r < 10_000 for r in rows)
    big = [r for r in rows if r >= 10_000]
    large = [f"{r:,}" for r in big]
    if len(big) > 6:
        large = [f"{len(big)} of {min(big):,}-{max(big):,}"]
    return f"{len(rows)}: " + ", ".join([*large, *([f"{small} under 10k"] if small else [])])


def compact(store: LanceStore, how: str) -> None:
    if how == "memoryd":
        store._optimize_memories(store._table, KEEP)
    else:
        store._table.optimize(cleanup_older_than=KEEP)


def purge(
    store: LanceStore, args: argparse.Namespace, rng: random.Random, how: str
) -> dict[str, Any]:
    """Delete ``args.forgets`` rows, purge (one step after another, as the compactor does),
    and delete one more row ``args.forget_after`` s into it as the writer does."""
    ids = store._table.to_lance().to_table(columns=["id"]).column("id").to_pylist()
    picks = rng.sample(ids, args.forgets + 1)
    store._table.delete(id_filter(picks[:-1]))
    store._deleting_commits += 1
    lance_store.LONE_TASK_TRIES = 0 if how == "held" else TRIES
    steps = 0
    refused = store.lone_refusals
    written = write_bytes()
    started = time.perf_counter()

    def run_purge() -> None:
        nonlocal steps
        while True:
            with store._rewrite_lock:
                store._optimize_memories(store._table, KEEP, purge_found=steps == 0)
            steps += 1
            if store._purging is None and not store._more_to_compact:
                return
            # The daemon's next step follows at the writer's next turn, after the deletes it
            # holds (Python's Lock would give it back to this thread at once).
            time.sleep(0.05)

    worker = threading.Thread(target=run_purge)
    worker.start()
    time.sleep(args.forget_after)
    asked = time.perf_counter()
    with store._rewrite_lock, store.commit_lock:  # the writer's delete (_commit)
        waited = time.perf_counter() - asked
        store._table.delete(id_filter(picks[-1:]))
    store._deleting_commits += 1
    worker.join()
    return {
        "s": time.perf_counter() - started,
        "written": write_bytes() - written,
        "steps": steps,
        "refused": store.lone_refusals - refused,
        "forget_waited_s": waited,
        "after": shape(fragments(store)),
    }


TRIES = lance_store.LONE_TASK_TRIES
# held and beside: the purge of one large fragment; steady: of a table in fragments of
# about COMPACT_TARGET_ROWS (as memoryd writes and compacts it, and as the purges before
# left it), its Forgets scattered over them
PURGES = ("held", "beside", "steady")


def run(args: argparse.Namespace, n: int, pool: million.Pool, settings: Any) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix=f"compaction-{n}-", dir=args.tmp))
    try:
        built, _ = million.build_store(base, peers.Layout(1, n), pool, settings, args.seed)
        harness.log(f"{n:,} rows written in {built:.0f}s")
        model = peers.model_files()[1].name
        store = LanceStore(
            str(base / "lancedb"),
            table=settings.storage.table,
            model_name=model,
            dim=pool.vectors.shape[1],
        )
        schema = store.schema
        out: dict[str, Any] = {"rows": n, "build_s": built}
        for k, how in enumerate(("memoryd", "lancedb")):
            burst = million.rows(peers.Layout(1, args.burst), pool, settings, args.seed + 1 + k)
            for row in burst:  # one commit a Store, as a trickle of Stores commits
                store._table.add(to_arrow(schema, [row]))
            before = fragments(store)
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
            rss = harness.proc_status(os.getpid())["VmRSS"]
            written = write_bytes()
            cpu = time.process_time()
            started = time.perf_counter()
            compact(store, how)
            out[how] = {
                "s": time.perf_counter() - started,
                "cpu_s": time.process_time() - cpu,
                "written": write_bytes() - written,
                "peak_rss_above": harness.proc_status(os.getpid())["VmHWM"] - rss,
                "before": shape(before),
                "after": shape(fragments(store)),
            }
            harness.log(f"{n:,} rows, {how}: {out[how]}")
        rng = random.Random(args.seed)
        for how in PURGES if args.forgets else ():
            if how == "beside":  # the whole table in one fragment again, as LanceDB compacts
                store._table.optimize(cleanup_older_than=KEEP)
            out[f"purge {how}"] = purge(store, args, rng, how)
            harness.log(f"{n:,} rows, purge {how}: {out[f'purge {how}']}")
        return out
    finally:
        if not args.keep_data:
            shutil.rmtree(base, ignore_errors=True)


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    lines = [
        f"A compaction after {args.burst} commits of one memory each, on a store of N "
        "memories in one agent (written in one commit):",
        "",
        "| N | compaction | seconds | CPU s | written | peak RSS above | fragments before"
        " | fragments after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for how in ("memoryd", "lancedb"):
            m = r[how]
            lines.append(
                f"| {r['rows']:,} | {how} | {m['s']:.2f} | {m['cpu_s']:.2f} "
                f"| {m['written'] / 2**20:,.0f} MiB | {m['peak_rss_above'] / 2**20:,.0f} MiB "
                f"| {m['before']} | {m['after']} |"
            )
    if args.forgets:
        lines += [
            "",
            f"The purge of that one fragment after {args.forgets} Forgets, and one more Forget "
            f"{args.forget_after:g} s into it (held: the rewrite holds the Forgets off, the "
            "code before; beside: it runs beside them, refused and run again when one lands "
            "on its fragment; steady: the same Forgets on the table the purge before left, "
            "in fragments of about 16,384 rows):",
            "",
            "| N | purge | seconds | written | steps | rewrites refused | the Forget waited s "
            "| fragments after |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in results:
            for how in PURGES:
                m = r[f"purge {how}"]
                lines.append(
                    f"| {r['rows']:,} | {how} | {m['s']:.1f} | {m['written'] / 2**20:,.0f} MiB "
                    f"| {m['steps']} | {m['refused']} | {m['forget_waited_s']:.3f} "
                    f"| {m['after']} |"
                )
    return ["\n".join(lines)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", default="100000", help="store sizes, comma separated (1M: ~13 GB)")
    p.add_argument("--burst", type=int, default=200, help="commits of one memory before each")
    p.add_argument("--forgets", type=int, default=0, help="then purge after this many deletes")
    p.add_argument("--forget-after", type=float, default=2.0, help="s into the purge: a Forget")
    p.add_argument("--pool", type=int, default=8000, help="texts embedded for the vectors")
    p.add_argument("--tmp", type=Path, help="where the stores are written (default: $TMPDIR)")
    p.add_argument("--keep-data", action="store_true", help="keep the stores written")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=million.OUT, help="the embedded pool's cache")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()
    settings = load_settings(None, {})
    pool = million.load_pool(args.pool, args.seed, settings, args.cache)
    sizes = [peers.parse_layouts(s)[0].total for s in args.rows.split(",") if s.strip()]
    if args.tmp:
        args.tmp.mkdir(parents=True, exist_ok=True)
    results = [run(args, n, pool, settings) for n in sizes]
    harness.report(args, "The compaction after a burst of Stores", report(results, args))


if __name__ == "__main__":
    main()
