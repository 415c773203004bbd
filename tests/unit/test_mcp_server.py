"""memoryd mcp without a daemon: who a call acts for, and how tool arguments are read."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from memoryd_client import AsyncMemoryClient
from memoryd_client.mcp_server import AGENT_HEADER, Args, McpSettings, ToolError, caller_for

STDIO = McpSettings("127.0.0.1:1", agent="alice", token="t")
SHARED = McpSettings("127.0.0.1:1")
PINNED = McpSettings("127.0.0.1:1", agent="alice")


@pytest.fixture
async def client() -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient("127.0.0.1:1", token="server-token") as c:
        yield c


async def test_stdio_acts_for_the_configured_agent_with_the_servers_token(
    client: AsyncMemoryClient,
) -> None:
    caller = caller_for(STDIO, client, None)
    assert caller.agent == "alice" and caller.client is client
    with pytest.raises(ToolError, match="without --agent"):
        caller_for(SHARED, client, None)


async def test_http_agent_from_the_header_unless_pinned(client: AsyncMemoryClient) -> None:
    assert caller_for(SHARED, client, {AGENT_HEADER: "bob"}).agent == "bob"
    with pytest.raises(ToolError, match=f"send the HTTP header {AGENT_HEADER}"):
        caller_for(SHARED, client, {})
    with pytest.raises(ToolError, match=f"send the HTTP header {AGENT_HEADER}"):
        caller_for(SHARED, client, {AGENT_HEADER: "  "})
    assert caller_for(PINNED, client, {}).agent == "alice"
    assert caller_for(PINNED, client, {AGENT_HEADER: "alice"}).agent == "alice"
    with pytest.raises(ToolError, match="refused"):
        caller_for(PINNED, client, {AGENT_HEADER: "bob"})


async def test_http_never_lends_the_servers_token(client: AsyncMemoryClient) -> None:
    anonymous = caller_for(SHARED, client, {AGENT_HEADER: "bob"}).client
    assert anonymous is not client
    assert anonymous._metadata == ()
    bearer = caller_for(SHARED, client, {AGENT_HEADER: "bob", "authorization": "Bearer abc"})
    assert bearer.client._metadata == (("authorization", "Bearer abc"),)
    with pytest.raises(ToolError, match="Bearer"):
        caller_for(SHARED, client, {AGENT_HEADER: "bob", "authorization": "Basic Ym9iOng="})


def test_arguments_outside_the_schema_are_refused() -> None:
    with pytest.raises(ToolError, match="unknown argument agentId; expected: query, limit"):
        Args("memory_recall", {"query": "x", "agentId": "bob"}, ["query", "limit"])
    with pytest.raises(ToolError, match="unknown arguments agentId, agent_id"):
        Args("memory_recall", {"agentId": "bob", "agent_id": "bob"}, ["query"])
    # An explicit null is the argument left out.
    assert Args("memory_list", {"limit": None}, ["limit"]).integer("limit", 1, 100, 10) == 10


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3),
        ("7", 7),
        (5.0, 5),
        (True, None),
        ("x", None),
        (0, None),
        (51, None),
        (2.5, None),
        (float("nan"), None),
        (float("inf"), None),
        ([3], None),
    ],
)
def test_whole_numbers(value: object, expected: int | None) -> None:
    args = Args("memory_recall", {"limit": value}, ["limit"])
    if expected is None:
        with pytest.raises(ToolError, match="limit must be a whole number from 1 to 50"):
            args.integer("limit", 1, 50, 5)
    else:
        assert args.integer("limit", 1, 50, 5) == expected


def test_text_category_scope_and_ids() -> None:
    args = Args(
        "t",
        {"text": "  hi  ", "category": " Fact ", "scope": "workspace:team", "memoryId": "A" * 36},
        ["text", "category", "scope", "memoryId"],
    )
    assert args.required_text("text", 10) == "hi"
    assert args.category() == 2
    assert args.scope() == "workspace:team"
    with pytest.raises(ToolError, match="not a memory id"):
        args.memory_id()
    with pytest.raises(ToolError, match="text is 2 characters; the limit is 1"):
        args.text("text", 1)
    with pytest.raises(ToolError, match="must be a string"):
        Args("t", {"text": 5}, ["text"]).text("text", 10)
    with pytest.raises(ToolError, match="is not a scope"):
        Args("t", {"scope": "agent:a b"}, ["scope"]).scope()
    uuid = "0CAEB3BC-44C5-414C-B985-657A3E86E780"
    assert Args("t", {"memoryId": uuid}, ["memoryId"]).memory_id() == uuid.lower()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),  # as parse_host_port returns [::1]
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("0", False),
        ("10.0.0.5", False),
        ("memory.example", False),
    ],
)
def test_which_http_hosts_are_loopback(host: str, loopback: bool) -> None:
    from memoryd_client import mcp_server

    assert mcp_server._is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("code", "open_", "says"),
    [
        (grpc.StatusCode.UNAUTHENTICATED, False, ""),
        (None, True, "answers calls without a credential"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, True, "answers calls without a credential"),
        (grpc.StatusCode.UNAVAILABLE, True, "no daemon answers"),
        (grpc.StatusCode.PERMISSION_DENIED, True, "PERMISSION_DENIED"),
        (grpc.StatusCode.UNIMPLEMENTED, True, "UNIMPLEMENTED"),
    ],
)
def test_the_http_probe_says_what_the_daemon_answered(
    monkeypatch: pytest.MonkeyPatch, code: grpc.StatusCode | None, open_: bool, says: str
) -> None:
    """Only UNAUTHENTICATED lets a non-loopback --http serve; an answer that is neither
    that, nor a success, nor no answer is refused naming it, never as an open daemon."""
    from memoryd_client import mcp_server
    from memoryd_client.errors import MemorydError

    class Probe:
        def __init__(self, *args: object, **kw: object) -> None:
            pass

        def __enter__(self) -> Probe:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def stats(self, agent: str) -> None:
            if code is not None:
                raise MemorydError(code, "no")

    monkeypatch.setattr(mcp_server, "MemoryClient", Probe)
    why = mcp_server._open_daemon("10.0.0.5:50051")
    assert (why is not None) is open_
    if open_:
        assert says in why
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED):
            assert "answers calls without a credential" not in why
