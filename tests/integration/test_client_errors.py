"""The Python client raises the exception named after each status, from unary calls and
from streams, sync and asyncio, keeping the status code, the daemon's message and the
``retry-after-ms`` trailer; ``except MemorydError`` still catches every one."""

from __future__ import annotations

import asyncio
import socket
import uuid

import grpc
import pytest
from memoryd_client import (
    AsyncMemoryClient,
    DeadlineExceeded,
    InvalidArgument,
    MemoryClient,
    MemorydError,
    NotFound,
    Overloaded,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    pb,
)

pytestmark = pytest.mark.integration

TOKEN = f"s3cret-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def guarded(start_daemon):
    """A daemon with a token and a rate of one call per second per credential."""
    return start_daemon(
        env={
            "MEMORYD_AUTH_TOKEN": TOKEN,
            "MEMORYD_LIMITS__REQUESTS_PER_SECOND": "1",
            "MEMORYD_LIMITS__REQUEST_BURST": "1",
        }
    )


def test_unary_calls_raise_the_class_of_their_status(client, new_agent):
    agent = new_agent()
    missing = str(uuid.uuid4())
    with pytest.raises(NotFound) as caught:
        client.get(agent, missing)
    assert caught.value.code == grpc.StatusCode.NOT_FOUND
    assert missing in caught.value.details and caught.value.retry_after is None
    with pytest.raises(InvalidArgument, match=r"INVALID_ARGUMENT: .*text"):
        client.store(agent, "")
    with pytest.raises(PermissionDenied) as denied:
        client.store(agent, "Written into another agent's scope.", scope="agent:someone-else")
    assert "agent:someone-else" in denied.value.message
    with pytest.raises(DeadlineExceeded):
        client.recall(agent, "anything", timeout=1e-6)
    # Old handlers keep working: every class is a MemorydError.
    with pytest.raises(MemorydError) as old:
        client.get(agent, missing)
    assert isinstance(old.value, NotFound)


def test_no_daemon_is_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    with (
        MemoryClient(f"127.0.0.1:{port}", timeout=5.0, retries=0) as c,
        pytest.raises(Unavailable) as caught,
    ):
        c.stats("main")
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE


def test_streams_raise_the_class_of_their_status(guarded):
    with MemoryClient(guarded.address, token="wrong", timeout=10.0, retries=0) as c:
        with pytest.raises(Unauthenticated) as caught:
            list(c.export("main"))
        assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
        op = pb.StreamRequest(request_id="1", recall=pb.RecallRequest(agent_id="main", query="x"))
        with pytest.raises(Unauthenticated):
            list(c.stream(iter([op]), timeout=10.0))
        with pytest.raises(Unauthenticated):
            c.import_memories("main", [pb.Memory(text="Imported without the token.")])


def test_a_refusal_carries_how_long_to_wait(guarded, new_agent):
    agent = new_agent()
    with (
        MemoryClient(guarded.address, token=TOKEN, timeout=10.0, retries=0) as c,
        pytest.raises(ResourceExhausted) as caught,
    ):
        for _ in range(5):  # a burst of 1 at 1/s: the second or third call is refused
            c.stats(agent)
    error = caught.value
    assert isinstance(error, Overloaded) and error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.retry_after is not None and 0 < error.retry_after <= 1.0
    assert ("retry-after-ms", str(round(error.retry_after * 1000))) in error.trailers


async def test_asyncio_calls_and_streams_raise_the_class_of_their_status(address, new_agent):
    agent = new_agent()
    async with AsyncMemoryClient(address, timeout=10.0, retries=0) as c:
        with pytest.raises(NotFound):
            await c.get(agent, str(uuid.uuid4()))
        with pytest.raises(InvalidArgument):
            await c.store(agent, "   ")
        op = pb.StreamRequest(request_id="1", recall=pb.RecallRequest(agent_id=agent, query="x"))

        async def ops():
            yield op
            await asyncio.Event().wait()  # the session stays open past its deadline

        answered = []
        with pytest.raises(DeadlineExceeded):
            async for response in c.stream(ops(), timeout=1.0):
                answered.append(response.request_id)
        assert answered == ["1"]
