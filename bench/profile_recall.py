"""Where one Recall's time goes, end to end: client stub, transport, interceptors, each
stage of the daemon's pipeline, response building (issue #17).

The daemon runs as usual but started through this script (``--serve``), which wraps the
functions of each stage with a wall-clock timer before ``memoryd serve`` begins; nothing
in memoryd changes. Each Recall the daemon answers leaves one record of its stages; the
records are written out when the daemon stops. The client side is timed here: the round
trip of the sync Python client, a Health.Check round trip on the same server (the floor
of any unary call there), and the client's own protobuf work on the same messages.

    round trip (client)              MemoryClient.recall, perf_counter around the call
      client stub                    building the request, serialising it, parsing the
                                     answer (in process, on the same messages)
      transport                      the rest outside the handler: HTTP/2 both ways, grpc's
                                     C core and the asyncio server, the server's protobuf
      interceptors                   metrics, error mapping, auth, limits, decoding: the
                                     outermost wrapper's time less the servicer's
      servicer                       MemoryServicer.Recall
        request conversion           api.convert.recall_request
        policy and validation        MemoryService.access, validate.recall_request,
                                     Access.readable
        query embedding              MemoryService._ranked less Retriever.recall: the
                                     hand-off to the embedder's thread, the model (a miss)
                                     or its cache
          model in the worker        a miss: OnnxEmbedder.embed_full's own run, timed on
                                     the embedder's thread
          hand-off                   the rest: the queue, two thread wake-ups, the cache
          beside the model           a miss: Retriever.prepare (time expression, query
                                     analysis, BM25 leg), run while the model runs
        candidates                   HotIndex.candidates, of which
          query analysis             Analyzer.query_terms (language, tokens, stems); a
                                     miss: within "beside the model"
          vector leg                 HotIndex._vector_topk (exact scan, q8 or HNSW)
          BM25 leg                   bm25_touched + topk_scores; a miss: as query analysis
          assembly                   the rest: union, gathering vectors, exact scores, ranks
        fusion                       Retriever._fuse
        rerank                       LateInteractionReranker.score, of which
          MaxSim                     the maxsim kernel
        boosts, order, hits          the rest of Retriever.recall
        access counts                Repository.touch
        response building            api.convert.recall_response
        other                        servicer less the stages above

Means and p50s per stage, and each stage's share of the mean round trip, separately for
Recalls whose query embedding misses the daemon's cache (every query distinct) and hits
it (the same queries again). ``--cprofile N`` also lists the N functions with the most
own time inside Recall handlers on the daemon's event loop (cProfile switched on for
each handler's span, so its overhead inflates every figure: read it for the ranking).

    ./dev bench profile_recall.py                      # 10,000 memories, 300 queries
    ./dev bench profile_recall.py --memories 300 --queries 30   # a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextvars
import functools
import inspect
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

OUT_ENV = "PROFILE_RECALL_OUT"
CPROFILE_ENV = "PROFILE_RECALL_CPROFILE"

# (owner module, attribute path, stage). Order is the order of the report.
TIMED = (
    ("memoryd.api.servicer", "MemoryServicer.Recall", "servicer"),
    ("memoryd.api.convert", "recall_request", "request conversion"),
    ("memoryd.core.service", "MemoryService.access", "policy and validation"),
    ("memoryd.core.validate", "recall_request", "policy and validation"),
    ("memoryd.core.policy", "Access.readable", "policy and validation"),
    ("memoryd.core.service", "MemoryService._ranked", "ranked"),
    ("memoryd.core.retrieval", "Retriever.prepare", "beside the model"),
    ("memoryd.storage.hot_index", "HotIndex.candidates", "candidates"),
    ("memoryd.storage.lexical", "Analyzer.query_terms", "query analysis"),
    ("memoryd.storage.hot_index", "HotIndex._vector_topk", "vector leg"),
    ("memoryd.storage.hot_index", "bm25_touched", "BM25 leg"),
    ("memoryd.storage.hot_index", "topk_scores", "BM25 leg"),
    ("memoryd.core.retrieval", "Retriever.recall", "retriever"),
    ("memoryd.core.retrieval", "Retriever._fuse", "fusion"),
    ("memoryd.core.retrieval", "LateInteractionReranker.score", "rerank"),
    ("memoryd.core.retrieval", "maxsim", "MaxSim"),
    ("memoryd.storage.repository", "Repository.touch", "access counts"),
    ("memoryd.api.convert", "recall_response", "response building"),
)

# -- inside the daemon --------------------------------------------------------------

CALL: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "profile_recall_call", default=None
)


def _timed(original: Callable[..., Any], stage: str) -> Callable[..., Any]:
    def add(record: dict[str, float], started: float) -> None:
        record[stage] = record.get(stage, 0.0) + time.perf_counter() - started

    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            record = CALL.get()
            if record is None:
                return await original(*args, **kwargs)
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                add(record, started)

        return timed_async

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        record = CALL.get()
        if record is None:
            return original(*args, **kwargs)
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            add(record, started)

    return timed


MODEL = "model in the worker"


def _time_the_model() -> None:
    """The model's own run, timed on the embedder's worker thread (the call's record is
    not reachable there): each run leaves its duration, and the Recall's embedding (one
    at a time: the client waits for each answer) takes it when its future resolves. The
    query embedding less this is the hand-off to the worker and back."""
    from memoryd.inference import batcher
    from memoryd.inference.onnx_embedder import OnnxEmbedder

    last = [0, 0.0]  # runs so far, the last run's seconds
    embed_full = OnnxEmbedder.embed_full

    @functools.wraps(embed_full)
    def timed_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return embed_full(self, *args, **kwargs)
        finally:
            last[1] = time.perf_counter() - started
            last[0] += 1

    begin = batcher.BatchingEmbedder.begin_query

    @functools.wraps(begin)
    def timed_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        runs = last[0]
        pending = begin(self, *args, **kwargs)
        record = CALL.get()
        if record is None or pending.ready:
            return pending

        async def taken() -> Any:
            value = await pending
            if last[0] == runs + 1:
                record[MODEL] = record.get(MODEL, 0.0) + last[1]
            return value

        return _Pending(taken())

    OnnxEmbedder.embed_full = timed_model  # type: ignore[method-assign]
    batcher.BatchingEmbedder.begin_query = timed_begin  # type: ignore[method-assign]


class _Pending:
    """A coroutine as the service takes a ``PendingQuery`` (``ready``, awaitable)."""

    ready = False

    def __init__(self, coroutine: Any):
        self.coroutine = coroutine

    def __await__(self) -> Any:
        return self.coroutine.__await__()


def install_timers(records: list[dict[str, float]], profiler: Any) -> None:
    """Wrap every stage of TIMED, the model's runs, and the outermost interceptor's
    Recall behaviour, which opens a record per call (and switches ``profiler`` on for
    the call, when given)."""
    import importlib

    from memoryd.api import metrics

    _time_the_model()

    for module_name, path, stage in TIMED:
        owner: Any = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        raw = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        if isinstance(raw, staticmethod):
            setattr(owner, name, staticmethod(_timed(raw.__func__, stage)))
        else:
            setattr(owner, name, _timed(raw, stage))

    wrap = metrics.MetricsInterceptor._wrap

    def outer(self: Any, method: str, behavior: Any, streaming: bool) -> Any:
        inner = wrap(self, method, behavior, streaming)
        if method != "Recall" or streaming:
            return inner

        async def recall(request: Any, context: Any) -> Any:
            record: dict[str, float] = {}
            token = CALL.set(record)
            if profiler is not None:
                profiler.enable()
            started = time.perf_counter()
            try:
                return await inner(request, context)
            finally:
                record["handler"] = time.perf_counter() - started
                if profiler is not None:
                    profiler.disable()
                CALL.reset(token)
                records.append(record)

        return recall

    metrics.MetricsInterceptor._wrap = outer


def serve(argv: list[str]) -> int:
    """``memoryd serve`` with the timers installed; the records go to $PROFILE_RECALL_OUT
    when it exits."""
    import cProfile

    records: list[dict[str, float]] = []
    profiler = cProfile.Profile() if os.environ.get(CPROFILE_ENV) else None
    install_timers(records, profiler)
    out = Path(os.environ[OUT_ENV])

    def dump() -> None:
        out.write_text(json.dumps(records))
        if profiler is not None:
            profiler.dump_stats(str(out) + ".prof")

    atexit.register(dump)
    from memoryd import cli

    # A stop that abandons a compaction ends the process with os._exit (no atexit hooks)
    real_exit = cli._exit_now

    def exit_now(code: int) -> NoReturn:
        dump()
        real_exit(code)

    cli._exit_now = exit_now
    return cli.main(argv)


# -- the client -----------------------------------------------------------------------

# The report's rows: (label, stage key or None for a derived row, indent).
ROWS = (
    ("round trip (client)", "round trip", 0),
    ("client stub (request, serialise, parse)", "client stub", 1),
    ("transport (HTTP/2, grpc core, aio server, server protobuf)", "transport", 1),
    ("interceptors", "interceptors", 1),
    ("servicer (MemoryServicer.Recall)", "servicer", 1),
    ("request conversion", "request conversion", 2),
    ("policy and validation", "policy and validation", 2),
    ("query embedding (hand-off + model or cache)", "query embedding", 2),
    ("the model, timed in the worker (miss)", MODEL, 3),
    ("hand-off to the worker and back, cache", "hand-off", 3),
    ("beside the model (miss): time expression, analysis, BM25 leg", "beside the model", 3),
    ("candidates", "candidates", 2),
    ("query analysis (a miss: beside the model)", "query analysis", 3),
    ("vector leg", "vector leg", 3),
    ("BM25 leg (a miss: beside the model)", "BM25 leg", 3),
    ("assembly", "assembly", 3),
    ("fusion", "fusion", 2),
    ("rerank (late interaction)", "rerank", 2),
    ("MaxSim kernel", "MaxSim", 3),
    ("boosts, order, hits", "boosts", 2),
    ("access counts", "access counts", 2),
    ("response building", "response building", 2),
    ("other", "other", 2),
)


def derive(record: dict[str, float], round_trip: float, client: float) -> dict[str, float]:
    """The report's stages of one call (seconds) from the daemon's record."""
    r = dict(record)
    g = r.get
    r["round trip"] = round_trip
    r["client stub"] = client
    r["transport"] = round_trip - g("handler", 0.0) - client
    r["interceptors"] = g("handler", 0.0) - g("servicer", 0.0)
    # The query embedding: from the Recall's pipeline starting to its vector (on a miss
    # the query's text work runs meanwhile, on this thread, beside the model).
    r["query embedding"] = g("ranked", 0.0) - g("retriever", 0.0)
    r["hand-off"] = r["query embedding"] - g(MODEL, 0.0)
    legs = g("vector leg", 0.0)
    if not g("beside the model", 0.0):  # else the other legs ran there, not in candidates
        legs += g("query analysis", 0.0) + g("BM25 leg", 0.0)
    r["assembly"] = g("candidates", 0.0) - legs
    r["boosts"] = g("retriever", 0.0) - g("candidates", 0.0) - g("fusion", 0.0) - g("rerank", 0.0)
    named = (
        "request conversion", "policy and validation", "query embedding", "retriever",
        "access counts", "response building",
    )  # fmt: skip
    r["other"] = g("servicer", 0.0) - sum(g(k, 0.0) for k in named)
    return r


def client_stub_seconds(request: Any, response: Any, n: int = 2000) -> float:
    """The sync client's own protobuf work for one call: build the request, serialise it,
    parse the answer's bytes (measured in process on the same messages)."""
    from memoryd_client import client as client_module
    from memoryd_client import pb

    data = response.SerializeToString()
    t0 = time.perf_counter()
    for _ in range(n):
        req = client_module.recall_request(request.agent_id, request.query, limit=request.limit)
        req.SerializeToString()
        pb.RecallResponse.FromString(data)
    return (time.perf_counter() - t0) / n


