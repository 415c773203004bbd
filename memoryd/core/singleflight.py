"""Single flight: identical concurrent work runs once, and every caller gets its outcome.

The first caller of a key runs the work in its own task; callers that come while it runs
wait for its outcome (its result, or the very exception it raised) instead of running it
again, as Go's ``x/sync/singleflight`` does. The service uses it so that concurrent twins
(two Stores with one idempotency key, or with the same text) become one memory.

Cancellation stays with the one cancelled:
- a waiter that is cancelled stops waiting; the work and the other waiters go on;
- when the caller running the work is cancelled, the work stops with it (it runs in that
  caller's task: a Store whose caller gave up is not finished behind its back), and the
  waiters do not inherit that cancellation: ``run`` hands the work to the next waiter,
  and ``Flight.outcome`` raises ``Abandoned`` for callers that matched a flight themselves.

Single-threaded (one event loop), like everything in ``core``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Abandoned(Exception):
    """The caller running a flight was cancelled before the work finished: there is no
    outcome to share, and the one who waited should do the work itself."""


class Flight(Generic[K, T]):
    """One piece of work in progress, under its key."""

    __slots__ = ("_done", "key")

    def __init__(self, key: K, done: asyncio.Future[T]):
        self.key = key
        self._done = done

    async def outcome(self) -> T:
        """The work's result, or the exception it raised; ``Abandoned`` when its runner
        was cancelled. Cancelling this wait cancels nothing else."""
        return await asyncio.shield(self._done)


class SingleFlight(Generic[K, T]):
    """Work in progress by key; see the module docstring."""

    def __init__(self) -> None:
        self._flights: dict[K, Flight[K, T]] = {}

    def running(self) -> list[Flight[K, T]]:
        """The flights in progress, oldest first (for callers that match a flight by more
        than its key, e.g. by similarity)."""
        return list(self._flights.values())

    async def run(self, key: K, work: Callable[[], Awaitable[T]]) -> T:
        """``work()``'s outcome, computed once for every concurrent caller of ``key``."""
        while (flight := self._flights.get(key)) is not None:
            with contextlib.suppress(Abandoned):
                return await flight.outcome()
            # Its runner was cancelled. Run it here, unless another waiter already does.
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._flights[key] = Flight(key, done)
        try:
            value = await work()
        except BaseException as e:
            cancelled = isinstance(e, asyncio.CancelledError)
            done.set_exception(Abandoned("the caller running it was cancelled") if cancelled else e)
            done.exception()  # retrieved: a failure nobody waited for is not logged as lost
            raise
        finally:
            del self._flights[key]
        done.set_result(value)
        return value
