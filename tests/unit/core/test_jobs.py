"""Background jobs: one that fails is logged and runs again, and never stops the others."""

from __future__ import annotations

import asyncio
import logging

import pytest

from memoryd.core.errors import StorageFull
from memoryd.core.jobs import Job, Jobs


async def _until(condition: object, seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_a_failing_job_is_logged_and_the_others_keep_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []

    async def broken() -> None:
        raise RuntimeError("the disk said no")

    async def full() -> None:
        raise StorageFull("no space left on device")

    async def steady() -> None:
        done.append("steady")

    jobs = Jobs(
        [
            Job("broken", 0.01, broken),
            Job("full", 0.01, full),
            Job("steady", 0.01, steady),
        ]
    )
    with caplog.at_level(logging.WARNING, logger="memoryd.core.jobs"):
        jobs.start()
        try:
            await _until(lambda: jobs.failures["broken"] >= 3 and jobs.failures["full"] >= 3)
            await _until(lambda: len(done) >= 3)
        finally:
            await jobs.stop()
    assert jobs.runs["steady"] >= 3 and jobs.runs["broken"] == 0
    broken_lines = [r for r in caplog.records if "'broken' failed" in r.getMessage()]
    assert broken_lines and broken_lines[0].exc_info is not None  # with its traceback
    assert "the disk said no" in str(broken_lines[0].exc_info[1])
    full_lines = [r for r in caplog.records if "'full' postponed" in r.getMessage()]
    assert full_lines and full_lines[0].exc_info is None  # a full disk: one line, no trace


async def test_stop_cancels_a_job_in_the_middle_of_a_run() -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    jobs = Jobs([Job("slow", 0.01, slow, first_after=0.0)])
    jobs.start()
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.wait_for(jobs.stop(), 10)
    assert cancelled == [True]
