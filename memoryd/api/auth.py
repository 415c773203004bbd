"""Bearer-token authentication on the wire.

With ``MEMORYD_AUTH_TOKEN`` set, every RPC must carry ``authorization: Bearer <token>``;
the health service stays open so orchestrators can probe the daemon.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from memoryd.api.errors import Behavior, rewrap
from memoryd.core.errors import Unauthenticated

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

    def _allowed(self, details: grpc.HandlerCallDetails) -> bool:
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
                return hmac.compare_digest(given, self._expected)
        return False

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if (
            handler is None
            or method.startswith(OPEN_PREFIXES)
            or self._allowed(handler_call_details)
        ):
            return handler
        return rewrap(handler, _deny)


def _deny(_behavior: Behavior, streaming: bool) -> Behavior:
    message = "missing or wrong credentials: send metadata 'authorization: Bearer <token>'"

    async def unary(_request: Any, _context: Any) -> Any:
        raise Unauthenticated(message)

    async def stream(_request: Any, _context: Any) -> AsyncIterator[Any]:
        raise Unauthenticated(message)
        yield  # pragma: no cover - makes this an async generator

    return stream if streaming else unary
