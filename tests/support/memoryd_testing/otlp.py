"""An OTLP/gRPC trace collector on loopback, for the tests of ``tracing.exporter = "otlp"``.

``Collector.start()`` serves OpenTelemetry's TraceService on a free port of 127.0.0.1 and
keeps every span it is sent (name, trace id, span id, parent span id, attributes);
``endpoint`` is what ``tracing.endpoint`` takes.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    attributes: dict[str, Any]
    service_name: str


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@dataclass
class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    spans: list[ReceivedSpan] = field(default_factory=list)
    endpoint: str = ""
    _server: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Collector:
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)  # type: ignore[no-untyped-call]
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(None)

    def Export(self, request: Any, context: Any) -> Any:
        received = []
        for resource in request.resource_spans:
            attrs = {a.key: _value(a.value) for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                for s in scope.spans:
                    received.append(
                        ReceivedSpan(
                            name=s.name,
                            trace_id=int.from_bytes(s.trace_id, "big"),
                            span_id=int.from_bytes(s.span_id, "big"),
                            parent_span_id=int.from_bytes(s.parent_span_id, "big")
                            if s.parent_span_id
                            else None,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            service_name=str(attrs.get("service.name", "")),
                        )
                    )
        with self._lock:
            self.spans.extend(received)
        return trace_service_pb2.ExportTraceServiceResponse()
