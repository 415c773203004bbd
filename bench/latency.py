"""One agent, one synchronous client: the latency of Store and Recall, call by call.

Preloads ``--memories`` distinct synthetic memories into one agent (through concurrent
Stream stores, which is not what is measured), then times with ``time.perf_counter``
around each call of the sync Python client (``MemoryClient``), one call at a time:

- Store: ``--calls`` new distinct memories (the index grows by as many);
- Recall, cache miss: ``--calls`` distinct queries, so every query is embedded;
- Recall, cached: one query ``--calls`` times, so its embedding comes from the cache.

Each series is preceded by ``--warmup`` untimed calls of the same kind. The daemon's
embedding cache keys on the query text; queries of a run never repeat, but re-running
with ``--address`` against the same daemon needs another ``--seed`` for true misses.

    python bench/latency.py                    # 1,000 memories, 1,000 calls of each
    python bench/latency.py --memories 10000 --ops recall-miss
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable

import corpus
import harness
from memoryd_client import MemoryClient, MemorydError, pb

OPS = ("store", "recall-miss", "recall-cached")
LATENCY_HEADERS = (
    "op", "memories", "calls", "p50 ms", "p95 ms", "p99 ms", "mean ms", "max ms", "outcomes",
)  # fmt: skip
CONTEXT_HEADERS = (
    "preload stores/s", "preload created", "preload duplicates", "memories at end",
    "index MiB", "daemon RSS MiB", "daemon peak RSS MiB", "SERVING after s",
)  # fmt: skip


def timed(calls: list[Callable[[], object]]) -> tuple[list[float], Counter[str]]:
    """Run each call once, in order; per-call seconds and outcome counts."""
    seconds: list[float] = []
    outcomes: Counter[str] = Counter()
    for call in calls:
        t0 = time.perf_counter()
        try:
            r = call()
        except MemorydError as e:
            seconds.append(time.perf_counter() - t0)
            outcomes[e.code.name] += 1
            continue
        seconds.append(time.perf_counter() - t0)
        if isinstance(r, pb.StoreResponse):
            outcomes[pb.StoreOutcome.Name(r.outcome).removeprefix("STORE_OUTCOME_")] += 1
        elif isinstance(r, pb.RecallResponse):
            outcomes["hits" if r.results else "no hits"] += 1
    return seconds, outcomes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=1000, help="preloaded into the agent")
    p.add_argument("--calls", type=int, default=1000, help="timed calls of each kind")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls before each series")
    p.add_argument("--limit", type=int, default=5, help="Recall limit (results per query)")
    p.add_argument("--agent", default="bench-latency", help="the agent id")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated series to run, of {OPS}")
    harness.add_load_args(p)
    harness.add_common_args(p)
    args = p.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    if unknown := set(ops) - set(OPS):
        p.error(f"unknown --ops {sorted(unknown)}; choose from {OPS}")

    stream = corpus.memories(args.seed)
    preload = corpus.take(stream, args.memories)
    queries = corpus.queries(args.seed)
    miss = corpus.take(queries, args.warmup + args.calls)
    repeated = next(queries)

    with harness.target_from_args(args) as target:
        # On a kept --data-dir the texts stored by earlier runs are skipped: stores stay new.
        corpus.take(stream, max(0, harness.rows_in_store(target.address) - args.memories))
        new_texts = corpus.take(stream, args.warmup + args.calls)
        harness.log(f"preloading {args.memories} memories into {args.agent}")
        loaded = harness.load(args, target.address, [(args.agent, t) for t in preload], "preloaded")
        harness.log(f"preloaded: {loaded.summary()}")
        rows = []
        with MemoryClient(target.address, timeout=60.0, retries=0) as c:
            agent, w, limit = args.agent, args.warmup, args.limit
            series: dict[str, list[Callable[[], object]]] = {
                "store": [lambda t=t: c.store(agent, t) for t in new_texts],
                "recall-miss": [lambda q=q: c.recall(agent, q, limit=limit) for q in miss],
                "recall-cached": [lambda: c.recall(agent, repeated, limit=limit)]
                * (w + args.calls),
            }
            for op in ops:
                before = c.stats(agent).total
                harness.log(f"{op}: {w} warm-up + {args.calls} timed calls ({before} memories)")
                timed(series[op][:w])
                seconds, outcomes = timed(series[op][w:])
                s = harness.summary_ms(seconds)
                outcome_text = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
                rows.append(
                    [op, before, s["n"], s["p50"], s["p95"], s["p99"], s["mean"], s["max"],
                     outcome_text]
                )  # fmt: skip
            st = c.stats(agent)
        proc = harness.proc_status(target.pid)
        startup = target.daemon.startup() if target.daemon else {}

    latency = harness.table(LATENCY_HEADERS, rows)
    context_row = [f"{loaded.rate:.0f}", loaded.created, loaded.duplicates, st.total]
    context_row += [harness.mib(st.index_bytes)]
    context_row += [harness.mib(proc.get("VmRSS")), harness.mib(proc.get("VmHWM"))]
    context_row += [startup.get("serving_s", float("nan"))]
    context = harness.table(CONTEXT_HEADERS, [context_row])
    harness.report(args, "Store and Recall latency, one agent, sync client", [latency, context])


if __name__ == "__main__":
    main()
