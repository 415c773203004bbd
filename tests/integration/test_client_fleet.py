"""The Python clients (sync and asyncio) over several daemon addresses: each agent goes to
its daemon, fails over to its next one when that daemon is down, and comes back.

Daemons on different data dirs share nothing, so what is tested is what the client
controls: where each call goes, which failures move on and which are raised, that a Store
or Capture sent again carries the key of its first try (the second daemon replays that key),
and that a non-idempotent call is never sent twice. A "fake" daemon here is an in-process
gRPC server that records every request and answers each with one chosen status.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from typing import Any

import grpc
import pytest
from memoryd_client import (
    AsyncMemoryClient,
    InvalidArgument,
    MemoryClient,
    NotFound,
    PermissionDenied,
    Unavailable,
    pb,
)
from memoryd_client._gen.memoryd.v1 import hooks_pb2_grpc as hgrpc
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc as mgrpc
from memoryd_client.routing import rendezvous_order
from memoryd_testing.launcher import Daemon

pytestmark = pytest.mark.integration

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


class Fake(mgrpc.MemoryServiceServicer, hgrpc.HookServiceServicer):
    """A daemon that answers every call with ``code`` and remembers what it was sent."""

    def __init__(self, code: grpc.StatusCode):
        self.code = code
        self.calls: list[tuple[str, Any]] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        mgrpc.add_MemoryServiceServicer_to_server(self, self.server)
        hgrpc.add_HookServiceServicer_to_server(self, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def _answer(self, name: str, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls.append((name, request))
        context.abort(self.code, f"the fake daemon answers {self.code.name}")

    def Store(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer("Store", request, context)

    def Recall(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer("Recall", request, context)

    def Update(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer("Update", request, context)

    def Forget(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer("Forget", request, context)

    def Get(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer("Get", request, context)

    def Capture(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer("Capture", request, context)

    def BuildContext(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._answer("BuildContext", request, context)


@pytest.fixture
def fake() -> Iterator[Callable[[grpc.StatusCode], Fake]]:
    started: list[Fake] = []

    def start(code: grpc.StatusCode = UNAVAILABLE) -> Fake:
        started.append(Fake(code))
        return started[-1]

    yield start
    for f in started:
        f.server.stop(None)


@pytest.fixture
def closed_port() -> Iterator[str]:
    """An address where nothing listens (connections are refused). Its socket stays bound,
    never listening, until the test ends: a port released at once could be handed to a
    fake daemon the test starts next (add_insecure_port(":0")), which would then answer
    where the test expects a refused connection."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


def agent_preferring(addresses: Sequence[str], first: str) -> str:
    """A fresh agent id whose first daemon is ``first``."""
    while True:
        agent = f"fleet-{uuid.uuid4().hex[:10]}"
        if addresses[rendezvous_order(addresses, agent)[0]] == first:
            return agent


def texts(address: str, agent: str) -> list[str]:
    with MemoryClient(address, timeout=30.0, retries=0) as c:
        return sorted(m.text for m in c.list_all(agent))


def test_each_agent_is_served_by_its_first_daemon_only(
    address: str, start_daemon: Callable[..., Daemon]
) -> None:
    other = start_daemon().address
    fleet = [address, other]
    agents = [agent_preferring(fleet, fleet[i % 2]) for i in range(6)]
    with MemoryClient(fleet, timeout=30.0) as c:
        for agent in agents:
            c.store(agent, f"{agent} likes green tea")
            assert [h.memory.text for h in c.recall(agent, "tea").results] == [
                f"{agent} likes green tea"
            ]
    for i, agent in enumerate(agents):
        home, away = fleet[i % 2], fleet[1 - i % 2]
        assert texts(home, agent) == [f"{agent} likes green tea"]
        assert texts(away, agent) == []


