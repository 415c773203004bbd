"""Prometheus metrics are scrapeable and move with the traffic."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from memoryd_client import MemorydError

pytestmark = pytest.mark.integration


def scrape(daemon) -> str:  # type: ignore[no-untyped-def]
    with urllib.request.urlopen(daemon.metrics_url(), timeout=10) as r:
        return r.read().decode()


def value(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = rf"^{re.escape(name)}" + (rf"\{{{re.escape(want)}\}}" if want else "") + r" (\S+)$"
    m = re.search(pattern, text, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def test_metrics_count_rpcs_codes_stages_and_sizes(daemon, client, new_agent) -> None:  # type: ignore[no-untyped-def]
    a = new_agent()
    before = scrape(daemon)
    client.store(a, "metrics test memory about the blue whale")
    client.recall(a, "blue whale")
    with pytest.raises(MemorydError):
        client.store(a, "")
    # A call's counters are written as its handler returns, which may be just after the
    # client has its answer: scrape until the refused Store shows (or 10 s pass).
    deadline = time.monotonic() + 10
    after = scrape(daemon)
    while (
        value(after, "memoryd_rpc_total", method="Store", code="INVALID_ARGUMENT") < 1
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
        after = scrape(daemon)
    assert (
        value(after, "memoryd_rpc_total", method="Store", code="OK")
        == value(before, "memoryd_rpc_total", method="Store", code="OK") + 1
    )
    assert value(after, "memoryd_rpc_total", method="Store", code="INVALID_ARGUMENT") >= 1
    assert value(after, "memoryd_rpc_duration_seconds_count", method="Recall") >= 1
    assert value(after, "memoryd_recall_stage_seconds_count", stage="embed") >= 1
    assert value(after, "memoryd_recall_stage_seconds_count", stage="candidates") >= 1
    assert value(after, "memoryd_memories", scope=f"agent:{a}") == 1
    assert (
        value(after, "memoryd_embed_texts_total") >= value(before, "memoryd_embed_texts_total") + 2
    )
    assert value(after, "memoryd_index_bytes") > 0
    assert value(after, "memoryd_embed_workers") >= 1  # 0 only once every worker ended
    # A small store's token file is written before SERVING: never reranking without it.
    assert re.search(r"^memoryd_token_file_writing 0\.0$", after, re.MULTILINE), after
    # A local directory has one writer: nothing to follow, so no follow gauges.
    assert "memoryd_follow_" not in after
