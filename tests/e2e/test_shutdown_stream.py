"""SIGTERM with a Stream open: the ops already started finish and are answered, no op sent
after the signal runs, the stream ends UNAVAILABLE (so the host knows to resend the rest),
and the daemon exits without waiting out its grace period for the idle stream."""

from __future__ import annotations

import queue
import signal
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc as pbg

pytestmark = pytest.mark.e2e

GRACE_SECONDS = 60


def _store(rid: str, text: str) -> pb.StreamRequest:
    return pb.StreamRequest(request_id=rid, store=pb.StoreRequest(agent_id="a", text=text))


def _wait_for_the_drain(channel: grpc.Channel, timeout: float = 30.0) -> None:
    """Until the daemon has begun its shutdown: health leaves SERVING in the same step
    that stops open Streams reading (or, once the server stops, calls are refused)."""
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = health.Check(health_pb2.HealthCheckRequest(), timeout=5).status
        except grpc.RpcError:
            return
        if status != health_pb2.HealthCheckResponse.SERVING:
            return
        assert time.monotonic() < deadline, "the daemon never began its shutdown"
        time.sleep(0.05)


def test_sigterm_stops_a_stream_reading_new_ops_and_ends_it_unavailable(make_daemon):
    daemon = make_daemon({"MEMORYD_SERVER__SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS)}).start()
    ops: queue.Queue[pb.StreamRequest | None] = queue.Queue()

    def requests():
        while (op := ops.get()) is not None:
            yield op

    with grpc.insecure_channel(daemon.address) as channel:
        responses = pbg.MemoryServiceStub(channel).Stream(requests())
        ops.put(_store("before", "The user keeps bees on the roof"))
        first = next(responses)
        assert first.request_id == "before" and first.store.memory.id

        assert daemon.process is not None
        daemon.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # Not a fixed sleep: a loaded machine may take longer to act on the signal, and
        # the op below would then run before the drain, failing the test.
        _wait_for_the_drain(channel)
        ops.put(_store("after", "The user sold the bees"))

        with pytest.raises(grpc.RpcError) as ended:
            rest = list(responses)
            pytest.fail(f"the stream ended OK after SIGTERM with {rest}")
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE, ended.value
        assert "shutting down" in (ended.value.details() or "")
        ops.put(None)

    code = daemon._reap(GRACE_SECONDS)
    took = time.monotonic() - signalled
    assert code == 0, daemon.log_tail()
    assert took < GRACE_SECONDS / 2, f"exit took {took:.1f}s: the idle stream held the grace period"

    daemon.start()  # same data dir: the op sent after SIGTERM never ran
    with grpc.insecure_channel(daemon.address) as channel:
        listed = pbg.MemoryServiceStub(channel).List(pb.ListRequest(agent_id="a"))
    assert [m.text for m in listed.memories] == ["The user keeps bees on the roof"]
