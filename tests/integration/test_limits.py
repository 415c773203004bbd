"""Rate limits per credential (per agent with auth off): a refused call carries
``retry-after-ms`` and changes nothing, the client waits and retries, another agent is not
held back, and Stream ops are paced instead of refused."""

from __future__ import annotations

import uuid

import grpc
import pytest
from memoryd_client import MemoryClient, pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc
from memoryd_testing.memories import store_frames

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def limited(start_daemon):
    return start_daemon(
        env={"MEMORYD_LIMITS__REQUESTS_PER_SECOND": "2", "MEMORYD_LIMITS__REQUEST_BURST": "2"}
    )


def test_a_call_over_the_rate_is_refused_with_retry_after_and_changes_nothing(limited):
    agent = f"rl-{uuid.uuid4().hex[:8]}"
    with grpc.insecure_channel(limited.address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        refused = None
        for i in range(6):
            try:
                stub.Store(pb.StoreRequest(agent_id=agent, text=f"Rate probe {i}."), timeout=30)
            except grpc.RpcError as e:
                refused = (e, i)
                break
        assert refused is not None, "six stores in a burst of 2 at 2/s all passed"
        error, at = refused
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "retry in" in error.details()
        trailers = dict(error.trailing_metadata())
        assert 0 < int(trailers["retry-after-ms"]) <= 1000
        # Another agent has its own bucket; the refused store was not stored.
        other = stub.Stats(pb.StatsRequest(agent_id=f"rl-{uuid.uuid4().hex[:8]}"), timeout=30)
        assert other.total == 0
    with MemoryClient(limited.address, timeout=30.0, retries=5) as c:
        texts = {m.text for m in c.list_all(agent)}
        assert f"Rate probe {at}." not in texts and len(texts) == at


def test_the_client_waits_as_told_and_gets_through(limited):
    agent = f"rl-{uuid.uuid4().hex[:8]}"
    with MemoryClient(limited.address, timeout=30.0, retries=5) as c:
        ids = [c.store(agent, f"Patient store number {i}.").memory.id for i in range(5)]
        assert len(set(ids)) == 5  # none refused, none stored twice
        assert c.stats(agent).total == 5


async def test_stream_ops_over_the_rate_are_paced_not_refused(limited, run_stream):
    agent = f"rl-{uuid.uuid4().hex[:8]}"
    requests = store_frames(agent, [f"Streamed fact {i}." for i in range(6)])
    answers = await run_stream(requests, target=limited.address)
    assert all(a.WhichOneof("result") == "store" for a in answers.values()), answers
