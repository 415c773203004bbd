"""Prometheus metrics: per-RPC latency and error codes, recall stage timings, embedder
batching and cache, store and index sizes.

One registry per daemon (several daemons can live in one process, as in tests). Served
over HTTP on ``metrics.listen`` when set; nothing is exposed otherwise.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any
from urllib.parse import quote

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from memoryd.api.interceptors import REQUEST_ID, Behavior, Wrap, WrappingInterceptor
from memoryd.core import principals
from memoryd.core.policy import AGENT_ID_RE

access_log = logging.getLogger("memoryd.access")
AGENT: ContextVar[str] = ContextVar("memoryd_access_agent", default="-")

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
)  # fmt: skip


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.rpc_seconds = Histogram(
            "memoryd_rpc_duration_seconds",
            "Unary RPC latency, by method",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.rpc_total = Counter(
            "memoryd_rpc_total",
            "RPCs finished, by method and status code",
            ["method", "code"],
            registry=self.registry,
        )
        self.stage_seconds = Histogram(
            "memoryd_recall_stage_seconds",
            "Time spent in each recall stage",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._server: Any = None
        self._stages: dict[str, Any] = {}
        self.in_flight = 0  # calls being served (for the shutdown log)

    def observe_stage(self, stage: str, seconds: float) -> None:
        child = self._stages.get(stage)
        if child is None:
            child = self._stages[stage] = self.stage_seconds.labels(stage)
        child.observe(seconds)

    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)

    def serve(self, listen: str) -> int:
        host, _, port = listen.rpartition(":")
        server, _thread = start_http_server(int(port), addr=host, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class StateCollector(Collector):
    """Reads counters the daemon keeps anyway, at scrape time (no hot-path cost)."""

    def __init__(self, read: Callable[[], dict[str, Any]]):
        self._read = read

    def collect(self) -> Iterator[Any]:
        s = self._read()
        if not s:
            return
        yield _counter("memoryd_embed_batches", "Model runs of the embedder", s["batches"])
        yield _counter(
            "memoryd_embed_texts", "Texts embedded (texts / batches = batch size)", s["texts"]
        )
        workers = GaugeMetricFamily(
            "memoryd_embed_workers",
            "Embedding worker threads serving (0: every Recall and Store fails until a restart)",
        )
        workers.add_metric([], s.get("embed_workers", 0))
        yield workers
        yield _counter("memoryd_embed_cache_hits", "Query embeddings served from cache", s["hits"])
        yield _counter("memoryd_embed_cache_misses", "Query embeddings computed", s["misses"])
        yield _counter("memoryd_store_commits", "LanceDB commits (group commits)", s["commits"])
        yield _counter("memoryd_store_rows_written", "Rows written to LanceDB", s["rows_written"])
        yield _counter("memoryd_store_compactions", "Compactions of a table", s["compactions"])
        yield _counter(
            "memoryd_store_cleanups", "Cleanups of old versions (shared store)", s["cleanups"]
        )
        m = GaugeMetricFamily(
            "memoryd_store_maintainer",
            "1 while this daemon compacts and cleans up the store (on an object store shared "
            "by several daemons: while it holds the maintenance lease)",
        )
        m.add_metric([], s["maintainer"])
        yield m
        owed = GaugeMetricFamily(
            "memoryd_token_file_writing",
            "1 while a start's token file is written while serving (a first start over 50,000 "
            "rows or more): Recalls rank without the late-interaction rerank until it is 0",
        )
        owed.add_metric([], s.get("tokens_owed", 0))
        yield owed
        lag = s.get("follow")
        if lag is not None and lag.seconds_since_check is not None:  # following is on
            behind = GaugeMetricFamily(
                "memoryd_follow_versions_behind",
                "Versions of the shared table this daemon has seen but not yet applied",
            )
            behind.add_metric([], max(0, lag.latest_version - lag.applied_version))
            yield behind
            since = GaugeMetricFamily(
                "memoryd_follow_seconds_since_check",
                "Seconds since this daemon last looked at the shared table successfully",
            )
            since.add_metric([], lag.seconds_since_check)
            yield since
        g = GaugeMetricFamily("memoryd_index_bytes", "Memory held by the in-memory index")
        g.add_metric([], s["index_bytes"])
        yield g
        per_scope = GaugeMetricFamily(
            "memoryd_memories", "Memories held, by scope (namespace)", labels=["scope"]
        )
        for scope, n in sorted(s["scopes"].items()):
            per_scope.add_metric([scope], n)
        yield per_scope


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    c = CounterMetricFamily(name, doc)
    c.add_metric([], value)
    return c


_ID_PREFIX = os.urandom(4).hex()  # per process: ids stay unique across restarts
_ID_COUNTER = itertools.count(1)


# A request id a caller sends is kept (its first 64 characters) when it is printable ASCII
# without a space; any other is replaced by one of ours: it goes into every log line.
_GIVEN_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,64}\Z")


def logged_agent(agent: object) -> str:
    """The request's agent id as the access log shows it: as it is when it is a valid
    agent id, else with every other character percent-escaped and cut to 64. The request's
    field is logged before anything judged it (a caller without a key included): a line
    break in it wrote a line of the caller's choosing, a forged entry, into the log."""
    if not isinstance(agent, str) or not agent:
        return "-"
    if AGENT_ID_RE.match(agent):
        return agent
    return quote(agent[:64], safe="") + ("..." if len(agent) > 64 else "")


