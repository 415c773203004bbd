"""Traces of calls over real gRPC (loopback, in this process): the caller's span is the
parent of the daemon's RPC span, whose children are the stages; nothing a caller said
(query, memory text, agent id) is in any span; with tracing off no span is made.

The daemon's own process boundary is covered by tests/integration/test_tracing.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc
from memoryd_testing.otlp import Collector
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from memoryd.api.interceptors import ErrorMappingInterceptor
from memoryd.api.metrics import Metrics, MetricsInterceptor
from memoryd.api.servicer import (
    HookServicer,
    MemoryServicer,
    ReviewServicer,
    add_servicers_to_server,
)
from memoryd.api.tracing import TracingInterceptor, build_provider
from memoryd.config import TracingSection, load_settings
from memoryd.core import tracing
from memoryd.core.errors import ConfigError
from memoryd.core.service import MemoryService, NewMemory, RecallQuery

AGENT = "tenant-7f3a"
SECRET_TEXT = "my locker code is 4417 and I prefer green tea"
QUERY = "what is the locker code"


@dataclass
class Traced:
    address: str
    daemon_spans: InMemorySpanExporter
    app_spans: InMemorySpanExporter
    app: TracerProvider


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
async def traced(service: MemoryService) -> AsyncIterator[Traced]:
    """The daemon's servicer behind its interceptors, tracing into one exporter; an
    application's tracer (as in another process) into another."""
    daemon_provider, daemon_spans = _provider()
    tracer = daemon_provider.get_tracer("memoryd")
    server = grpc.aio.server(
        interceptors=[
            MetricsInterceptor(Metrics()),
            TracingInterceptor(tracer),
            ErrorMappingInterceptor(),
        ]
    )
    servicer = MemoryServicer()
    servicer.set_service(service)
    add_servicers_to_server(server, servicer, HookServicer(), ReviewServicer())
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    tracing.install(tracer)
    app, app_spans = _provider()
    try:
        yield Traced(f"127.0.0.1:{port}", daemon_spans, app_spans, app)
    finally:
        tracing.install(None)
        await server.stop(None)


