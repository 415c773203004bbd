"""Periodic background jobs, each on an asyncio task of its own.

A component says which jobs it has (the repository: persist access counts, maintain the
approximate indexes; the daemon: sweep expired memories, back up, ...) and runs them with
``Jobs``. A job that raises is logged and runs again at its next time; it never stops the
others, which is why each has its own task rather than one loop calling them in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memoryd.core.errors import StorageFull

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Job:
    name: str  # for the log: "persist access counts"
    every: float  # seconds from the end of one run to the start of the next
    run: Callable[[], Awaitable[object]]
    first_after: float | None = None  # seconds before the first run (default: ``every``)


class Jobs:
    """Runs jobs until ``stop``; counts each job's runs and failures."""

    def __init__(self, jobs: Iterable[Job] = ()):
        self.jobs = list(jobs)
        self.runs: dict[str, int] = {job.name: 0 for job in self.jobs}
        self.failures: dict[str, int] = {job.name: 0 for job in self.jobs}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start every job (on the running event loop)."""
        for job in self.jobs:
            self._tasks.append(asyncio.create_task(self._forever(job), name=job.name))

    async def stop(self) -> None:
        """Cancel every job; one in the middle of a run is cancelled there."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _forever(self, job: Job) -> None:
        await asyncio.sleep(job.every if job.first_after is None else job.first_after)
        while True:
            try:
                await job.run()
            except StorageFull as e:  # says so in health and Stats already: one line
                self.failures[job.name] += 1
                log.warning("background job %r postponed: %s", job.name, e)
            except Exception:
                self.failures[job.name] += 1
                log.exception("background job %r failed; it runs again in %gs", job.name, job.every)
            else:
                self.runs[job.name] += 1
            await asyncio.sleep(job.every)


def post(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: Any) -> bool:
    """Hand ``callback(*args)`` to ``loop`` from another thread (a worker's answer to the
    caller that waits on that loop); whether it was handed. A loop closed meanwhile (its
    caller gone: an embedding program's ``asyncio.run`` returned) drops it: the worker
    thread must not die of one caller's loop, or every later caller's work would wait
    for a thread that is no longer there."""
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # "Event loop is closed"
        log.debug("a caller's event loop closed before its answer came: dropped")
        return False
    return True
