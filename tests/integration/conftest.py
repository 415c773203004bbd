"""Fixtures for the integration tests: real memoryd daemons on free loopback ports.

One daemon (``daemon``) is shared by the whole session; every test writes under its own
fresh agent ids (``new_agent``) so tests stay independent of each other and of order.
Tests that need other settings (an auth token, a small ``store.max_chars``) start their
own daemon through ``start_daemon``. The launcher and the sample memories are the shared
ones of tests/support/memoryd_testing; helpers live here as fixtures because test modules
are imported in importlib mode and cannot import each other.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import grpc
import pytest
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc
from memoryd_testing.launcher import Daemon
from memoryd_testing.memories import FACTS, memory_content
from memoryd_testing.s3 import S3Server


@pytest.fixture(scope="session")
def start_daemon(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Daemon]]:
    """Factory: ``start_daemon(env={...})`` starts a daemon with its own data dir.

    Every daemon started here is stopped with SIGTERM at the end of the session and
    must exit 0.
    """
    started: list[Daemon] = []

    def start(env: Mapping[str, str] = {}) -> Daemon:
        base = tmp_path_factory.mktemp("memoryd")
        daemon = Daemon(base / "data", base / "stderr.log", env).start()
        started.append(daemon)
        return daemon

    yield start
    failures = []
    for daemon in started:
        code = daemon.stop()
        if code != 0:
            failures.append(f"{daemon.address} exited {code}\n{daemon.log_tail()}")
    assert not failures, "\n\n".join(failures)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """An S3-compatible server (moto) on loopback, one per test module; each test takes
    buckets of its own (``s3.new_bucket()``)."""
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def daemon(start_daemon: Callable[..., Daemon]) -> Daemon:
    """The daemon shared by every test that needs no special settings (metrics on)."""
    return start_daemon(env={"MEMORYD_METRICS__LISTEN": "127.0.0.1:0"})


@pytest.fixture(scope="session")
def address(daemon: Daemon) -> str:
    return daemon.address


@pytest.fixture
def client(address: str) -> Iterator[MemoryClient]:
    with MemoryClient(address, timeout=30.0, retries=0) as c:
        yield c


@pytest.fixture
def channel(address: str) -> Iterator[grpc.Channel]:
    """A plain channel for raw stubs (health, reflection, hand-built requests)."""
    with grpc.insecure_channel(address) as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.Channel) -> memory_pb2_grpc.MemoryServiceStub:
    return memory_pb2_grpc.MemoryServiceStub(channel)


@pytest.fixture
def new_agent() -> Callable[[], str]:
    """Factory of agent ids never used before, so tests sharing a daemon stay apart."""

    def make() -> str:
        return f"t-{uuid.uuid4().hex[:16]}"

    return make


@pytest.fixture
def facts() -> tuple[str, ...]:
    return FACTS


@pytest.fixture
def seed(client: MemoryClient) -> Callable[..., list[pb.Memory]]:
    """``seed(agent, texts, **store_kw)`` stores each text, asserts it was CREATED."""

    def store_all(agent: str, texts: Iterable[str], **kw: Any) -> list[pb.Memory]:
        out = []
        for text in texts:
            r = client.store(agent, text, **kw)
            assert r.outcome == pb.STORE_OUTCOME_CREATED, (text, r)
            out.append(r.memory)
        return out

    return store_all


@pytest.fixture
def rejects() -> Callable[..., str]:
    """``rejects(code, call, *args, mentions=(...), **kw)``: the call fails with ``code``.

    Every fragment of ``mentions`` must appear in the error message (it says what to fix).
    Returns the message.
    """

    def check(
        code: grpc.StatusCode,
        call: Callable[..., Any],
        *args: Any,
        mentions: Iterable[str] = (),
        **kw: Any,
    ) -> str:
        with pytest.raises(MemorydError) as caught:
            call(*args, **kw)
        assert caught.value.code == code, caught.value
        for fragment in mentions:
            assert fragment in caught.value.message, (fragment, caught.value.message)
        return caught.value.message

    return check


@pytest.fixture
def raw_rejects() -> Callable[..., str]:
    """Like ``rejects`` for a raw stub method called with a hand-built request."""

    def check(
        code: grpc.StatusCode,
        method: Callable[..., Any],
        request: Any,
        *,
        mentions: Iterable[str] = (),
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> str:
        with pytest.raises(grpc.RpcError) as caught:
            method(request, timeout=30.0, metadata=metadata)
        error: Any = caught.value
        assert error.code() == code, (error.code(), error.details())
        details = error.details() or ""
        for fragment in mentions:
            assert fragment in details, (fragment, details)
        return str(details)

    return check


@pytest.fixture
def snapshot(client: MemoryClient) -> Callable[[str], tuple[Any, ...]]:
    """What an agent can observe of the store: compare before and after a failed call.

    Stats (per agent and the store-wide row count) and every listed memory.
    """

    def take(agent: str) -> tuple[Any, ...]:
        stats = client.stats(agent)
        listed = client.list_all(agent, page_size=500)
        return (
            stats.total,
            dict(stats.by_scope),
            dict(stats.by_category),
            stats.store_rows,
            [memory_content(m) for m in listed],
        )

    return take


@pytest.fixture
def run_stream(address: str) -> Callable[..., Any]:
    """``await run_stream(requests, token=None)``: one Stream session sending every request,
    then closing; returns the responses by request_id (each id answered exactly once)."""

    async def run(
        requests: Iterable[pb.StreamRequest], *, token: str | None = None, target: str = ""
    ) -> dict[str, pb.StreamResponse]:
        requests = list(requests)
        by_id: dict[str, pb.StreamResponse] = {}
        async with AsyncMemoryClient(target or address, token=token, timeout=60.0) as c:

            async def collect() -> None:
                async for response in c.stream(requests):
                    assert response.request_id not in by_id, f"answered twice: {response}"
                    by_id[response.request_id] = response

            await asyncio.wait_for(collect(), timeout=120.0)
        assert set(by_id) == {r.request_id for r in requests}
        return by_id

    return run


@pytest.fixture
def content() -> Callable[[pb.Memory], dict[str, Any]]:
    """``content(memory)``: the memory's fields without access tracking, for comparisons."""
    return memory_content