def test_a_stopped_daemon_s_agents_go_to_the_next_one_and_come_back(
    address: str, start_daemon: Callable[..., Daemon]
) -> None:
    a = start_daemon()
    fleet = [a.address, address]
    agent = agent_preferring(fleet, a.address)
    with MemoryClient(fleet, timeout=30.0, down_for=0.5) as c:
        c.store(agent, "Before: the office is in Lyon")
        assert a.stop() == 0
        during = c.store(agent, "During: the office moved to Nantes").memory
        # Non-idempotent calls too: a refused connection sent nothing.
        c.update(agent, during.id, importance=0.2)
        assert c.get(agent, during.id).importance == pytest.approx(0.2)
        assert [h.memory.id for h in c.recall(agent, "Nantes office", limit=1).results] == [
            during.id
        ]
        a.listen = a.address  # the same address again
        a.start()
        time.sleep(1.0)  # past down_for, and grpc's reconnect back-off (at most 1 s)
        c.store(agent, "After: the office is back in Lyon")
    assert texts(a.address, agent) == [
        "After: the office is back in Lyon",
        "Before: the office is in Lyon",
    ]
    assert texts(address, agent) == ["During: the office moved to Nantes"]


def test_a_store_sent_again_carries_the_key_of_its_first_try(
    address: str, fake: Callable[..., Fake]
) -> None:
    down = fake(UNAVAILABLE)
    fleet = [down.address, address]
    agent = agent_preferring(fleet, down.address)
    with MemoryClient(fleet, timeout=30.0) as c:
        stored = c.store(agent, "The standup is at 9:30").memory
    assert down.names() == ["Store"]
    key = down.calls[0][1].idempotency_key
    assert str(uuid.UUID(key)) == key  # the client made one
    # The second daemon holds that key: the same Store replays its answer ...
    with MemoryClient(address, timeout=30.0, retries=0) as b:
        replay = b.store(agent, "The standup is at 9:30", idempotency_key=key)
        assert (replay.outcome, replay.memory.id) == (pb.STORE_OUTCOME_CREATED, stored.id)
        # ... and another text under it is refused.
        with pytest.raises(InvalidArgument, match="already used"):
            b.store(agent, "The standup is at 10:00", idempotency_key=key)
    assert texts(address, agent) == ["The standup is at 9:30"]


def test_a_key_the_caller_gave_is_sent_as_it_is(address: str, fake: Callable[..., Fake]) -> None:
    down = fake(UNAVAILABLE)
    fleet = [down.address, address]
    agent = agent_preferring(fleet, down.address)
    with MemoryClient(fleet, timeout=30.0) as c:
        c.store(agent, "Mine", idempotency_key="msg-1842")
    assert down.calls[0][1].idempotency_key == "msg-1842"


def test_a_capture_sent_again_carries_the_key_of_its_first_try(
    address: str, fake: Callable[..., Fake]
) -> None:
    down = fake(UNAVAILABLE)
    fleet = [down.address, address]
    agent = agent_preferring(fleet, down.address)
    turn = [("user", "Remember that my dentist is Dr. Okafor")]
    with MemoryClient(fleet, timeout=30.0) as c:
        first = c.capture(agent, turn, session_id="s1")
    assert down.names() == ["Capture"]
    key = down.calls[0][1].idempotency_key
    assert str(uuid.UUID(key)) == key
    assert [d.reason for d in first.decisions] == ["captured"]
    with MemoryClient(address, timeout=30.0, retries=0) as b:
        again = b.capture(agent, turn, session_id="s2", idempotency_key=key)
    assert [d.reason for d in again.decisions] == ["captured"]
    assert again.decisions[0].memory_id == first.decisions[0].memory_id


def test_update_and_forget_are_not_sent_again_after_reaching_a_daemon(
    address: str, fake: Callable[..., Fake]
) -> None:
    down = fake(UNAVAILABLE)
    fleet = [down.address, address]
    agent = agent_preferring(fleet, down.address)
    with MemoryClient(address, timeout=30.0) as b:
        memory = b.store(agent, "The build takes 12 minutes").memory
    with MemoryClient(fleet, timeout=30.0, down_for=0.0) as c:
        with pytest.raises(Unavailable):
            c.update(agent, memory.id, text="The build takes 3 minutes")
        with pytest.raises(Unavailable):
            c.forget(agent, id=memory.id)
    assert down.names() == ["Update", "Forget"]  # once each, never resent
    assert texts(address, agent) == ["The build takes 12 minutes"]
    # The daemon that answered UNAVAILABLE is marked down: the next call skips it.
    with MemoryClient(fleet, timeout=30.0) as c:
        with pytest.raises(Unavailable):
            c.forget(agent, id=memory.id)
        assert c.forget(agent, id=memory.id).deleted_ids == [memory.id]
    assert down.names() == ["Update", "Forget", "Forget"]
    assert texts(address, agent) == []


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (grpc.StatusCode.NOT_FOUND, NotFound),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
    ],
)
def test_an_answer_other_than_unavailable_never_fails_over(
    address: str, fake: Callable[..., Fake], code: grpc.StatusCode, error: type[Exception]
) -> None:
    refusing = fake(code)
    fleet = [refusing.address, address]
    agent = agent_preferring(fleet, refusing.address)
    with MemoryClient(address, timeout=30.0) as b:
        memory = b.store(agent, "Lunch is at noon").memory  # the next daemon has it
    with MemoryClient(fleet, timeout=30.0) as c:
        with pytest.raises(error):
            c.get(agent, memory.id)
        with pytest.raises(error):
            c.store(agent, "Dinner is at seven")
    assert refusing.names() == ["Get", "Store"]
    assert texts(address, agent) == ["Lunch is at noon"]


