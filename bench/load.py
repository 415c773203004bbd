"""Concurrent load from many agents (grpc.aio), closed loop, for a fixed duration.

``--clients`` clients, each with its own channel, each issuing one op after another
(``--via unary``: Recall/Store RPCs; ``--via stream``: one Stream RPC per client with
``--pipeline`` ops in flight on it, matched by request id). Each op is a Recall or a
Store drawn by ``--mix`` (recall/store percent) for an agent drawn at random among
``--agents``; Recall queries are all distinct (cache misses) unless ``--query-pool`` is
set, Stores are all distinct new texts. Before the run, ``--memories`` are preloaded,
spread round-robin over the agents, through concurrent Stream stores.

Reported per op: completed count, errors by status code, p50/p95/p99 latency and
throughput over the measured window (``--duration`` after ``--warmup``), plus the daemon's
RSS, CPU and Stats.index_bytes, and this load generator's own CPU (it shares the cores).

``--scenario stores``: 16 Stream clients storing distinct texts (mix 0/100) as fast as
the daemon acknowledges them; afterwards every acknowledged store is checked: after a
SIGKILL and restart of the daemon (``--verify kill``, the default when the script
started the daemon), each agent's List total must equal what was acknowledged and every
acknowledged id must be readable with Get.

    python bench/load.py                                   # 8 clients, 90/10, unary
    python bench/load.py --clients 32 --via stream --pipeline 4
    python bench/load.py --scenario stores
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import corpus
import harness
from memoryd_client import AsyncMemoryClient, MemorydError, pb


@dataclass
class Sample:
    op: str
    done_at: float
    seconds: float
    error: str = ""  # status code name
    outcome: str = ""  # for stores: CREATED / DUPLICATE


@dataclass
class Run:
    samples: list[Sample] = field(default_factory=list)
    acked: list[harness.Acked] = field(default_factory=list)
    window: tuple[float, float] = (0.0, 0.0)
    client_cpu: float = 0.0
    daemon_cpu: float | None = None


OP_HEADERS = ("op", "count", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms", "ops/s", "outcomes")
SETUP_HEADERS = (
    "clients", "via", "pipeline", "mix", "agents", "rows in store", "index MiB",
    "daemon RSS MiB", "daemon peak RSS MiB", "daemon CPU", "load-gen CPU",
)  # fmt: skip
PRELOAD_HEADERS = (
    "preloaded", "agents", "created", "duplicates", "errors", "seconds", "stores/s",
)  # fmt: skip
VERIFY_HEADERS = (
    "verified after", "acknowledged", "found by Get", "missing", "text differs", "agents",
    "List totals wrong", "Get seconds", "first problems",
)  # fmt: skip

# One op: (agent, text) -> (error code name or "", the StoreResponse of a store or None).
# A failed RPC raises MemorydError instead.
Op = Callable[[str, str], Awaitable[tuple[str, pb.StoreResponse | None]]]


def unary_ops(client: AsyncMemoryClient, limit: int) -> dict[str, Op]:
    async def recall(agent: str, query: str) -> tuple[str, pb.StoreResponse | None]:
        await client.recall(agent, query, limit=limit)
        return "", None

    async def store(agent: str, text: str) -> tuple[str, pb.StoreResponse | None]:
        return "", await client.store(agent, text)

    return {"recall": recall, "store": store}


def stream_ops(session: harness.StreamSession, limit: int) -> dict[str, Op]:
    async def recall(agent: str, query: str) -> tuple[str, pb.StoreResponse | None]:
        r = await session.call(recall=pb.RecallRequest(agent_id=agent, query=query, limit=limit))
        return (r.error.code_name if r.WhichOneof("result") == "error" else ""), None

    async def store(agent: str, text: str) -> tuple[str, pb.StoreResponse | None]:
        r = await session.call(store=pb.StoreRequest(agent_id=agent, text=text))
        if r.WhichOneof("result") == "error":
            return r.error.code_name, None
        return "", r.store

    return {"recall": recall, "store": store}


async def drive(
    args: argparse.Namespace, target: harness.Target, agents: list[str], new_texts: Iterator[str]
) -> Run:
    """Run the clients for warm-up + duration; ``new_texts`` feeds the stores."""
    run = Run()
    recall_share = args.recall_percent / 100.0
    queries: Iterator[str]
    if args.query_pool:
        queries = itertools.cycle(corpus.take(corpus.queries(args.seed), args.query_pool))
    else:
        queries = corpus.queries(args.seed)
    start = time.perf_counter()
    measure_from = start + args.warmup
    stop_at = measure_from + args.duration

    async def worker(
        ops: dict[str, Op], rng: random.Random, alive: Callable[[], bool] = lambda: True
    ) -> None:
        while time.perf_counter() < stop_at and alive():
            agent = agents[rng.randrange(len(agents))]
            kind = "recall" if rng.random() < recall_share else "store"
            text = next(queries) if kind == "recall" else next(new_texts)
            stored = None
            t0 = time.perf_counter()
            try:
                error, stored = await ops[kind](agent, text)
            except MemorydError as e:
                error = e.code.name
            t1 = time.perf_counter()
            outcome = ""
            if stored is not None:
                outcome = pb.StoreOutcome.Name(stored.outcome).removeprefix("STORE_OUTCOME_")
                if stored.outcome == pb.STORE_OUTCOME_CREATED:
                    run.acked.append(harness.Acked(agent, stored.memory.id, text))
            run.samples.append(Sample(kind, t1, t1 - t0, error, outcome))

    clients = [
        AsyncMemoryClient(target.address, retries=0, timeout=60.0) for _ in range(args.clients)
    ]
    sessions: list[harness.StreamSession] = []
    workers = []
    for i, c in enumerate(clients):
        if args.via == "stream":
            session = harness.StreamSession(c)
            sessions.append(session)
            ops = stream_ops(session, args.limit)
            for j in range(args.pipeline):
                rng = random.Random(f"{args.seed}-{i}-{j}")
                workers.append(worker(ops, rng, alive=lambda s=session: s.broken is None))
        else:
            workers.append(worker(unary_ops(c, args.limit), random.Random(f"{args.seed}-{i}")))

    async def mark_window() -> None:
        await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
        cpu0, dcpu0 = time.process_time(), harness.cpu_seconds(target.pid)
        await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
        run.client_cpu = time.process_time() - cpu0
        dcpu1 = harness.cpu_seconds(target.pid)
        if dcpu0 is not None and dcpu1 is not None:
            run.daemon_cpu = dcpu1 - dcpu0

    try:
        await asyncio.gather(mark_window(), *workers)
    finally:
        for s in sessions:
            await s.close()
        for c in clients:
            await c.close()
    run.window = (measure_from, stop_at)
    return run


def op_rows(run: Run, duration: float) -> list[list[object]]:
    lo, hi = run.window
    by_op: dict[str, list[Sample]] = defaultdict(list)
    for s in run.samples:
        if lo <= s.done_at <= hi:
            by_op[s.op].append(s)
            by_op["all"].append(s)
    rows: list[list[object]] = []
    kinds = [op for op in ("recall", "store") if by_op.get(op)]
    for op in [*kinds, "all"] if len(kinds) > 1 else kinds:
        samples = by_op[op]
        ok = [s.seconds for s in samples if not s.error]
        errors = Counter(s.error for s in samples if s.error)
        outcomes = Counter(s.outcome for s in samples if s.outcome)
        lat = harness.summary_ms(ok)
        notes = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        rows.append(
            [
                op,
                len(samples),
                ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "0",
                lat["p50"],
                lat["p95"],
                lat["p99"],
                lat["max"],
                f"{len(samples) / duration:.1f}",
                notes,
            ]
        )
    return rows


async def list_totals(address: str, agents: list[str]) -> Counter[str]:
    """Each agent's List total_size."""
    async with AsyncMemoryClient(address, timeout=120.0) as c:
        return Counter({a: (await c.list(a, page_size=1)).total_size for a in agents})