def table_for(calls: list[dict[str, float]]) -> str:
    import harness

    mean_rt = statistics.fmean(c["round trip"] for c in calls)
    rows = []
    for label, key, indent in ROWS:
        values = [c.get(key, 0.0) for c in calls]
        mean = statistics.fmean(values)
        rows.append(
            [
                "\u2003" * 2 * indent + label,  # em spaces: the stages' nesting
                f"{mean * 1e3:.3f}",
                f"{statistics.median(values) * 1e3:.3f}",
                f"{100 * mean / mean_rt:.1f}%",
            ]
        )
    return harness.table(("stage", "mean ms", "p50 ms", "share of the mean round trip"), rows)


def health_round_trips(address: str, n: int) -> list[float]:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    out = []
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="")
        for i in range(n + 10):
            t0 = time.perf_counter()
            stub.Check(request, timeout=10)
            if i >= 10:
                out.append(time.perf_counter() - t0)
    return out


def top_functions(path: Path, n: int) -> str:
    import pstats

    import harness

    stats = pstats.Stats(str(path))
    entries = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:n]
    total = sum(v[2] for v in stats.stats.values()) or 1.0
    rows = [
        [f"{Path(file).name}:{line} {func}", calls, f"{own * 1e3:.1f}", f"{100 * own / total:.1f}%"]
        for (file, line, func), (_, calls, own, _cum, _) in entries
    ]
    return harness.table(("function (own time)", "calls", "own ms", "share"), rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000, help="memories in the one agent")
    p.add_argument("--queries", type=int, default=300, help="timed Recalls per phase")
    p.add_argument("--warmup", type=int, default=20, help="untimed Recalls first")
    p.add_argument("--cprofile", type=int, default=0, help="also list the top N functions")
    p.add_argument("--data", type=Path, help="locomo10.json (default ../shared/datasets/...)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic memories")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    import corpus
    import harness
    import locomo
    import peers

    data = args.data or peers.default_data()
    turns = peers.locomo_turn_texts(locomo.load(data, None)) if data.is_file() else []
    texts = peers.corpus_texts(turns, args.memories, args.seed)
    queries = corpus.take(corpus.queries(args.seed), args.warmup + args.queries)
    base = Path(tempfile.mkdtemp(prefix="memoryd-profile-"))
    out = base / "records.json"
    env = {OUT_ENV: str(out)} | ({CPROFILE_ENV: "1"} if args.cprofile else {})
    daemon = harness.Daemon(
        base / "data",
        base / "stderr.log",
        env,
        program=(str(Path(__file__).resolve()), "--serve"),
    )
    try:
        report(args, daemon, texts, queries, len(turns), out)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def report(
    args: argparse.Namespace,
    daemon: Any,
    texts: list[str],
    queries: list[str],
    n_turns: int,
    out: Path,
) -> None:
    """Load, time the Recalls, stop the daemon, join its records to the round trips."""
    import harness
    from memoryd_client import MemoryClient

    agent = "profile"
    try:
        daemon.start()
        harness.log(f"memoryd (timed) pid {daemon.pid} on {daemon.address}")
        loaded = asyncio.run(harness.bulk_store(daemon.address, [(agent, t) for t in texts]))
        harness.log(f"loaded: {loaded.summary()}")
        round_trips: list[float] = []
        with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
            last = None
            for q in [*queries, *queries[args.warmup :]]:  # misses, then the same cached
                t0 = time.perf_counter()
                last = client.recall(agent, q, limit=10)
                round_trips.append(time.perf_counter() - t0)
            assert last is not None
            stub = client_stub_seconds(client_request(agent, queries[-1]), last)
        health = health_round_trips(daemon.address, args.queries)
    finally:
        daemon.stop()
    alone = model_alone(queries[args.warmup :])
    try:
        records = json.loads(out.read_text())
    except FileNotFoundError:
        raise SystemExit(f"the daemon left no records; its log:\n{daemon.log_tail()}") from None
    if len(records) != len(round_trips):
        raise SystemExit(f"{len(records)} daemon records for {len(round_trips)} Recalls")
    calls = [derive(r, rt, stub) for r, rt in zip(records, round_trips, strict=True)]
    miss = calls[args.warmup : args.warmup + args.queries]
    cached = calls[args.warmup + args.queries :]
    h = harness.summary_ms(health)
    sections = [
        f"{loaded.created} memories in one agent ({min(n_turns, len(texts))} LoCoMo "
        f"turns, then synthetic ones), default pipeline, {args.queries} Recalls (limit 10) "
        f"per phase after {args.warmup} warm-up; Health.Check round trip on the same server p50 "
        f"{h['p50']:.3f} ms, mean {h['mean']:.3f} ms (the floor of a unary call there). "
        f"The model alone on the same queries, back to back in this process after the "
        f"daemon stopped (its settings, token vectors included): p50 {alone['p50']:.3f} ms, "
        f"mean {alone['mean']:.3f} ms.",
        "**cache miss** (every query distinct: the model runs)\n\n" + table_for(miss),
        "**cached** (the same queries again: the query-embedding cache answers)\n\n"
        + table_for(cached),
    ]
    prof = Path(str(out) + ".prof")
    if args.cprofile and prof.is_file():
        sections.append(
            f"**cProfile**, Recall handlers on the event loop, top {args.cprofile} by own "
            "time (overhead included)\n\n" + top_functions(prof, args.cprofile)
        )
    harness.report(args, "Where one Recall's time goes (bench/profile_recall.py)", sections)


def model_alone(queries: list[str]) -> dict[str, float]:
    """The daemon's model called directly on ``queries`` one at a time, as a Recall's
    miss calls it (one text, token vectors too): the reference for the row timed in
    the worker."""
    import harness
    import peers

    embedder = peers.query_embedder()
    for q in queries[:20]:
        embedder.embed_full([f"warm-up {q}"], tokens=True)
    took = []
    for q in queries:
        t0 = time.perf_counter()
        embedder.embed_full([q], tokens=True)
        took.append(time.perf_counter() - t0)
    return harness.summary_ms(took)


def client_request(agent: str, query: str) -> Any:
    from memoryd_client import client as client_module

    return client_module.recall_request(agent, query, limit=10)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(serve(sys.argv[2:]))
    main()
