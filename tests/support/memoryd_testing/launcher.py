"""Start ``memoryd serve`` as a child process, the one way tests and benchmarks do it.

A ``Daemon`` is a data dir, a log file and settings; ``start()`` spawns
``python -m memoryd serve --listen 127.0.0.1:0 --data-dir DIR`` (a free loopback port
chosen by the kernel) and returns once the daemon prints ``memoryd serving on HOST:PORT``
(models loaded, index built, kernels compiled); ``stop()`` sends SIGTERM and returns the
exit code, ``kill()`` is kill -9. A stopped or killed daemon can be started again on the
same data dir; the log file keeps every run, ``log_text()`` is the current run's.

By default ``MEMORYD_*`` settings of the calling shell do not reach the child (a test must
not depend on the developer's environment); benchmarks pass ``inherit_memoryd_env=True``
so that ``MEMORYD_...=x ./dev bench ...`` configures the daemon under test.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
SERVING_PREFIX = "memoryd serving on "


class LaunchError(RuntimeError):
    """The daemon did not start, or did not stop on SIGTERM; the message ends with the
    tail of its log. ``code`` is its exit code where it exited."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def child_env(extra: Mapping[str, str] = {}, *, inherit_memoryd: bool = False) -> dict[str, str]:
    """This process's environment for a child memoryd, ``extra`` on top; without
    ``inherit_memoryd`` no ``MEMORYD_*`` setting leaks in from the shell."""
    env = {k: v for k, v in os.environ.items() if inherit_memoryd or not k.startswith("MEMORYD_")}
    env.update(extra)
    return env


def first_line(process: subprocess.Popen[bytes], timeout: float) -> str | None:
    """The first line ``process`` prints on its stdout pipe, stripped; None if the pipe
    closes first (it exited). Raises ``TimeoutError`` after ``timeout`` seconds."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no line within {timeout}s")
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                return None
            line += chunk
    return line.decode().strip()


@dataclass
class Daemon:
    """One ``memoryd serve`` on a data dir; ``start`` again after ``kill`` or ``stop``."""

    data_dir: Path
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    inherit_memoryd_env: bool = False
    listen: str = "127.0.0.1:0"
    args: Sequence[str] = ()  # more `memoryd serve` flags
    # What the interpreter runs: `-m memoryd`, or a script that takes the same arguments
    # (bench/profile_recall.py runs the daemon with its timers installed).
    program: Sequence[str] = ("-m", "memoryd")
    start_timeout: float = START_TIMEOUT
    stop_timeout: float = STOP_TIMEOUT
    address: str = ""
    process: subprocess.Popen[bytes] | None = None
    _log_offset: int = 0  # where the current run's lines start in the log file

    @property
    def pid(self) -> int:
        assert self.process is not None, "not running"
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> Daemon:
        """Spawn the daemon and wait for its "serving on" line; raises ``LaunchError``."""
        assert self.process is None, "already running"
        cmd = [sys.executable, *self.program, "serve", "--listen", self.listen]
        cmd += ["--data-dir", str(self.data_dir), *self.args]
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,  # not the caller's (bench/peers.py's is its step pipe)
                stdout=subprocess.PIPE,
                stderr=log,
                env=child_env(self.env, inherit_memoryd=self.inherit_memoryd_env),
            )
        line = self._first_line()
        if not line.startswith(SERVING_PREFIX):
            self.kill()
            raise LaunchError(f"unexpected first line {line!r}\n{self.log_tail()}")
        self.address = line[len(SERVING_PREFIX) :]
        return self

    def _first_line(self) -> str:
        assert self.process is not None
        try:
            line = first_line(self.process, self.start_timeout)
        except TimeoutError:
            self.kill()
            raise LaunchError(
                f"memoryd did not serve within {self.start_timeout}s\n{self.log_tail()}"
            ) from None
        if line is None:
            code = self._reap(self.stop_timeout)
            raise LaunchError(f"memoryd exited with {code} before serving\n{self.log_tail()}", code)
        return line

    def _reap(self, timeout: float) -> int:
        process = self.process
        assert process is not None
        try:
            code = process.wait(timeout=timeout)
        finally:
            if process.stdout is not None and process.returncode is not None:
                process.stdout.close()
        self.process = None
        return code

    def kill(self) -> int | None:
        """kill -9: no shutdown, no flush. Returns the exit code (None if not running)."""
        if self.process is None:
            return None
        self.process.kill()
        return self._reap(self.stop_timeout)

    def stop(self, *, kill: bool = False) -> int | None:
        """SIGTERM (or, with ``kill``, SIGKILL) and wait; returns the exit code (0 is a
        clean shutdown; None if it was not running). A daemon still running
        ``stop_timeout`` seconds after SIGTERM is killed, then ``LaunchError`` is raised."""
        if self.process is None:
            return None
        if kill:
            return self.kill()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self._reap(self.stop_timeout)
        except subprocess.TimeoutExpired:
            code = self.kill()
            raise LaunchError(
                f"memoryd did not exit within {self.stop_timeout}s of SIGTERM\n{self.log_tail()}",
                code,
            ) from None

    def log_text(self) -> str:
        """The log of the current (or last) run only: a restart appends to the same file."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as f:
            f.seek(self._log_offset)
            return f.read().decode("utf-8", errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def metrics_url(self) -> str:
        """The Prometheus endpoint the current run logged (``metrics.listen`` set)."""
        found = re.search(r"metrics on (http://\S+/metrics)", self.log_text())
        assert found, "the daemon did not log a metrics address (is metrics.listen set?)"
        return found.group(1)
