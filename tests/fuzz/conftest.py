"""The fuzz suite's daemon: one real ``memoryd serve`` (metrics on, so the tests can read
how many commits the store made), shared by every fuzz test and checked alive after each.

The launcher is the shared one of tests/support/memoryd_testing.

How much to fuzz: MEMORYD_FUZZ_EXAMPLES (default 30 per test) and MEMORYD_FUZZ_RANDOM=1
(explore with a random seed; by default the examples are derandomised so CI is
reproducible): ``MEMORYD_FUZZ_RANDOM=1 MEMORYD_FUZZ_EXAMPLES=500 ./dev test tests/fuzz``.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from memoryd_testing.launcher import Daemon


@dataclass
class FuzzDaemon:
    """The shared daemon and the metrics that tell whether a request wrote anything."""

    daemon: Daemon
    metrics_url: str

    @property
    def address(self) -> str:
        return self.daemon.address

    def alive(self) -> bool:
        return self.daemon.alive()

    def log_tail(self, lines: int = 60) -> str:
        return self.daemon.log_tail(lines)

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


@pytest.fixture(scope="session")
def fuzz_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzDaemon]:
    base = tmp_path_factory.mktemp("memoryd-fuzz")
    daemon = Daemon(base / "data", base / "stderr.log", {"MEMORYD_METRICS__LISTEN": "127.0.0.1:0"})
    daemon.start()
    yield FuzzDaemon(daemon, daemon.metrics_url())
    assert daemon.alive(), f"memoryd died during the fuzz run\n{daemon.log_tail()}"
    code = daemon.stop()
    assert code == 0, f"memoryd exited {code}\n{daemon.log_tail()}"
    log = daemon.log_text()
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
