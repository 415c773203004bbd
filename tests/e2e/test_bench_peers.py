"""``bench/peers.py --quick`` runs end to end for memoryd and one peer (faiss, which the
daemon itself depends on, so it needs no bench extra) and reports what a reader relies on:
every layout's rows and latencies for both, LoCoMo quality scored from the right evidence.
Timings are only checked to exist (bench/RESULTS.md holds figures, never a test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from memoryd_testing.launcher import child_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
# As bench/peers.py looks for it: the nearest shared/datasets/ beside the clone or above.
LOCOMO = next(
    (path for d in ROOT.parents if (path := d / "shared/datasets/locomo/locomo10.json").is_file()),
    ROOT.parent / "shared/datasets/locomo/locomo10.json",
)
LAYOUTS = {"300 memories, one agent": 300, "4 agents x 50": 200}  # peers.QUICK["sizes"]


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo is not at {LOCOMO}")
def test_quick_run_measures_memoryd_and_a_peer_on_every_layout(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    cmd = [sys.executable, "bench/peers.py", "--quick", "--systems", "memoryd,faiss"]
    run = subprocess.run(
        [*cmd, "--json", str(out)],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["versions"]["faiss"] == "1.15.1"

    got = {(r["system"], r["layout"]): r for r in report["layouts"]}
    assert set(got) == {(s, lay) for s in ("memoryd", "faiss") for lay in LAYOUTS}
    for (system, layout), r in got.items():
        total = LAYOUTS[layout]
        # memoryd answers a near-duplicate with the memory it has: at most a few of these.
        assert 0.9 * total <= r["rows"] <= total, (system, layout, r["rows"])
        assert r["ingested"] == total and r["ingest_per_s"] > 0
        assert r["rss_bytes"] > 0 and r["rss_base_bytes"] > 0
        for phase in ("miss", "cached"):
            stats = r["runs"][0][phase]
            assert stats["n"] == 30 and 0 < stats["p50"] <= stats["p99"], (system, phase)

    # LoCoMo's first conversation: the hybrid pipeline finds more evidence than cosine
    # alone (RESULTS.md: 0.67 against 0.45 over all ten), and a vector-only peer scores
    # like the vector-only baseline, which it only does with the turns mapped right.
    quality = report["quality"]
    assert quality["memoryd"]["questions"] == quality["faiss"]["questions"] > 100
    assert 0.3 < quality["faiss"]["recall@10"] < 0.6
    assert quality["memoryd"]["recall@10"] > quality["faiss"]["recall@10"] + 0.1
    assert quality["memoryd"]["mrr"] > quality["faiss"]["mrr"]

    for name in ("| memoryd |", "| faiss |", "miss p50 / memoryd", "recall@10"):
        assert name in run.stdout
