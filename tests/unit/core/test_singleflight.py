"""SingleFlight: concurrent identical work runs once; outcomes and cancellations."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from memoryd.core.singleflight import Abandoned, SingleFlight


class Work:
    """Work that blocks until released, counting how often it ran."""

    def __init__(self, value: str = "done", error: BaseException | None = None) -> None:
        self.runs = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.value, self.error = value, error

    async def __call__(self) -> str:
        self.runs += 1
        self.started.set()
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return f"{self.value} #{self.runs}"


async def settle() -> None:
    """Let every task that can run, run (the waiters reach their wait)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_concurrent_calls_of_one_key_run_the_work_once() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    work = Work()
    calls = [asyncio.create_task(flights.run("k", work)) for _ in range(6)]
    await work.started.wait()
    await settle()
    assert work.runs == 1 and [f.key for f in flights.running()] == ["k"]
    work.release.set()
    assert await asyncio.gather(*calls) == ["done #1"] * 6
    assert work.runs == 1 and flights.running() == []


async def test_other_keys_and_later_calls_run_again() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    work = Work()
    work.release.set()
    a, b = await asyncio.gather(flights.run("a", work), flights.run("b", work))
    assert work.runs == 2 and {a, b} == {"done #1", "done #2"}
    # Not a cache: once the work is over, the next call runs it again.
    assert await flights.run("a", work) == "done #3"


async def test_an_exception_reaches_every_waiter() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    boom = ValueError("disk on fire")
    work = Work(error=boom)
    calls = [asyncio.create_task(flights.run("k", work)) for _ in range(4)]
    await work.started.wait()
    await settle()
    work.release.set()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(o is boom for o in outcomes)
    assert work.runs == 1 and flights.running() == []


async def test_a_cancelled_waiter_does_not_cancel_the_others() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    work = Work()
    runner = asyncio.create_task(flights.run("k", work))
    await work.started.wait()
    quitter = asyncio.create_task(flights.run("k", work))
    stayer = asyncio.create_task(flights.run("k", work))
    await settle()
    quitter.cancel()
    await settle()
    work.release.set()
    assert await runner == "done #1" and await stayer == "done #1"
    assert quitter.cancelled() and work.runs == 1


async def test_when_the_runner_is_cancelled_a_waiter_runs_the_work() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    work = Work()
    runner = asyncio.create_task(flights.run("k", work))
    await work.started.wait()
    waiters = [asyncio.create_task(flights.run("k", work)) for _ in range(3)]
    await settle()
    runner.cancel()
    await settle()
    assert runner.cancelled()
    # One waiter took the work over (it ran again); the others wait for that one.
    assert work.runs == 2 and len(flights.running()) == 1
    work.release.set()
    assert await asyncio.gather(*waiters) == ["done #2"] * 3


async def test_a_flight_whose_runner_was_cancelled_says_abandoned() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    work = Work()
    runner = asyncio.create_task(flights.run("k", work))
    await work.started.wait()
    (flight,) = flights.running()
    watcher = asyncio.create_task(flight.outcome())
    await settle()
    runner.cancel()
    with pytest.raises(Abandoned):
        await watcher
    assert flights.running() == []


async def test_a_failure_nobody_waited_for_is_not_reported_as_lost() -> None:
    """asyncio logs "Future exception was never retrieved" for a failed future nobody
    read; a flight that failed with no waiter (or was cancelled) must not."""
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        flights: SingleFlight[str, str] = SingleFlight()
        failing = Work(error=ValueError("alone"))
        failing.release.set()
        with pytest.raises(ValueError, match="alone"):
            await flights.run("a", failing)
        runner = asyncio.create_task(flights.run("b", Work()))
        await settle()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        del runner
        gc.collect()
        await settle()
    finally:
        loop.set_exception_handler(None)
    assert reported == []
