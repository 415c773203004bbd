"""SIGTERM with a Stream open: the ops already started finish and are answered, no op sent
after the signal runs, the stream ends UNAVAILABLE (so the host knows to resend the rest),
and the daemon exits without waiting out its grace period for the idle stream."""

from __future__ import annotations

import queue
import signal
import time

import grpc
import pytest
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc as pbg

pytestmark = pytest.mark.e2e

GRACE_SECONDS = 60


def _store(rid: str, text: str) -> pb.StreamRequest:
    return pb.StreamRequest(request_id=rid, store=pb.StoreRequest(agent_id="a", text=text))


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
        time.sleep(1.0)  # the daemon has begun its shutdown
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
