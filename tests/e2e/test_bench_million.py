"""``bench/million.py`` on a tiny layout: the store it writes directly (memoryd's own table
and row code, no Stores) is one the daemon opens whole and answers Recall from, and the
cold-scope probe reads each agent's rows back by scope. Timings are only checked to exist
(bench/RESULTS.md holds figures, never a test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from memoryd_testing.launcher import child_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
# As bench/peers.py looks for it (the pool's texts start with LoCoMo's turns).
LOCOMO = next(
    (path for d in ROOT.parents if (path := d / "shared/datasets/locomo/locomo10.json").is_file()),
    ROOT.parent / "shared/datasets/locomo/locomo10.json",
)


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo is not at {LOCOMO}")
def test_daemon_serves_the_store_the_script_writes(tmp_path: Path) -> None:
    out = tmp_path / "million.json"
    cmd = [sys.executable, "bench/million.py", "--layouts", "10x20", "--pool", "40"]
    cmd += ["--queries", "5", "--warmup", "1", "--no-baseline", "--cold-scopes", "3", "--restart"]
    cmd += ["--tmp", str(tmp_path), "--cache", str(tmp_path / "cache"), "--json", str(out)]
    run = subprocess.run(
        cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=240
    )
    assert run.returncode == 0, run.stderr[-3000:]
    [result] = json.loads(out.read_text())
    assert result["layout"] == "10 agents x 20" and result["memories"] == 200
    # The daemon loaded every row written; their token vectors (written by the script)
    # live in the daemon's tokens.bin, not in its index, which holds less than they take.
    assert result["store_rows"] == 200
    assert result["token_bytes"] > 200 * 384
    assert 200 * 384 < result["index_bytes"] < result["token_bytes"]
    # Every Recall (one agent each) found that agent's memories.
    assert result["recall"]["n"] == 5 and 0 < result["recall"]["p50"] <= result["recall"]["p99"]
    assert result["recalls_found"] == 6
    assert result["rss_start"] > 0 and result["rss_end"] > 0
    # Started again after its clean stop, the daemon reused its token file and read less.
    again = result["restart"]
    assert again["token_file"] == "reused" and again["store_rows"] == 200
    assert again["io_start"]["wchar"] < result["io_start"]["wchar"]
    cold = result["cold"]
    assert cold["scopes"] == 3 and cold["rows_per_scope"] == 20
    assert "| 10 agents x 20 | 200 |" in run.stdout
    # Stores go under --tmp and are removed at the end; the pool stays in its cache.
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("memoryd-bench")] == []
    assert list((tmp_path / "cache").glob("million-pool-40-*.npz"))
