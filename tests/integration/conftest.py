"""Fixtures for the integration tests: real memoryd daemons on free loopback ports.

One daemon (``daemon``) is shared by the whole session; every test writes under its own
fresh agent ids (``new_agent``) so tests stay independent of each other and of order.
Tests that need other settings (an auth token, a small ``store.max_chars``) start their
own daemon through ``start_daemon``. Helpers live here as fixtures because test modules
are imported in importlib mode and cannot import each other.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc

START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0

# Sixty memories about different things: no two are near duplicates (the best match of
# each one's text is itself, the runner-up scores under 0.5), so tests can store any
# subset and expect every store to be CREATED.
FACTS = (
    "The user prefers dark mode in the code editor.",
    "Our production database runs PostgreSQL 16.",
    "The team meets every Monday at 10am for planning.",
    "Alice is the tech lead of the payments squad.",
    "The user is allergic to peanuts.",
    "Deployments happen through GitHub Actions on merge to main.",
    "The office wifi password rotates every quarter.",
    "Bob's birthday is on the 14th of March.",
    "The company was founded in Lisbon in 2015.",
    "We decided to drop support for Python 3.9.",
    "The user drinks green tea without sugar.",
    "Invoices are sent on the first business day of the month.",
    "The staging cluster lives in eu-west-1.",
    "Carol owns the mobile app release process.",
    "The user's cat is called Miso.",
    "Error budgets are reviewed in the monthly SRE sync.",
    "The marketing site is built with Astro.",
    "The user runs a half marathon every October.",
    "Our API rate limit is 600 requests per minute per key.",
    "The user speaks Portuguese and Japanese.",
    "Backups are kept for thirty days in cold storage.",
    "The design system uses the Inter typeface.",
    "Dave prefers code reviews over pair programming.",
    "The quarterly offsite will be held in Porto.",
    "Support tickets older than a week escalate automatically.",
    "The user's favourite film is Spirited Away.",
    "We chose Rust for the ingestion service.",
    "The data warehouse is Snowflake.",
    "Eve is on parental leave until September.",
    "The user commutes by bicycle.",
    "Feature flags are managed with LaunchDarkly.",
    "The user is learning to play the cello.",
    "Security patches must ship within 48 hours.",
    "The analytics dashboard refreshes every hour.",
    "Frank handles vendor contracts and procurement.",
    "The user keeps a vegetarian diet.",
    "The legacy billing system is written in COBOL.",
    "On-call rotations last one week each.",
    "The user lives in a flat near the river.",
    "Customer churn dropped by four percent last quarter.",
    "The search service uses Elasticsearch 8.",
    "Grace maintains the internal documentation wiki.",
    "The user dislikes phone calls and prefers chat.",
    "Our logo was redesigned last spring.",
    "The iOS app targets iOS 17 and newer.",
    "Henry is allergic to cats.",
    "The user plans to visit Kyoto next April.",
    "All secrets are stored in HashiCorp Vault.",
    "The user's laptop is a ThinkPad X1 Carbon.",
    "Weekly metrics are emailed on Friday afternoons.",
    "The load balancer terminates TLS 1.3 only.",
    "Ivy wrote the onboarding checklist for new hires.",
    "The user enjoys hiking in the Alps.",
    "We use Terraform to manage cloud infrastructure.",
    "The user's daughter starts school in autumn.",
    "Code freeze begins two weeks before each release.",
    "Jack is the point of contact for the Berlin office.",
    "The user collects vintage fountain pens.",
    "The recommendation model is retrained nightly.",
    "The user wakes up at six every morning.",
)


# What a memory *is*, as opposed to how often it was read (access tracking changes on
# every Recall): two reads of an unchanged memory agree on all of these.
CONTENT_FIELDS = (
    "id",
    "agent_id",
    "scope",
    "text",
    "summary",
    "category",
    "importance",
    "metadata",
    "created_at",
    "updated_at",
    "expires_at",
)


def memory_content(m: pb.Memory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in CONTENT_FIELDS:
        value = getattr(m, name)
        if name == "metadata":
            value = dict(value)
        elif name.endswith("_at"):
            value = value.ToJsonString() if m.HasField(name) else None
        out[name] = value
    return out


@dataclass
class Daemon:
    """A running ``memoryd serve`` subprocess."""

    address: str
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> int:
        """SIGTERM, wait for the exit, return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"memoryd did not exit within {STOP_TIMEOUT}s of SIGTERM\n{self.log_tail()}"
            ) from None
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()
        return code


def _child_env(extra: Mapping[str, str]) -> dict[str, str]:
    # Settings from the developer's shell must not leak into the daemon under test.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update(extra)
    return env


def spawn_daemon(data_dir: Path, log_path: Path, env: Mapping[str, str] = {}) -> Daemon:
    """Start ``memoryd serve`` on a free port and wait for its "serving on" line."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memoryd",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                str(data_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            env=_child_env(env),
        )
    daemon = Daemon("", data_dir, log_path, process)
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                process.kill()
                daemon.stop()
                pytest.fail(f"memoryd did not serve within {START_TIMEOUT}s\n{daemon.log_tail()}")
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                code = daemon.stop()
                pytest.fail(f"memoryd exited with {code} before serving\n{daemon.log_tail()}")
            line += chunk
    text = line.decode().strip()
    prefix = "memoryd serving on "
    assert text.startswith(prefix), f"unexpected first line {text!r}"
    daemon.address = text[len(prefix) :]
    return daemon


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
        daemon = spawn_daemon(base / "data", base / "stderr.log", env)
        started.append(daemon)
        return daemon

    yield start
    failures = []
    for daemon in started:
        code = daemon.stop()
        if code != 0:
            failures.append(f"{daemon.address} exited {code}\n{daemon.log_tail()}")
    assert not failures, "\n\n".join(failures)


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
