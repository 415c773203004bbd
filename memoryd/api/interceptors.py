"""Server interceptor plumbing: re-wrapping a registered handler's behaviour (cached per
method), the request id every log record carries, and the interceptor that turns a raised
exception into a gRPC status with ``memoryd.api.errors``.

The other interceptors (auth, limits, metrics, decoding) are ``WrappingInterceptor``s.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc

from memoryd.api.errors import status_of, trailers_of

# The id of the RPC being served (metadata x-request-id, or generated); every log record
# written while serving it carries it (see RequestIdFilter).
REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="-")


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


Behavior = Callable[..., Any]


async def _abort(context: grpc.aio.ServicerContext, error: Exception) -> None:
    """End the call with the status ``memoryd.api.errors`` maps ``error`` to."""
    code, message = status_of(error)
    await context.abort(code, message, trailers_of(error))


def _wrap_unary(behavior: Behavior) -> Behavior:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(request, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:
            await _abort(context, error)

    return call


def _wrap_streaming(behavior: Behavior) -> Behavior:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for response in behavior(request, context):
                yield response
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:
            await _abort(context, error)

    return call


Deserializer = Callable[[bytes], Any]


def _responses(behavior: Behavior) -> Behavior:
    """A streaming behaviour as an async generator of its responses, which every wrapper
    iterates. One written as a coroutine that sends its responses with ``context.write``
    (grpc's own health service: ``Watch``) yields none here, and runs: iterated as it was,
    it failed every call with INTERNAL."""
    if not inspect.iscoroutinefunction(behavior):
        return behavior

    async def responses(request: Any, context: Any) -> AsyncIterator[Any]:
        await behavior(request, context)
        return
        yield  # (an async generator that yields nothing)

    return responses


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
            wrap(_responses(handler.unary_stream), True),
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
        wrap(_responses(handler.stream_stream), True),
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


Wrap = Callable[[Behavior, bool], Behavior]


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """An interceptor that re-wraps each method's handler once (cached per method).

    A subclass says how in :meth:`wrapper` (``None`` leaves the method's handler as it
    is) and, optionally, which request deserializer to install in :meth:`deserializer`.
    """

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
        method = handler_call_details.method
        wrap = self.wrapper(method, handler)
        if wrap is None:
            return handler
        return self._cache.get(method, handler, wrap, self.deserializer(method))

    def wrapper(self, method: str, handler: grpc.RpcMethodHandler) -> Wrap | None:
        raise NotImplementedError

    def deserializer(self, method: str) -> Callable[[Deserializer | None], Deserializer] | None:
        return None


class ErrorMappingInterceptor(WrappingInterceptor):
    def wrapper(self, method: str, handler: grpc.RpcMethodHandler) -> Wrap:
        return lambda b, streaming: _wrap_streaming(b) if streaming else _wrap_unary(b)
