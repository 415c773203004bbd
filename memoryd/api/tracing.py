"""OpenTelemetry traces: a SERVER span for every RPC, child of the caller's span.

The caller's W3C trace context (``traceparent``, ``tracestate`` in the call's metadata)
becomes the parent of the RPC span, named by the full method
(``memoryd.v1.MemoryService/Recall``) with the ``rpc.*`` attributes, the gRPC status code
and ``memoryd.request_id`` (the id of the access-log line). The stage spans
(``core.tracing``) opened while serving the call are its children.

Left out on purpose: the agent id (a tenant identifier: the request id leads to it
through the access log, which stays on the operator's side), memory text, queries,
metadata, baggage and exception messages (they may quote a caller's input).

``[tracing] exporter = "none"`` (the default) builds nothing: no interceptor, no tracer,
not even an import of the SDK. A caller's ``traceparent`` decides sampling for its trace
(parent-based); ``sample_ratio`` applies to traces that start here.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from memoryd.api.interceptors import REQUEST_ID, Behavior, Wrap, WrappingInterceptor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from memoryd.config import TracingSection

_PROPAGATOR = TraceContextTextMapPropagator()
_CONTEXT_KEYS = frozenset(_PROPAGATOR.fields)  # traceparent, tracestate

# Server span status per OpenTelemetry's gRPC conventions: these codes are the server's
# failures; the others (NOT_FOUND, INVALID_ARGUMENT, ...) answer the caller correctly.
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)

INSTRUMENTATION = "memoryd"


def build_provider(section: TracingSection) -> TracerProvider | None:
    """The tracer provider ``section`` asks for; None for ``exporter = "none"``."""
    if section.exporter == "none":
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: section.service_name}),
        sampler=ParentBased(TraceIdRatioBased(section.sample_ratio)),
    )
    if section.exporter == "console":
        # One JSON object per line on stderr, with the logs (stdout is the daemon's
        # "serving on" line); written as each span ends: a tool for looking, not for load.
        console = ConsoleSpanExporter(
            out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n"
        )
        provider.add_span_processor(SimpleSpanProcessor(console))
    else:
        provider.add_span_processor(BatchSpanProcessor(otlp_exporter(section.endpoint)))
    return provider


def otlp_exporter(endpoint: str) -> Any:
    """OTLP over gRPC (the ``memoryd[otlp]`` extra). ``endpoint`` empty: the exporter's
    own default (``OTEL_EXPORTER_OTLP_ENDPOINT``, else localhost:4317); headers for the
    collector (credentials) come from ``OTEL_EXPORTER_OTLP_HEADERS``, never from a file."""
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError as e:
        from memoryd.core.errors import ConfigError

        raise ConfigError(
            'tracing.exporter = "otlp" needs the OTLP exporter: pip install "memoryd[otlp]"'
        ) from e
    if not endpoint:
        return OTLPSpanExporter()
    return OTLPSpanExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))


def _parent(context: grpc.aio.ServicerContext) -> Any:
    carrier: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if key in _CONTEXT_KEYS and isinstance(value, str):
            carrier[key] = value
    return _PROPAGATOR.extract(carrier) if carrier else None


class TracingInterceptor(WrappingInterceptor):
    """A SERVER span around each call, inside ``MetricsInterceptor`` (whose request id it
    records) and outside the error mapping (so it sees the final status code)."""

    def __init__(self, tracer: trace.Tracer):
        super().__init__()
        self.tracer = tracer

    def wrapper(self, method: str, handler: grpc.RpcMethodHandler) -> Wrap:
        service, _, rpc = method.lstrip("/").partition("/")
        attributes: Mapping[str, str] = {
            "rpc.system": "grpc",
            "rpc.service": service,
            "rpc.method": rpc,
        }
        name = method.lstrip("/")
        return lambda b, streaming: self._wrap(name, attributes, b, streaming)

    def _wrap(
        self, name: str, attributes: Mapping[str, str], behavior: Behavior, streaming: bool
    ) -> Behavior:
        tracer = self.tracer

        def start(context: grpc.aio.ServicerContext) -> Any:
            return tracer.start_as_current_span(
                name,
                context=_parent(context),
                kind=SpanKind.SERVER,
                attributes=attributes,
                record_exception=False,
                set_status_on_exception=False,
            )

        def finish(span: trace.Span, context: Any, error: BaseException | None) -> None:
            code = context.code() if error is not None else None
            if not isinstance(code, grpc.StatusCode):
                code = grpc.StatusCode.OK if error is None else grpc.StatusCode.UNKNOWN
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            span.set_attribute("memoryd.request_id", REQUEST_ID.get())
            if code in _SERVER_ERRORS:
                span.set_status(Status(StatusCode.ERROR))
                if error is not None and not isinstance(error, grpc.aio.AbortError):
                    span.set_attribute("error.type", type(error).__name__)

        if streaming:

            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                with start(context) as span:
                    error: BaseException | None = None
                    try:
                        async for response in behavior(request, context):
                            yield response
                    except BaseException as e:
                        error = e
                        raise
                    finally:
                        finish(span, context, error)

            return stream

        async def unary(request: Any, context: Any) -> Any:
            with start(context) as span:
                error: BaseException | None = None
                try:
                    return await behavior(request, context)
                except BaseException as e:
                    error = e
                    raise
                finally:
                    finish(span, context, error)

        return unary
