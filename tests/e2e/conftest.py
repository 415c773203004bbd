"""Fixtures for the end-to-end tests: memoryd daemons the tests may kill and restart.

This repeats the small launcher of tests/integration/conftest.py on purpose: conftest
modules of sibling directories cannot import each other in importlib mode, and these
tests also need kill -9 and restarts on the same data dir.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0


def child_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment of a child memoryd: no MEMORYD_* settings leak in from the shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update(extra)
    return env


@dataclass
class Daemon:
    """One ``memoryd serve`` on a data dir; ``start`` again after ``kill`` or ``stop``."""

    data_dir: Path
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    address: str = ""
    process: subprocess.Popen[bytes] | None = None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> Daemon:
        assert self.process is None, "already running"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "memoryd",
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--data-dir",
                    str(self.data_dir),
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                env=child_env(self.env),
            )
        self.address = self._wait_for_serving()
        return self

    def _wait_for_serving(self) -> str:
        process = self.process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        with selectors.DefaultSelector() as sel:
            sel.register(process.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    pytest.fail(f"memoryd did not serve within {START_TIMEOUT}s\n{self.log_tail()}")
                if not sel.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    code = self._reap(STOP_TIMEOUT)
                    pytest.fail(f"memoryd exited with {code} before serving\n{self.log_tail()}")
                line += chunk
        text = line.decode().strip()
        prefix = "memoryd serving on "
        assert text.startswith(prefix), f"unexpected first line {text!r}"
        return text[len(prefix) :]

    def _reap(self, timeout: float) -> int:
        process = self.process
        assert process is not None
        try:
            code = process.wait(timeout=timeout)
        finally:
            if process.stdout is not None:
                process.stdout.close()
        self.process = None
        return code

    def kill(self) -> None:
        """kill -9: no shutdown, no flush."""
        if self.process is not None:
            self.process.kill()
            self._reap(STOP_TIMEOUT)

    def stop(self) -> int:
        """SIGTERM; returns the exit code (0 expected)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self._reap(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"memoryd did not exit within {STOP_TIMEOUT}s of SIGTERM\n{self.log_tail()}"
            ) from None


@pytest.fixture(scope="module")
def make_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Daemon]]:
    """Factory of (not yet started) daemons, each on its own fresh data dir.

    At the end of the module every daemon still running is stopped with SIGTERM and must
    exit 0.
    """
    made: list[Daemon] = []

    def make(env: Mapping[str, str] = {}) -> Daemon:
        base = tmp_path_factory.mktemp("memoryd-e2e")
        daemon = Daemon(base / "data", base / "stderr.log", env)
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