async def verify(address: str, acked: list[harness.Acked], before: Counter[str]) -> list[Any]:
    """Every acknowledged store readable with Get; each agent's List total grown by exactly
    the stores acknowledged as created during the run."""
    per_agent: Counter[str] = Counter(before)
    per_agent.update(a.agent_id for a in acked)
    missing: list[str] = []
    wrong_text = 0
    sem = asyncio.Semaphore(32)
    async with AsyncMemoryClient(address, timeout=120.0) as c:

        async def check(a: harness.Acked) -> None:
            nonlocal wrong_text
            async with sem:
                try:
                    m = await c.get(a.agent_id, a.id)
                except MemorydError as e:
                    missing.append(f"{a.id} ({e.code.name})")
                    return
                if m.text != a.text:
                    wrong_text += 1

        started = time.perf_counter()
        await asyncio.gather(*(check(a) for a in acked))
        get_seconds = time.perf_counter() - started
        mismatched = []
        for agent, expected in sorted(per_agent.items()):
            total = (await c.list(agent, page_size=1)).total_size
            if total != expected:
                mismatched.append(f"{agent}: listed {total}, expected {expected}")
    return [len(acked), len(acked) - len(missing), len(missing), wrong_text,
            len(per_agent), len(mismatched), f"{get_seconds:.1f}",
            "; ".join((missing + mismatched)[:5])]  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scenario", choices=("mixed", "stores"), default="mixed")
    p.add_argument("--clients", type=int, help="concurrent clients (default 8; stores: 16)")
    p.add_argument("--mix", help="recall/store percent (default 90/10; stores: 0/100)")
    p.add_argument("--via", choices=("unary", "stream"), help="default unary; stores: stream")
    p.add_argument("--pipeline", type=int, default=1, help="stream: ops in flight per client")
    p.add_argument("--duration", type=float, default=30.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of load before measuring")
    p.add_argument("--memories", type=int, help="preloaded in total (default 1000; stores: 0)")
    p.add_argument("--agents", type=int, default=10, help="agent namespaces to spread over")
    p.add_argument("--limit", type=int, default=5, help="Recall limit")
    p.add_argument("--query-pool", type=int, default=0, help="cycle N queries (0: all distinct)")
    p.add_argument(
        "--verify",
        choices=("kill", "restart", "live", "none"),
        help="stores: check acknowledged stores after SIGKILL+restart, SIGTERM+restart, "
        "on the live daemon, or not (default kill; live with --address)",
    )
    harness.add_load_args(p)
    harness.add_common_args(p)
    args = p.parse_args()
    stores = args.scenario == "stores"
    args.clients = args.clients or (16 if stores else 8)
    args.mix = args.mix or ("0/100" if stores else "90/10")
    args.via = args.via or ("stream" if stores else "unary")
    args.memories = args.memories if args.memories is not None else (0 if stores else 1000)
    args.verify = args.verify or ("none" if not stores else "live" if args.address else "kill")
    try:
        recall_pct, store_pct = (float(x) for x in args.mix.split("/"))
    except ValueError:
        p.error("--mix is RECALL/STORE percent, e.g. 90/10")
    if recall_pct + store_pct != 100 or min(recall_pct, store_pct) < 0:
        p.error("--mix percentages must be >= 0 and add up to 100")
    if args.pipeline < 1 or (args.pipeline > 1 and args.via != "stream"):
        p.error("--pipeline K >= 1, and K > 1 needs --via stream")
    if args.verify in ("kill", "restart") and args.address:
        p.error("--verify kill/restart needs a daemon started by this script (no --address)")
    args.recall_percent = recall_pct

    agents = [f"bench-load-{i:05d}" for i in range(args.agents)]
    texts = corpus.memories(args.seed)  # preload first, then the run's stores: all distinct
    preload_texts = corpus.take(texts, args.memories)
    sections = []
    with harness.target_from_args(args) as target:
        if args.memories:
            harness.log(f"preloading {args.memories} memories over {args.agents} agents")
            loaded = harness.load(
                args, target.address, harness.agents_round_robin(agents, preload_texts), "preloaded"
            )
            preload_row = [args.memories, args.agents, loaded.created, loaded.duplicates]
            preload_row += [dict(loaded.errors) or 0, f"{loaded.seconds:.1f}"]
            preload_row += [f"{loaded.rate:.0f}"]
            sections.append(harness.table(PRELOAD_HEADERS, [preload_row]))
        # On a kept --data-dir the texts stored by earlier runs are skipped: stores stay new.
        corpus.take(texts, max(0, harness.rows_in_store(target.address) - args.memories))
        harness.log(
            f"{args.scenario}: {args.clients} clients via {args.via} (pipeline "
            f"{args.pipeline}), mix {args.mix}, {args.warmup:g}s warm-up + {args.duration:g}s"
        )
        before = asyncio.run(list_totals(target.address, agents)) if args.verify != "none" else None
        run = asyncio.run(drive(args, target, agents, texts))
        st = harness.stats(target.address, agents[0])
        proc = harness.proc_status(target.pid)
        daemon_cpu = (
            "n/a" if run.daemon_cpu is None else f"{100 * run.daemon_cpu / args.duration:.0f}%"
        )
        setup_row = [args.clients, args.via, args.pipeline, args.mix, args.agents]
        setup_row += [st.store_rows, harness.mib(st.index_bytes)]
        setup_row += [harness.mib(proc.get("VmRSS")), harness.mib(proc.get("VmHWM"))]
        setup_row += [daemon_cpu, f"{100 * run.client_cpu / args.duration:.0f}%"]
        sections[:0] = [
            harness.table(OP_HEADERS, op_rows(run, args.duration)),
            harness.table(SETUP_HEADERS, [setup_row]),
        ]
        if before is not None:
            sections.append(verify_section(args, target, run, before))
    title = (
        "Sustained Store throughput and durability"
        if stores
        else f"Load: {args.clients} clients, {args.mix} recall/store via {args.via}"
    )
    harness.report(args, title, sections)


def verify_section(
    args: argparse.Namespace, target: harness.Target, run: Run, before: Counter[str]
) -> str:
    restart = ""
    if args.verify in ("kill", "restart"):
        daemon = target.daemon
        assert daemon is not None
        kill = args.verify == "kill"
        harness.log(f"{'SIGKILL' if kill else 'SIGTERM'} to memoryd, then restart")
        code = daemon.stop(kill=kill)
        daemon.start()
        target.address = daemon.address
        target.pid = daemon.pid
        s = daemon.startup()
        restart = (
            f"exit {code}, restarted: SERVING after {s.get('serving_s', float('nan')):.2f}s "
            f"with {s.get('store_rows', float('nan')):.0f} rows"
        )
    harness.log(f"verifying {len(run.acked)} acknowledged stores")
    row = asyncio.run(verify(target.address, run.acked, before))
    return harness.table(
        VERIFY_HEADERS, [[f"{args.verify} ({restart})" if restart else args.verify, *row]]
    )


if __name__ == "__main__":
    main()
