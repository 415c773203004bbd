"""The one table from domain errors to gRPC status codes, and the interceptor applying it.

Servicers raise ``core.errors`` exceptions and never call ``context.abort`` themselves.
Anything unexpected becomes INTERNAL with a generic message naming a request id; the
traceback goes to the log, never to the caller.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc

from memoryd.core import errors as e

log = logging.getLogger("memoryd.api")

# The id of the RPC being served (metadata x-request-id, or generated); every log record
# written while serving it carries it (see RequestIdFilter).
REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="-")


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


STATUS: dict[type[e.MemorydError], grpc.StatusCode] = {
    e.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    e.NotFound: grpc.StatusCode.NOT_FOUND,
    e.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    e.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    e.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    e.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    e.Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    e.NotReady: grpc.StatusCode.UNAVAILABLE,
    e.DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    e.DataCorrupt: grpc.StatusCode.DATA_LOSS,
    # gRPC's own definition: "perhaps the entire file system is out of space". Not
    # UNAVAILABLE: the clients retry that within seconds, which a full disk outlasts.
    e.StorageFull: grpc.StatusCode.RESOURCE_EXHAUSTED,
    e.ConfigError: grpc.StatusCode.FAILED_PRECONDITION,
}


# A status message travels in the grpc-message trailer, percent-encoded (a non-ASCII byte
# becomes 3), and trailers are limited to 16 KiB by default: past that the caller got
# RESOURCE_EXHAUSTED "Stream removed" instead of the error. 1000 chars stay far below.
MAX_MESSAGE_CHARS = 1000


def cap_message(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message``, cut to ``limit`` chars with a note of how much was left out."""
    if len(message) <= limit:
        return message
    cut = limit - 40
    return f"{message[:cut]}... ({len(message) - cut} more chars)"


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status and the caller-safe message for any exception."""
    for cls in type(error).__mro__:
        code = STATUS.get(cls)
        if code is not None:
            return code, cap_message(str(error))
    incident = uuid.uuid4().hex[:12]
    log.error("unexpected error (incident %s)", incident, exc_info=error)
    return grpc.StatusCode.INTERNAL, f"internal error (incident {incident}); see the daemon log"


Behavior = Callable[..., Any]


def _wrap_unary(behavior: Behavior) -> Behavior:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(request, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:
            code, message = status_of(error)
            await context.abort(code, message, trailers_of(error))

    return call


def trailers_of(error: BaseException) -> tuple[tuple[str, str], ...]:
    """Trailing metadata an error carries: ``retry-after-ms`` when the caller should wait."""
    after = getattr(error, "retry_after", None)
    return (("retry-after-ms", str(max(1, round(after * 1000)))),) if after else ()


def _wrap_streaming(behavior: Behavior) -> Behavior:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for response in behavior(request, context):
                yield response
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:
            code, message = status_of(error)
            await context.abort(code, message, trailers_of(error))

    return call


Deserializer = Callable[[bytes], Any]


def rewrap(
    handler: grpc.RpcMethodHandler,
    wrap: Callable[[Behavior, bool], Behavior],
    deserializer: Callable[[Deserializer | None], Deserializer] | None = None,
) -> Any:
    """A copy of ``handler`` whose behaviour is ``wrap(behavior, response_streaming)`` and,
    with ``deserializer``, whose request deserializer is ``deserializer(the handler's)``."""
    request_deserializer = handler.request_deserializer
    if deserializer is not None:
        request_deserializer = deserializer(request_deserializer)
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            wrap(handler.unary_unary, False),
            request_deserializer=request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            wrap(handler.unary_stream, True),
            request_deserializer=request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(
            wrap(handler.stream_unary, False),
            request_deserializer=request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return grpc.stream_stream_rpc_method_handler(
        wrap(handler.stream_stream, True),
        request_deserializer=request_deserializer,
        response_serializer=handler.response_serializer,
    )


class WrapCache:
    """Wrapped handlers, made once per (method, registered handler) instead of per call."""

    def __init__(self) -> None:
        self._wrapped: dict[tuple[str, int], tuple[grpc.RpcMethodHandler, Any]] = {}

    def get(
        self,
        method: str,
        handler: grpc.RpcMethodHandler,
        wrap: Callable[[Behavior, bool], Behavior],
        deserializer: Callable[[Deserializer | None], Deserializer] | None = None,
    ) -> Any:
        key = (method, id(handler))
        hit = self._wrapped.get(key)
        if hit is not None and hit[0] is handler:
            return hit[1]
        wrapped = rewrap(handler, wrap, deserializer)
        self._wrapped[key] = (handler, wrapped)  # holding handler keeps its id unique
        return wrapped


class ErrorMappingInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self) -> None:
        self._cache = WrapCache()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        return self._cache.get(
            handler_call_details.method,
            handler,
            lambda b, streaming: _wrap_streaming(b) if streaming else _wrap_unary(b),
        )
