"""A daemon whose embedding workers end by a fault says so: each call is answered at once
(UNAVAILABLE) and its health turns NOT_SERVING, rather than Recalls and Stores waiting
until their deadline while health says SERVING."""

from __future__ import annotations

import re
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memoryd_client import MemoryClient, Unavailable
from memoryd_testing.launcher import Daemon

pytestmark = pytest.mark.integration

# memoryd serve with one fault injected: handing back the embedding of a text that starts
# with FAULT raises SystemExit in the worker thread (a fault of the batcher, not the model).
FAULTY = textwrap.dedent(
    """
    import sys
    from memoryd.inference import batcher

    answer = batcher.BatchingEmbedder._answer

    def faulty(self, job, callback, value):
        if job.text.startswith("FAULT") and not isinstance(value, BaseException):
            raise SystemExit("an injected fault in the embedding worker")
        answer(self, job, callback, value)

    batcher.BatchingEmbedder._answer = faulty
    from memoryd.cli import main
    sys.exit(main())
    """
)


def health(channel: grpc.Channel, service: str) -> int:
    request = health_pb2.HealthCheckRequest(service=service)
    return health_pb2_grpc.HealthStub(channel).Check(request, timeout=10).status


def test_when_every_embedding_worker_has_stopped_calls_fail_at_once_and_health_says_so(
    tmp_path: Path,
) -> None:
    env = {"MEMORYD_METRICS__LISTEN": "127.0.0.1:0", "MEMORYD_EMBEDDER__WORKERS": "2"}
    daemon = Daemon(tmp_path / "data", tmp_path / "d.log", env, program=("-c", FAULTY))
    agent = f"a-{uuid.uuid4().hex[:8]}"
    try:
        daemon.start()
        with (
            MemoryClient(daemon.address, timeout=60.0, retries=0) as client,
            grpc.insecure_channel(daemon.address) as channel,
        ):
            kept = client.store(agent, "The blue whale is the largest animal ever known").memory.id
            # The first fault ends one worker; its call fails, the other worker goes on.
            with pytest.raises(Unavailable, match="an embedding worker stopped; retry"):
                client.recall(agent, "FAULT one")
            assert [h.memory.id for h in client.recall(agent, "largest animal").results] == [kept]
            assert health(channel, "") == health_pb2.HealthCheckResponse.SERVING
            # The second ends the last one.
            with pytest.raises(Unavailable, match="retry"):
                client.recall(agent, "FAULT two")
            began = time.monotonic()
            with pytest.raises(Unavailable, match="workers stopped"):
                client.recall(agent, "what is the largest animal")
            with pytest.raises(Unavailable, match="workers stopped"):
                client.store(agent, "a Store needs the model too")
            assert time.monotonic() - began < 10  # not the 60 s deadline
            deadline = time.monotonic() + 10  # the health job looks every second
            while health(channel, "") != health_pb2.HealthCheckResponse.NOT_SERVING:
                assert time.monotonic() < deadline, "health stayed SERVING"
                time.sleep(0.2)
            for service in ("memoryd.v1.MemoryService", "memoryd.v1.HookService"):
                assert health(channel, service) == health_pb2.HealthCheckResponse.NOT_SERVING
            assert client.get(agent, kept).text.startswith("The blue whale")  # reads go on
            with urllib.request.urlopen(daemon.metrics_url(), timeout=10) as r:
                metrics = r.read().decode()
            assert re.search(r"^memoryd_embed_workers 0\.0$", metrics, re.MULTILINE), metrics
        log = daemon.log_text()
        assert "embedding worker 0 failed" in log and "embedding worker 1 failed" in log
        assert "an injected fault in the embedding worker" in log
    finally:
        daemon.stop()
