"""Fixtures for the end-to-end tests: memoryd daemons the tests may kill and restart
(the shared launcher of tests/support/memoryd_testing), and the installed CLI."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from memoryd_testing.launcher import Daemon, child_env


@pytest.fixture(scope="module")
def make_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Daemon]]:
    """Factory of (not yet started) daemons, each on its own fresh data dir:
    ``make_daemon(env, **launcher options)`` (``listen``, ``args``, ...).

    At the end of the module every daemon still running is stopped with SIGTERM and must
    exit 0.
    """
    made: list[Daemon] = []

    def make(env: Mapping[str, str] = {}, **options: Any) -> Daemon:
        base = tmp_path_factory.mktemp("memoryd-e2e")
        daemon = Daemon(base / "data", base / "stderr.log", env, **options)
        made.append(daemon)
        return daemon

    yield make
    codes = {d.address: (d.stop(), d.log_tail()) for d in made if d.process is not None}
    bad = {a: c for a, c in codes.items() if c[0] != 0}
    assert not bad, bad


@pytest.fixture
def new_agent() -> Callable[[], str]:
    def make() -> str:
        return f"e2e-{uuid.uuid4().hex[:16]}"

    return make


@pytest.fixture(scope="module")
def memoryd_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``memoryd_cli(*args, env={...})``: run the installed ``memoryd`` entry point."""
    executable = str(Path(sys.executable).with_name("memoryd"))

    def run(*args: str, env: Mapping[str, str] = {}) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [executable, *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=child_env(env),
        )

    return run