def new_request_id() -> str:
    """16 hex characters, unique per call (cheaper than a uuid4 on every RPC)."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER) & 0xFFFFFFFF:08x}"


class MetricsInterceptor(WrappingInterceptor):
    """Outermost interceptor: sees the final status of every RPC."""

    def __init__(self, metrics: Metrics, *, access_log: bool = False):
        self.metrics = metrics
        super().__init__()
        self.access_log = access_log

    def wrapper(self, method: str, handler: grpc.RpcMethodHandler) -> Wrap:
        name = method.rsplit("/", 1)[-1]
        return lambda b, streaming: self._wrap(name, b, streaming)

    def _wrap(self, method: str, behavior: Behavior, streaming: bool) -> Behavior:
        m = self.metrics
        seconds = m.rpc_seconds.labels(method)
        access_level = logging.INFO if self.access_log else logging.DEBUG
        totals: dict[str, Any] = {}

        def start(context: Any, request: Any) -> float:
            given = ""
            for key, value in context.invocation_metadata() or ():
                if key == "x-request-id" and _GIVEN_REQUEST_ID.match(str(value)[:64]):
                    given = str(value)[:64]
            REQUEST_ID.set(given or new_request_id())
            m.in_flight += 1
            AGENT.set(logged_agent(getattr(request, "agent_id", None)))
            return time.perf_counter()

        def finish(context: Any, started: float, failed: bool) -> None:
            m.in_flight -= 1
            code = context.code() if failed else None
            name = (
                code.name if isinstance(code, grpc.StatusCode) else ("UNKNOWN" if failed else "OK")
            )
            total = totals.get(name)
            if total is None:
                total = totals[name] = m.rpc_total.labels(method, name)
            total.inc()
            elapsed = time.perf_counter() - started
            if not streaming:
                seconds.observe(elapsed)
            # Who, for which agent, what, how it ended: never memory text. At INFO when the
            # access log is on (auth.access_log), at DEBUG otherwise.
            access_log.log(
                access_level,
                "rpc=%s code=%s principal=%s agent=%s ms=%.2f",
                method,
                name,
                principals.current().name,
                AGENT.get(),
                elapsed * 1e3,
            )

        if streaming:

            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                started, failed = start(context, request), False
                try:
                    async for response in behavior(request, context):
                        yield response
                except BaseException:
                    failed = True
                    raise
                finally:
                    finish(context, started, failed)

            return stream

        async def unary(request: Any, context: Any) -> Any:
            started, failed = start(context, request), False
            try:
                return await behavior(request, context)
            except BaseException:
                failed = True
                raise
            finally:
                finish(context, started, failed)

        return unary
