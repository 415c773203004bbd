"""The fuzz suite's daemon: one real ``memoryd serve`` (metrics on, so the tests can read
how many commits the store made), shared by every fuzz test and checked alive after each.

The launcher repeats tests/integration's on purpose: conftest modules of sibling
directories cannot import each other in importlib mode.

How much to fuzz: MEMORYD_FUZZ_EXAMPLES (default 30 per test) and MEMORYD_FUZZ_RANDOM=1
(explore with a random seed; by default the examples are derandomised so CI is
reproducible): ``MEMORYD_FUZZ_RANDOM=1 MEMORYD_FUZZ_EXAMPLES=500 ./dev test tests/fuzz``.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0


@dataclass
class FuzzDaemon:
    address: str
    metrics_url: str
    log_path: Path
    process: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def writes(self) -> tuple[float, float]:
        """(commits, rows written) of the durable store so far: what a refused request must
        leave as it was. Access-count flushes go to another table and are not counted."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            text = response.read().decode()
        values = []
        for name in ("memoryd_store_commits_total", "memoryd_store_rows_written_total"):
            match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
            assert match, f"{name} not in the metrics"
            values.append(float(match.group(1)))
        return values[0], values[1]


def _spawn(data_dir: Path, log_path: Path) -> FuzzDaemon:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["MEMORYD_METRICS__LISTEN"] = "127.0.0.1:0"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "serve", "--listen", "127.0.0.1:0",
             "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
        )  # fmt: skip
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"memoryd did not serve within {START_TIMEOUT}s")
            if sel.select(timeout=1.0):
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    pytest.fail(f"memoryd exited before serving:\n{log_path.read_text()[-3000:]}")
                line += chunk
    address = line.decode().strip().removeprefix("memoryd serving on ")
    found = re.search(r"metrics on (http://\S+/metrics)", log_path.read_text())
    assert found, "the daemon did not log its metrics address"
    return FuzzDaemon(address, found.group(1), log_path, process)


@pytest.fixture(scope="session")
def fuzz_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzDaemon]:
    base = tmp_path_factory.mktemp("memoryd-fuzz")
    daemon = _spawn(base / "data", base / "stderr.log")
    yield daemon
    assert daemon.alive(), f"memoryd died during the fuzz run\n{daemon.log_tail()}"
    daemon.process.send_signal(signal.SIGTERM)
    try:
        code = daemon.process.wait(timeout=STOP_TIMEOUT)
    finally:
        if daemon.process.stdout is not None:
            daemon.process.stdout.close()
    assert code == 0, f"memoryd exited {code}\n{daemon.log_tail()}"
    log = daemon.log_path.read_text(errors="replace")
    assert "Traceback" not in log, daemon.log_tail(200)
    # Thousands of hostile requests leave a few lines of memoryd's own: no gRPC core
    # chatter, no per-request warnings (those are rate-limited).
    foreign = [line for line in log.splitlines() if not re.search(r" memoryd[.\w]* \[", line)]
    assert not foreign, foreign[:20]
    assert len(log.splitlines()) < 100, daemon.log_tail(200)


@pytest.fixture
def daemon(fuzz_daemon: FuzzDaemon) -> Iterator[FuzzDaemon]:
    yield fuzz_daemon
    assert fuzz_daemon.alive(), f"memoryd died\n{fuzz_daemon.log_tail()}"
