"""``bench/fleet.py`` runs end to end on two daemons over one bucket of a moto server it
starts itself, and reports what a reader relies on: every Store and Recall answered without
an error, the table's commits counted, every visibility sample seen on the other daemon
(by Get and by Recall), and a commit row for the bucket and the local directory. Timings
are only checked to exist (bench/RESULTS.md holds figures, never a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from memoryd_testing.launcher import child_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def rows(markdown: str, first: str) -> list[list[str]]:
    """The cells of every table row of ``markdown`` whose first cell is ``first``."""
    out = []
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            out.append(cells)
    return out


def test_two_daemons_over_one_bucket_store_recall_and_see_each_other(tmp_path: Path) -> None:
    out = tmp_path / "fleet.md"
    cmd = [sys.executable, "bench/fleet.py", "--daemons", "2", "--stores", "6"]
    cmd += ["--recalls", "6", "--lag-samples", "4", "--commits", "3", "--out", str(out)]
    run = subprocess.run(
        cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert out.read_text().strip() == run.stdout.strip()  # --out: the printed report

    calls = {r[1]: r for r in rows(run.stdout, "2") if len(r) == 9}
    assert set(calls) == {"Store", "Recall"}, run.stdout
    for row in calls.values():
        answered, errors, per_s, p50, p99 = row[2], row[3], row[4], row[5], row[7]
        assert (answered, errors) == ("6", "0"), row
        assert float(per_s) > 0 and 0 < float(p50) <= float(p99), row
    assert float(calls["Store"][8]) > 0, calls["Store"]  # the table took commits

    lags = {r[1]: r for r in rows(run.stdout, "2") if r[1] in ("Get", "Recall") and len(r) == 8}
    assert set(lags) == {"Get", "Recall"}, run.stdout
    for row in lags.values():
        samples, missing, p50 = row[2], row[3], row[4]
        assert (samples, missing) == ("2", "0"), row  # every Store seen on the other daemon
        assert float(p50) > 0, row

    for store in ("local directory", "moto S3 on loopback"):
        (row,) = rows(run.stdout, store)
        assert row[1] == "3" and float(row[2]) > 0, row