def test_a_refused_connection_fails_over_every_call(address: str, closed_port: str) -> None:
    fleet = [closed_port, address]
    agent = agent_preferring(fleet, closed_port)
    with MemoryClient(fleet, timeout=30.0) as c:
        memory = c.store(agent, "The wifi password is on the fridge").memory
        c.update(agent, memory.id, text="The wifi password is in the drawer")
        assert c.get(agent, memory.id).text == "The wifi password is in the drawer"
        assert c.forget(agent, id=memory.id).deleted_ids == [memory.id]
        ctx = c.build_context(agent, "where is the wifi password?")
        assert ctx.skipped_reason == "no_relevant_memories"
    assert texts(address, agent) == []


@pytest.fixture
def silent_port() -> Iterator[str]:
    """An address that accepts TCP connections and never answers (a hung host): no
    connection there ever becomes ready."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_no_connection_within_connect_timeout_fails_every_call_over(
    address: str, silent_port: str
) -> None:
    fleet = [silent_port, address]
    agent = agent_preferring(fleet, silent_port)
    with MemoryClient(fleet, timeout=30.0, connect_timeout=0.5, down_for=0.0) as c:
        memory = c.store(agent, "The van is parked on level 3").memory
        # Not connected, so not sent: even an update goes on to the next daemon.
        c.update(agent, memory.id, text="The van is parked on level 4")
    assert texts(address, agent) == ["The van is parked on level 4"]


async def test_async_no_connection_within_connect_timeout_fails_over(
    address: str, silent_port: str
) -> None:
    fleet = [silent_port, address]
    agent = agent_preferring(fleet, silent_port)
    async with AsyncMemoryClient(fleet, timeout=30.0, connect_timeout=0.5, down_for=0.0) as c:
        memory = (await c.store(agent, "The bike is in the shed")).memory
        await c.update(agent, memory.id, text="The bike is in the hall")
    assert texts(address, agent) == ["The bike is in the hall"]


def test_a_down_daemon_is_skipped_for_down_for_then_tried_again(
    address: str, fake: Callable[..., Fake]
) -> None:
    down = fake(UNAVAILABLE)
    fleet = [down.address, address]
    agent = agent_preferring(fleet, down.address)
    with MemoryClient(fleet, timeout=30.0, down_for=600.0) as c:
        for _ in range(5):
            c.recall(agent, "anything")
    assert down.names() == ["Recall"]  # once, then skipped
    with MemoryClient(fleet, timeout=30.0, down_for=0.2) as c:
        c.recall(agent, "anything")
        time.sleep(0.5)
        c.recall(agent, "anything")  # the mark lapsed: tried again first
    assert down.names() == ["Recall"] * 3


def test_every_daemon_down_raises_unavailable_naming_one() -> None:
    # Both sockets stay bound until both ports are known: a port released before
    # the next bind may be handed out again, naming one address twice.
    with socket.socket() as s1, socket.socket() as s2:
        s1.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        fleet = [f"127.0.0.1:{s.getsockname()[1]}" for s in (s1, s2)]
    with (
        MemoryClient(fleet, timeout=5.0, retries=1) as c,
        pytest.raises(Unavailable, match=r"no connection to the daemon at 127\.0\.0\.1:"),
    ):
        c.recall("main", "anything")


def test_one_address_sends_no_key_of_its_own_as_before(fake: Callable[..., Fake]) -> None:
    down = fake(UNAVAILABLE)
    for address in (down.address, [down.address]):
        with MemoryClient(address, timeout=5.0) as c, pytest.raises(Unavailable):
            c.store("main", "Not retried: no key")
    assert down.names() == ["Store", "Store"]
    assert [r.idempotency_key for _, r in down.calls] == ["", ""]


# -- asyncio ---------------------------------------------------------------------------


async def test_async_fails_over_with_the_first_key_and_never_resends_an_update(
    address: str, fake: Callable[..., Fake]
) -> None:
    down = fake(UNAVAILABLE)
    fleet = [down.address, address]
    agent = agent_preferring(fleet, down.address)
    # down_for=0: every call tries the fake daemon first (no down mark holds).
    async with AsyncMemoryClient(fleet, timeout=30.0, down_for=0.0) as c:
        stored = (await c.store(agent, "The printer is on floor 2")).memory
        with pytest.raises(Unavailable):
            await c.update(agent, stored.id, text="The printer is on floor 3")
        captured = await c.capture(agent, [("user", "Remember that my badge number is 4471")])
    assert down.names() == ["Store", "Update", "Capture"]
    key = down.calls[0][1].idempotency_key
    with MemoryClient(address, timeout=30.0, retries=0) as b:
        assert b.store(agent, "The printer is on floor 2", idempotency_key=key).memory.id == (
            stored.id
        )
        replay = b.capture(
            agent,
            [("user", "Remember that my badge number is 4471")],
            session_id="other",
            idempotency_key=down.calls[2][1].idempotency_key,
        )
    assert replay.decisions[0].memory_id == captured.decisions[0].memory_id
    assert texts(address, agent) == [
        "Remember that my badge number is 4471",
        "The printer is on floor 2",
    ]


async def test_async_not_found_is_the_answer_and_a_refused_connection_moves_on(
    address: str, fake: Callable[..., Fake], closed_port: str
) -> None:
    refusing = fake(grpc.StatusCode.NOT_FOUND)
    fleet = [refusing.address, address]
    agent = agent_preferring(fleet, refusing.address)
    with MemoryClient(address, timeout=30.0) as b:
        memory = b.store(agent, "Parking is in lot B").memory
    async with AsyncMemoryClient(fleet, timeout=30.0) as c:
        with pytest.raises(NotFound):
            await c.get(agent, memory.id)
    assert refusing.names() == ["Get"]

    fleet = [closed_port, address]
    agent = agent_preferring(fleet, closed_port)
    async with AsyncMemoryClient(fleet, timeout=30.0, down_for=600.0) as c:
        memory = (await c.store(agent, "Parking is in lot C")).memory
        await c.update(agent, memory.id, text="Parking is in lot D")
        assert (await c.get(agent, memory.id)).text == "Parking is in lot D"

        async def ops() -> Any:
            yield pb.StreamRequest(
                request_id="1", recall=pb.RecallRequest(agent_id=agent, query="parking")
            )

        answers = [r async for r in c.stream(ops(), agent_id=agent)]
    assert [r.recall.results[0].memory.text for r in answers] == ["Parking is in lot D"]
    assert texts(address, agent) == ["Parking is in lot D"]


def test_sync_stream_export_and_import_go_to_the_agent_s_daemon(
    address: str, closed_port: str
) -> None:
    fleet = [closed_port, address]
    agent = agent_preferring(fleet, closed_port)
    with MemoryClient(fleet, timeout=30.0) as c:
        ops = [
            pb.StreamRequest(request_id="1", store=pb.StoreRequest(agent_id=agent, text="Hi Bo"))
        ]
        assert [r.request_id for r in c.stream(ops, agent_id=agent)] == ["1"]
        exported = list(c.export(agent))
        assert [m.text for m in exported] == ["Hi Bo"]
        c.forget(agent, id=exported[0].id)
        assert c.import_memories(agent, exported).imported == 1
    assert texts(address, agent) == ["Hi Bo"]


def test_wait_ready_returns_when_one_daemon_of_the_fleet_is_up(
    address: str, closed_port: str
) -> None:
    with MemoryClient([closed_port, address]) as c:
        c.wait_ready(timeout=10.0)
    with MemoryClient([closed_port]) as c, pytest.raises(grpc.FutureTimeoutError):
        c.wait_ready(timeout=0.5)
