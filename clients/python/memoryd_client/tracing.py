"""The caller's OpenTelemetry trace context, sent with every call.

When the application uses OpenTelemetry (``opentelemetry-api`` importable), each call
carries the active context in its metadata through the application's propagators (W3C
``traceparent`` and ``tracestate`` by default), so the daemon's span of the call is a
child of the caller's span. Without ``opentelemetry-api`` nothing is added and nothing is
imported: the client does not depend on it. Nothing but the propagators' own headers is
sent (no request content).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import grpc.aio

try:
    from opentelemetry import propagate
except ImportError:  # the application does not use OpenTelemetry
    propagate = None  # type: ignore[assignment]

Metadata = Sequence[tuple[str, str | bytes]]


def trace_headers() -> list[tuple[str, str]]:
    """The active context as metadata pairs (none without an active, valid context)."""
    if propagate is None:
        return []
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return list(carrier.items())


class _Details(
    collections.namedtuple(
        "_Details",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


def _with_headers(details: Any) -> Any:
    headers = trace_headers()
    if not headers:
        return details
    return _Details(
        details.method,
        details.timeout,
        [*(details.metadata or ()), *headers],
        details.credentials,
        getattr(details, "wait_for_ready", None),
        getattr(details, "compression", None),
    )


class _Propagate(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(_with_headers(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(_with_headers(details), request)

    def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return continuation(_with_headers(details), requests)

    def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return continuation(_with_headers(details), requests)


def traced_channel(channel: grpc.Channel) -> grpc.Channel:
    """``channel`` sending the caller's trace context (itself without OpenTelemetry)."""
    if propagate is None:
        return channel
    return grpc.intercept_channel(channel, _Propagate())


def _aio_with_headers(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    headers = trace_headers()
    if not headers:
        return details
    metadata = grpc.aio.Metadata(*(details.metadata or ()), *headers)
    return details._replace(metadata=metadata)


class _AioUnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return await continuation(_aio_with_headers(details), request)


class _AioUnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return await continuation(_aio_with_headers(details), request)


class _AioStreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return await continuation(_aio_with_headers(details), requests)


class _AioStreamStream(grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return await continuation(_aio_with_headers(details), requests)


def aio_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for a ``grpc.aio`` channel sending the caller's trace context (none
    without OpenTelemetry)."""
    if propagate is None:
        return []
    return [_AioUnaryUnary(), _AioUnaryStream(), _AioStreamUnary(), _AioStreamStream()]