def named(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


async def finished(
    exporter: InMemorySpanExporter, *names: str, servers: int = 0
) -> Sequence[ReadableSpan]:
    """The daemon's finished spans once those named (and ``servers`` SERVER spans) are
    among them: the server ends an RPC's span just after its answer is on the wire, so
    the client may hold the answer a moment before the span is exported."""
    deadline = time.monotonic() + 10.0
    while True:
        spans = exporter.get_finished_spans()
        have = {s.name for s in spans}
        enough = sum(s.kind == SpanKind.SERVER for s in spans) >= servers
        if (enough and all(n in have for n in names)) or time.monotonic() > deadline:
            return spans
        await asyncio.sleep(0.01)


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[str]:
    return sorted(
        s.name for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    )


def assert_nothing_said_is_recorded(spans: Sequence[ReadableSpan]) -> None:
    for s in spans:
        said = [s.name, *map(str, (s.attributes or {}).keys())]
        said += [str(v) for v in (s.attributes or {}).values()]
        for text in said:
            for secret in (AGENT, SECRET_TEXT, QUERY, "locker", "4417"):
                assert secret not in text, (s.name, text)


async def test_a_recall_trace_runs_from_the_client_span_through_the_rpc_span_to_its_stages(
    traced: Traced,
) -> None:
    async with AsyncMemoryClient(traced.address, timeout=30.0, retries=0) as client:
        await client.store(AGENT, SECRET_TEXT)
        traced.daemon_spans.clear()
        with traced.app.get_tracer("app").start_as_current_span("app.turn") as app_span:
            response = await client.recall(AGENT, QUERY)
    assert response.results  # the call itself worked

    spans = await finished(traced.daemon_spans, "memoryd.v1.MemoryService/Recall")
    rpc = named(spans, "memoryd.v1.MemoryService/Recall")
    assert rpc.kind == SpanKind.SERVER
    assert rpc.context.trace_id == app_span.get_span_context().trace_id
    assert rpc.parent is not None and rpc.parent.span_id == app_span.get_span_context().span_id
    assert rpc.parent.is_remote  # it came over the wire, in the call's metadata
    attributes = dict(rpc.attributes or {})
    assert attributes["rpc.system"] == "grpc"
    assert attributes["rpc.service"] == "memoryd.v1.MemoryService"
    assert attributes["rpc.method"] == "Recall"
    assert attributes["rpc.grpc.status_code"] == 0
    assert len(str(attributes["memoryd.request_id"])) == 16  # the access log's id
    assert children(spans, rpc) == ["memoryd.candidates", "memoryd.embed", "memoryd.fuse_rerank"]
    assert all(s.context.trace_id == rpc.context.trace_id for s in spans)
    candidates = named(spans, "memoryd.candidates")
    assert candidates.attributes is not None and candidates.attributes["memoryd.candidates"] >= 1
    assert_nothing_said_is_recorded(spans)


async def test_a_store_trace_reaches_the_commit_from_the_blocking_client(traced: Traced) -> None:
    def store() -> Any:
        with MemoryClient(traced.address, timeout=30.0, retries=0) as client:
            return client.store(AGENT, SECRET_TEXT)

    with traced.app.get_tracer("app").start_as_current_span("app.remember") as app_span:
        response = await asyncio.to_thread(store)  # the thread runs in this context
    assert response.memory.id

    spans = await finished(traced.daemon_spans, "memoryd.v1.MemoryService/Store")
    rpc = named(spans, "memoryd.v1.MemoryService/Store")
    assert rpc.parent is not None and rpc.parent.span_id == app_span.get_span_context().span_id
    assert children(spans, rpc) == ["memoryd.commit", "memoryd.embed"]
    commit = named(spans, "memoryd.commit")
    assert commit.attributes is not None
    assert (commit.attributes["memoryd.op"], commit.attributes["memoryd.rows"]) == ("add", 1)
    embed = named(spans, "memoryd.embed")
    assert embed.attributes is not None and embed.attributes["memoryd.kind"] == "document"
    assert_nothing_said_is_recorded(spans)


async def test_a_stream_session_and_an_export_are_children_of_the_caller_span(
    traced: Traced,
) -> None:
    ops = [
        pb.StreamRequest(request_id="1", store=pb.StoreRequest(agent_id=AGENT, text=SECRET_TEXT)),
        pb.StreamRequest(request_id="2", recall=pb.RecallRequest(agent_id=AGENT, query=QUERY)),
    ]

    def export() -> list[Any]:
        with MemoryClient(traced.address, timeout=30.0, retries=0) as client:
            return list(client.export(AGENT))

    async with AsyncMemoryClient(traced.address, timeout=30.0, retries=0) as client:
        with traced.app.get_tracer("app").start_as_current_span("app.batch") as app_span:
            answers = [r async for r in client.stream(ops)]  # asyncio, both ways streaming
            exported = await asyncio.to_thread(export)  # blocking, a server stream
    assert len(answers) == 2 and len(exported) == 1

    spans = await finished(
        traced.daemon_spans, "memoryd.v1.MemoryService/Stream", "memoryd.v1.MemoryService/Export"
    )
    app_id = app_span.get_span_context().span_id
    for name in ("memoryd.v1.MemoryService/Stream", "memoryd.v1.MemoryService/Export"):
        rpc = named(spans, name)
        assert rpc.parent is not None and rpc.parent.span_id == app_id, name
    stream = named(spans, "memoryd.v1.MemoryService/Stream")
    # Each op's stages hang under the session's span.
    assert {"memoryd.commit", "memoryd.candidates"} <= set(children(spans, stream))
    assert_nothing_said_is_recorded(spans)


async def test_without_a_caller_context_or_with_a_forged_one_the_rpc_span_is_a_root(
    traced: Traced,
) -> None:
    async with AsyncMemoryClient(traced.address, timeout=30.0, retries=0) as client:
        await client.recall(AGENT, QUERY)  # no active span: nothing is sent
    async with grpc.aio.insecure_channel(traced.address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        for bad in ("00-zz-not-hex-01", "00-" + "0" * 32 + "-" + "0" * 16 + "-01", "x" * 5000):
            request = pb.RecallRequest(agent_id=AGENT, query=QUERY)
            await stub.Recall(request, metadata=(("traceparent", bad),))
    spans = await finished(traced.daemon_spans, servers=4)
    rpcs = [s for s in spans if s.kind == SpanKind.SERVER]
    assert len(rpcs) == 4
    assert all(s.parent is None for s in rpcs)
    assert len({s.context.trace_id for s in rpcs}) == 4  # each its own new trace


async def test_a_refused_call_records_its_status_code_but_not_its_message(traced: Traced) -> None:
    async with AsyncMemoryClient(traced.address, timeout=30.0, retries=0) as client:
        with pytest.raises(MemorydError):
            await client.store(AGENT, "x" * 500)  # the fixture's limit is 200 chars
    spans = await finished(traced.daemon_spans, "memoryd.v1.MemoryService/Store")
    rpc = named(spans, "memoryd.v1.MemoryService/Store")
    assert rpc.attributes is not None
    assert rpc.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    # The caller's mistake, not the server's: no ERROR status (OpenTelemetry's rule).
    assert rpc.status.status_code == StatusCode.UNSET
    assert not rpc.events  # no exception event carrying the message


async def test_with_tracing_off_no_span_is_made(service: MemoryService) -> None:
    assert tracing.installed() is None
    assert tracing.span("embed") is tracing.NO_SPAN
    provider, exporter = _provider()
    # Even inside an application's span, the daemon's stages make nothing of their own.
    with provider.get_tracer("app").start_as_current_span("app"):
        await service.store_memory(NewMemory(agent_id=AGENT, text=SECRET_TEXT))
        await service.recall(RecallQuery(agent_id=AGENT, query=QUERY))
    assert [s.name for s in exporter.get_finished_spans()] == ["app"]
    assert build_provider(TracingSection()) is None  # the default builds nothing


def test_the_console_exporter_writes_one_json_span_per_line_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    provider = build_provider(TracingSection(exporter="console", service_name="memoryd-eu-1"))
    assert provider is not None
    with provider.get_tracer("memoryd").start_as_current_span("one"):
        pass
    provider.shutdown()
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout is the daemon's "serving on" line
    (line,) = captured.err.splitlines()
    span = json.loads(line)
    assert span["name"] == "one"
    assert span["resource"]["attributes"]["service.name"] == "memoryd-eu-1"


@pytest.fixture
def collector() -> Iterator[Collector]:
    received = Collector().start()
    yield received
    received.stop()


def test_the_otlp_exporter_sends_spans_to_the_configured_collector(collector: Collector) -> None:
    provider = build_provider(TracingSection(exporter="otlp", endpoint=collector.endpoint))
    assert provider is not None
    with provider.get_tracer("memoryd").start_as_current_span("memoryd.v1.MemoryService/Get"):
        pass
    provider.shutdown()  # flushes the batch
    assert [s.name for s in collector.spans] == ["memoryd.v1.MemoryService/Get"]
    assert collector.spans[0].service_name == "memoryd"


def test_a_sample_ratio_of_zero_keeps_no_trace_started_here() -> None:
    provider = build_provider(TracingSection(exporter="console", sample_ratio=0.0))
    assert provider is not None
    with provider.get_tracer("memoryd").start_as_current_span("x") as span:
        assert not span.is_recording()
    provider.shutdown()


def test_a_wrong_tracing_setting_stops_the_daemon_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORYD_TRACING__EXPORTER", "jaeger")
    with pytest.raises(ConfigError, match=r"tracing\.exporter"):
        load_settings()
    monkeypatch.setenv("MEMORYD_TRACING__EXPORTER", "otlp")
    monkeypatch.setenv("MEMORYD_TRACING__SAMPLE_RATIO", "1.5")
    with pytest.raises(ConfigError, match=r"tracing\.sample_ratio"):
        load_settings()


def test_otlp_without_its_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # As if memoryd[otlp] were not installed: the import of the exporter fails.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", None)
    with pytest.raises(ConfigError, match=r"memoryd\[otlp\]"):
        build_provider(TracingSection(exporter="otlp"))
