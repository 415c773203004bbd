"""Fairness at the edge: per-principal rate limits and queue-time deadlines.

Each principal (``core.principals``: an API key, a certificate identity, the shared token,
or, with auth off, each agent of the trusted local caller) has two token buckets: requests
per second and request bytes per second. A unary call that finds a bucket empty is
refused at once with RESOURCE_EXHAUSTED and the trailer ``retry-after-ms`` (the clients
wait that long and retry); nothing was done. The ops of a Stream and the rows of an
Import instead wait for their tokens: the daemon reads the caller's stream no faster than
its rate, which is backpressure the caller already handles, and its in-flight cap
(``server.stream_max_in_flight``) holds.

The caller's deadline travels with the call (``core.principals.DEADLINE``): work that queues (the
embedder's queue) is dropped, not done, once the caller has given up on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from memoryd.api.interceptors import Behavior, Wrap, WrappingInterceptor
from memoryd.core import principals
from memoryd.core.errors import DeadlineExceeded, Overloaded
from memoryd.core.principals import RateLimits


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; ``take`` answers how long until ``n``
    tokens would be there (0 = taken now). Time comes from ``clock`` for tests."""

    __slots__ = ("burst", "clock", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.stamp = burst, clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, n: float, *, wait: bool = False) -> float:
        """Take ``n`` tokens and return 0 if they are there; otherwise return the seconds
        until they will be (taking them on credit when ``wait``, so waiters queue up)."""
        if self.rate <= 0:
            return 0.0
        self._refill()
        n = min(n, self.burst)  # one big request may always pass, alone
        if self.tokens >= n:
            self.tokens -= n
            return 0.0
        short = (n - self.tokens) / self.rate
        if wait:
            self.tokens -= n
        return short


class RateLimiter:
    """Token buckets per principal (by name), made on first use, dropped when idle."""

    def __init__(self, limits: RateLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.clock = clock
        self._buckets: dict[str, tuple[TokenBucket, TokenBucket]] = {}

    def _for(self, who: str) -> tuple[TokenBucket, TokenBucket]:
        found = self._buckets.get(who)
        if found is None:
            if len(self._buckets) > 10_000:  # forget full (idle) buckets
                self._buckets = {k: v for k, v in self._buckets.items() if v[0].tokens < v[0].burst}
            lim = self.limits
            found = (
                TokenBucket(
                    lim.requests_per_second,
                    lim.request_burst or max(1.0, 2 * lim.requests_per_second),
                    self.clock,
                ),
                TokenBucket(
                    lim.bytes_per_second,
                    lim.bytes_burst or max(float(1 << 20), 2 * lim.bytes_per_second),
                    self.clock,
                ),
            )
            self._buckets[who] = found
        return found

    def check(self, who: str, nbytes: int) -> None:
        """Refuse (Overloaded with retry_after) a call that finds a bucket empty."""
        requests, size = self._for(who)
        wait = max(requests.take(1), size.take(nbytes) if size.rate > 0 else 0.0)
        if wait > 0:
            raise Overloaded(
                f"rate limit of credential {who!r} reached "
                "(limits.requests_per_second / limits.bytes_per_second); "
                f"retry in {wait * 1000:.0f} ms",
                retry_after=wait,
            )

    async def pace(self, who: str, nbytes: int) -> None:
        """Wait until one more streamed message fits the buckets."""
        requests, size = self._for(who)
        wait = max(requests.take(1, wait=True), size.take(nbytes, wait=True))
        if wait > 0:
            await asyncio.sleep(wait)


def bucket_name(request: Any) -> str:
    """Whose buckets a call draws on: its principal's; the trusted local caller of a
    daemon without auth is many agents at once, so there each agent has its own."""
    p = principals.current()
    if p is not principals.LOCAL:
        return p.name
    agent = getattr(request, "agent_id", None)
    if agent is None and hasattr(request, "WhichOneof"):  # a Stream op
        op = request.WhichOneof("op")
        agent = getattr(getattr(request, op), "agent_id", "") if op else ""
    return f"agent:{agent or '-'}"


class LimitsInterceptor(WrappingInterceptor):
    """Innermost: sets the call's deadline and applies the principal's rate limits."""

    def __init__(self, limiter: RateLimiter | None):
        super().__init__()
        self.limiter = limiter

    def wrapper(self, method: str, handler: grpc.RpcMethodHandler) -> Wrap | None:
        if method.startswith("/grpc."):
            return None
        request_streaming = bool(handler.stream_unary or handler.stream_stream)
        return lambda b, streaming: self._wrap(b, streaming, request_streaming)

    def _start(self, context: Any) -> None:
        remaining = context.time_remaining()
        if remaining is not None:
            if remaining <= 0:
                raise DeadlineExceeded("the call's deadline passed before it was started")
            principals.DEADLINE.set(time.monotonic() + remaining)

    def _admit(self, request: Any) -> None:
        if self.limiter is None:
            return
        self.limiter.check(bucket_name(request), _size(request))

    def _paced(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        limiter = self.limiter
        if limiter is None:
            return requests

        async def paced() -> AsyncIterator[Any]:
            async for request in requests:
                await limiter.pace(bucket_name(request), _size(request))
                yield request

        return paced()

    def _wrap(self, behavior: Behavior, streaming: bool, request_streaming: bool) -> Behavior:
        if streaming:

            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                self._start(context)
                if request_streaming:
                    request = self._paced(request)
                else:
                    self._admit(request)
                async for response in behavior(request, context):
                    yield response

            return stream

        async def unary(request: Any, context: Any) -> Any:
            self._start(context)
            if request_streaming:
                request = self._paced(request)
            else:
                self._admit(request)
            return await behavior(request, context)

        return unary


def _size(request: Any) -> int:
    try:
        return int(request.ByteSize())
    except Exception:
        return 0
