"""Bearer-token auth: with MEMORYD_AUTH_TOKEN set, every MemoryService call needs the
token; health stays open for probes."""

from __future__ import annotations

import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memoryd_client import MemoryClient, MemorydError, pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc
from memoryd_testing.memories import store_frames

pytestmark = pytest.mark.integration

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
TOKEN = f"s3cret-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def auth_address(start_daemon):
    return start_daemon(env={"MEMORYD_AUTH_TOKEN": TOKEN}).address


@pytest.fixture
def auth_channel(auth_address):
    with grpc.insecure_channel(auth_address) as ch:
        yield ch


def _unary_calls(agent: str, memory_id: str):
    return [
        ("Store", pb.StoreRequest(agent_id=agent, text="Written without a token.")),
        ("Recall", pb.RecallRequest(agent_id=agent, query="token")),
        ("Forget", pb.ForgetRequest(agent_id=agent, id=memory_id)),
        ("Update", pb.UpdateRequest(agent_id=agent, id=memory_id, importance=0.1)),
        ("Get", pb.GetRequest(agent_id=agent, id=memory_id)),
        ("List", pb.ListRequest(agent_id=agent)),
        ("Stats", pb.StatsRequest(agent_id=agent)),
    ]


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param((), id="no-token"),
        pytest.param((("authorization", "Bearer wrong-token"),), id="wrong-token"),
        pytest.param((("authorization", TOKEN),), id="missing-bearer-prefix"),
        pytest.param((("authorization", f"Bearer {TOKEN}x"),), id="token-with-suffix"),
    ],
)
def test_calls_without_the_right_token_are_unauthenticated(
    auth_address, auth_channel, raw_rejects, metadata
):
    with MemoryClient(auth_address, token=TOKEN, retries=0) as authed:
        agent = f"auth-{uuid.uuid4().hex[:12]}"
        memory = authed.store(agent, "The user wakes up at six every morning.").memory
        stub = memory_pb2_grpc.MemoryServiceStub(auth_channel)
        for method, request in _unary_calls(agent, memory.id):
            raw_rejects(
                UNAUTHENTICATED,
                getattr(stub, method),
                request,
                metadata=metadata,
                mentions=["authorization", "Bearer"],
            )
        # None of the refused calls changed anything.
        assert authed.get(agent, memory.id).text == memory.text
        assert authed.stats(agent).total == 1


async def test_stream_without_the_token_is_unauthenticated(auth_address, run_stream):
    for token in (None, "wrong"):
        with pytest.raises(MemorydError) as caught:
            await run_stream([], target=auth_address, token=token)
        assert caught.value.code == UNAUTHENTICATED
        assert "authorization" in caught.value.message


async def test_stream_ops_without_the_token_are_refused(auth_address, run_stream):
    agent = f"auth-{uuid.uuid4().hex[:12]}"
    requests = store_frames(agent, [f"No token {i}." for i in range(5)])
    for token in (None, "wrong"):
        with pytest.raises(MemorydError) as caught:
            await run_stream(requests, target=auth_address, token=token)
        # grpc's aio client may report a bidi call that the server ended while the client
        # was still writing as INTERNAL "Internal error from Core" instead of the server's
        # status; either way the call is refused, which is what matters here.
        assert caught.value.code == UNAUTHENTICATED or (
            caught.value.code == grpc.StatusCode.INTERNAL
            and caught.value.message == "Internal error from Core"
        ), caught.value
    with MemoryClient(auth_address, token=TOKEN) as authed:
        assert authed.stats(agent).total == 0


async def test_the_right_token_works_for_every_rpc(auth_address, run_stream):
    agent = f"auth-{uuid.uuid4().hex[:12]}"
    with MemoryClient(auth_address, token=TOKEN, retries=0) as c:
        m = c.store(agent, "Jack is the point of contact for the Berlin office.").memory
        assert c.get(agent, m.id).text == m.text
        assert c.recall(agent, "Berlin office contact").results[0].memory.id == m.id
        assert c.update(agent, m.id, importance=0.3).memory.importance == pytest.approx(0.3)
        assert c.list(agent).total_size == 1
        assert c.stats(agent).total == 1
        answers = await run_stream(
            [pb.StreamRequest(request_id="s", recall=pb.RecallRequest(agent_id=agent, query="x"))],
            target=auth_address,
            token=TOKEN,
        )
        assert answers["s"].WhichOneof("result") == "recall"
        assert list(c.forget(agent, id=m.id).deleted_ids) == [m.id]


def test_health_needs_no_token(auth_channel):
    health = health_pb2_grpc.HealthStub(auth_channel)
    for service in ("", "memoryd.v1.MemoryService"):
        r = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert r.status == health_pb2.HealthCheckResponse.SERVING
