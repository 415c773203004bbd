"""Traces across the process boundary: the application's span (in this process) is the
parent of the daemon's RPC span (in the daemon's process, exported by
``[tracing] exporter = "console"`` as one JSON span per line on its stderr, which the
launcher keeps in the daemon's log), whose children are the stages down to the commit.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memoryd_client import MemoryClient
from memoryd_testing.launcher import Daemon
from memoryd_testing.otlp import Collector
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

pytestmark = pytest.mark.integration

SECRET = "the boiler key is under the blue flowerpot"
QUERY = "where is the boiler key"


def daemon_spans(daemon: Daemon, trace_id: int, want: int, timeout: float = 20.0) -> list[Any]:
    """The spans of trace ``trace_id`` the daemon wrote, once there are ``want`` of them
    (each is written as it ends, a moment after the answer may have left)."""
    hex_id = f"0x{trace_id:032x}"
    deadline = time.monotonic() + timeout
    while True:
        spans = []
        for line in daemon.log_text().splitlines():
            if line.startswith("{") and '"trace_id"' in line:
                span = json.loads(line)
                if span["context"]["trace_id"] == hex_id:
                    spans.append(span)
        if len(spans) >= want or time.monotonic() > deadline:
            return spans
        time.sleep(0.1)


def children_of(spans: list[Any], parent: Any) -> list[Any]:
    return [s for s in spans if s["parent_id"] == parent["context"]["span_id"]]


def test_a_recall_and_a_store_are_traced_from_the_client_to_the_commit(
    start_daemon: Callable[..., Daemon],
) -> None:
    daemon = start_daemon(
        env={"MEMORYD_TRACING__EXPORTER": "console", "MEMORYD_TRACING__SERVICE_NAME": "m-test"}
    )
    exporter = InMemorySpanExporter()
    app = TracerProvider()
    app.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = app.get_tracer("app")
    agent = f"t-{uuid.uuid4().hex[:8]}"

    with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
        with tracer.start_as_current_span("app.remember") as remember:
            client.store(agent, SECRET)
        with tracer.start_as_current_span("app.turn") as turn:
            assert client.recall(agent, QUERY).results
            assert client.recall(agent, QUERY).results  # the query vector comes from cache

    # Store: client span -> Store RPC span -> embed, commit.
    ctx = remember.get_span_context()
    spans = daemon_spans(daemon, ctx.trace_id, want=3)
    (store,) = [s for s in spans if s["name"] == "memoryd.v1.MemoryService/Store"]
    assert store["parent_id"] == f"0x{ctx.span_id:016x}"
    assert store["kind"] == "SpanKind.SERVER"
    assert store["attributes"]["rpc.grpc.status_code"] == 0
    assert store["resource"]["attributes"]["service.name"] == "m-test"
    stages = {s["name"]: s for s in children_of(spans, store)}
    assert set(stages) == {"memoryd.embed", "memoryd.commit"}
    assert stages["memoryd.commit"]["attributes"]["memoryd.op"] == "add"

    # Recall (twice): client span -> two Recall RPC spans -> embed, candidates, fuse_rerank.
    ctx = turn.get_span_context()
    spans = daemon_spans(daemon, ctx.trace_id, want=8)
    recalls = [s for s in spans if s["name"] == "memoryd.v1.MemoryService/Recall"]
    assert len(recalls) == 2
    cache_hits = []
    for rpc in recalls:
        assert rpc["parent_id"] == f"0x{ctx.span_id:016x}"
        assert rpc["attributes"]["rpc.method"] == "Recall"
        stages = {s["name"]: s for s in children_of(spans, rpc)}
        assert {"memoryd.embed", "memoryd.candidates", "memoryd.fuse_rerank"} <= set(stages)
        cache_hits.append(stages["memoryd.embed"]["attributes"]["memoryd.cache_hit"])
    assert sorted(cache_hits) == [False, True]

    # What the caller said and who for stay out of every span the daemon wrote.
    written = "\n".join(json.dumps(s) for s in spans)
    for said in (agent, QUERY, SECRET, "boiler", "flowerpot"):
        assert said not in written


def test_with_tracing_off_the_daemon_writes_no_span_and_ignores_a_caller_context(
    daemon: Daemon,
) -> None:
    exporter = InMemorySpanExporter()
    app = TracerProvider()
    app.add_span_processor(SimpleSpanProcessor(exporter))
    with (
        MemoryClient(daemon.address, timeout=60.0, retries=0) as client,
        app.get_tracer("app").start_as_current_span("app.turn") as turn,
    ):
        client.recall(f"t-{uuid.uuid4().hex[:8]}", QUERY)  # sends a traceparent: harmless
    hex_id = f"0x{turn.get_span_context().trace_id:032x}"
    assert hex_id not in daemon.log_text()
    assert '"trace_id"' not in daemon.log_text()


def test_an_otlp_daemon_sends_its_spans_to_the_collector_by_its_exit(tmp_path: Path) -> None:
    collector = Collector().start()
    env = {"MEMORYD_TRACING__EXPORTER": "otlp", "MEMORYD_TRACING__ENDPOINT": collector.endpoint}
    daemon = Daemon(tmp_path / "data", tmp_path / "stderr.log", env)
    try:
        daemon.start()
        app = TracerProvider()
        with (
            MemoryClient(daemon.address, timeout=60.0, retries=0) as client,
            app.get_tracer("app").start_as_current_span("app.turn") as turn,
        ):
            client.recall(f"t-{uuid.uuid4().hex[:8]}", QUERY)
        assert daemon.stop() == 0  # SIGTERM: the queued batch is flushed before exit
    finally:
        daemon.stop()
        collector.stop()
    ctx = turn.get_span_context()
    mine = [s for s in collector.spans if s.trace_id == ctx.trace_id]
    (rpc,) = [s for s in mine if s.name == "memoryd.v1.MemoryService/Recall"]
    assert rpc.parent_span_id == ctx.span_id
    assert rpc.service_name == "memoryd"
    assert rpc.attributes["rpc.grpc.status_code"] == 0
    assert "memoryd.embed" in {s.name for s in mine if s.parent_span_id == rpc.span_id}
