"""Lance compactions held at a chosen moment, for the tests of ``LanceStore``'s compaction
and purge (storage/lance_store.py) on a local directory or a bucket."""

from __future__ import annotations

import threading
from typing import Any

import lance.optimize
import pytest

from memoryd.storage import lance_store


def small_fragments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction sizes a test's few hundred rows exercise: fragments merged under 40 rows,
    steps of 40 rows, a task over 100 rows large (``LONE_TASK_ROWS``)."""
    monkeypatch.setattr(lance_store, "COMPACT_TARGET_ROWS", 40)
    monkeypatch.setattr(lance_store, "COMPACT_STEP_ROWS", 40)
    monkeypatch.setattr(lance_store, "LONE_TASK_ROWS", 100)


def hold_large_rewrites(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[threading.Event, threading.Event, list[int]]:
    """Make every compaction task over 100 rows wait (up to 10 s) before it executes until
    released: returns the event set when one waits, the one that releases it (cleared
    again by the task), and the id of each such task's first fragment, in turn."""
    real = lance.optimize.Compaction
    entered, go = threading.Event(), threading.Event()
    firsts: list[int] = []

    class Task:
        def __init__(self, task: Any) -> None:
            self.task, self.fragments = task, task.fragments

        def execute(self, ds: object) -> object:
            if sum(f.physical_rows for f in self.fragments) > 100:
                firsts.append(self.fragments[0].id)
                entered.set()
                go.wait(10)
                go.clear()
            return self.task.execute(ds)

    class Plan:
        def __init__(self, plan: Any) -> None:
            self.tasks = [Task(t) for t in plan.tasks]

    class Held:
        commit = real.commit

        @staticmethod
        def plan(ds: Any, options: Any) -> Plan:
            return Plan(real.plan(ds, options))

    monkeypatch.setattr(lance.optimize, "Compaction", Held)
    return entered, go, firsts
