"""What every benchmark script shares: the daemon under test, bulk loading through the
Stream RPC, process readings (/proc), percentiles and markdown output.

A script either starts its own daemon (``python -m memoryd serve`` on a free loopback
port and a temporary data directory, removed afterwards, through the launcher tests use
too: tests/support/memoryd_testing) or, with ``--address``, talks to
one that is already running (then ``--pid`` lets it read that daemon's memory and CPU).
The daemon inherits this process's environment, so ``MEMORYD_*`` settings apply to it;
the report names any that are set.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc
from memoryd_client.errors import error_from_rpc

# The daemon launcher shared with the tests (not part of any installed package).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from memoryd_testing import launcher

START_TIMEOUT = 300.0  # a cold numba cache alone can take ~30 s on a busy machine
STOP_TIMEOUT = 60.0
SERVING_RE = re.compile(r"SERVING after ([0-9.]+)s")
LOADED_RE = re.compile(
    r"embedder .* ([0-9.]+)s, store (\d+) memories ([0-9.]+)s, kernels ([0-9.]+)s"
)
# Recall ranked as a plain vector store ranks: cosine only; no rerank, boosts, decay or MMR
# (baseline_plugin.py's plugin path, peers.py's memoryd-vector).
VECTOR_ONLY = pb.RecallOptions(
    fusion=pb.FUSION_MODE_VECTOR_ONLY,
    rerank=pb.RERANK_MODE_NONE,
    importance_weight=0.0,
    recency_weight=0.0,
    length_weight=0.0,
    decay_half_life_days=0.0,
    mmr_lambda=1.0,
)


def log(message: str) -> None:
    """Progress for the person watching; the results go to stdout."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the daemon ------------------------------------------------------------------------


@dataclass
class Daemon(launcher.Daemon):
    """The shared launcher (tests/support/memoryd_testing) with a benchmark's defaults:
    ``MEMORYD_*`` of this shell reach the daemon, a longer start (a cold numba cache), a
    daemon that ignores SIGTERM is killed and reported rather than raised, and the start-up
    figures of its log."""

    inherit_memoryd_env: bool = True
    start_timeout: float = START_TIMEOUT
    stop_timeout: float = STOP_TIMEOUT

    def stop(self, *, kill: bool = False) -> int | None:
        try:
            return super().stop(kill=kill)
        except launcher.LaunchError as e:
            log(f"memoryd ignored SIGTERM for {self.stop_timeout}s; killed")
            return e.code

    def startup(self) -> dict[str, float]:
        """Figures of the last start, read from the log: serving, embedder, store, kernels."""
        text = self.log_text()
        out: dict[str, float] = {}
        if m := SERVING_RE.search(text):
            out["serving_s"] = float(m.group(1))
        if m := LOADED_RE.search(text):
            out["embedder_s"] = float(m.group(1))
            out["store_rows"] = float(m.group(2))
            out["store_s"] = float(m.group(3))
            out["kernels_s"] = float(m.group(4))
        return out


@dataclass
class Target:
    """The daemon a script talks to; ``daemon`` is None when it was given by --address."""

    address: str
    pid: int | None
    daemon: Daemon | None


def add_common_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("daemon and output")
    g.add_argument(
        "--address", help="HOST:PORT of a running memoryd (default: start one on a temp dir)"
    )
    g.add_argument("--pid", type=int, help="with --address: its pid, to read RSS and CPU")
    g.add_argument(
        "--data-dir", type=Path, help="data dir of the started daemon (default: a temp dir)"
    )
    g.add_argument(
        "--keep-data", action="store_true", help="do not delete the temp data dir at the end"
    )
    g.add_argument("--seed", type=int, default=0, help="seed of the synthetic texts")
    g.add_argument("--out", type=Path, help="also append the markdown report to this file")


@contextlib.contextmanager
def target_from_args(args: argparse.Namespace) -> Iterator[Target]:
    if args.address:
        yield Target(args.address, args.pid, None)
        return
    base = Path(tempfile.mkdtemp(prefix="memoryd-bench-"))
    data_dir = args.data_dir or base / "data"
    daemon = Daemon(data_dir, base / "stderr.log")
    try:
        log(f"starting memoryd (data {data_dir}, log {daemon.log_path})")
        daemon.start()
        log(f"memoryd pid {daemon.pid} serving on {daemon.address}: {daemon.startup()}")
        yield Target(daemon.address, daemon.pid, daemon)
    finally:
        code = daemon.stop()
        if code not in (0, None):
            log(f"memoryd exited {code}; log tail:\n{daemon.log_tail()}")
        if args.keep_data:
            log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def add_quality_args(p: argparse.ArgumentParser) -> None:
    """The daemon and output flags of the recall-quality scripts (locomo, multilingual)."""
    p.add_argument("--address", help="a running memoryd; default: start one on a temp dir")
    p.add_argument("--out", type=Path, help="also write the result table to this file")
    p.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE for the daemon started here"
    )


@contextlib.contextmanager
def daemon_unless(
    address: str | None, env: Sequence[str], *, needed: bool = True
) -> Iterator[str | None]:
    """``address`` when one is given (or no daemon is ``needed``); otherwise the address of
    a daemon started here on a temp dir, with ``env`` (KEY=VALUE) in its environment, and
    stopped at the end."""
    if address or not needed:
        yield address
        return
    with tempfile.TemporaryDirectory() as tmp:
        extra = dict(kv.split("=", 1) for kv in env)
        daemon = Daemon(Path(tmp) / "data", Path(tmp) / "stderr.log", extra)
        try:
            yield daemon.start().address
        finally:
            daemon.stop()


def write_table(table: str, out: Path | None) -> None:
    """Print a result table; with ``out``, also write it to that file."""
    print(table)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table + "\n")


# -- /proc readings -------------------------------------------------------------------


def proc_status(pid: int | None) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) in bytes; empty if unknown."""
    if pid is None:
        return {}
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    except OSError:
        return {}
    return out


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds the process has used so far."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f}"


# -- statistics and output --------------------------------------------------------------


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, p99, mean, max of durations given in seconds, in milliseconds."""
    if not seconds:
        nan = float("nan")
        return {"n": 0, "p50": nan, "p95": nan, "p99": nan, "mean": nan, "max": nan}
    a = np.asarray(seconds, dtype=np.float64) * 1000.0
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {
        "n": len(a),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(a.mean()),
        "max": float(a.max()),
    }


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return "n/a" if math.isnan(v) else f"{v:.2f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def revision() -> str:
    """The commit of the working tree, with "+changes" when it has uncommitted edits."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        run = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        run.check_returncode()
        return run.stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


# Read once, when the script starts: the daemon it starts runs the code of that moment.
REVISION = revision()


def report(args: argparse.Namespace, title: str, sections: Sequence[str]) -> None:
    """Print the markdown report; with --out, append it to that file too."""
    settings = " ".join(
        f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("MEMORYD_")
    )
    head = [
        f"### {title}",
        "",
        f"`python {shlex.join(sys.argv)}`",
        "",
        f"{dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, commit {REVISION}, "
        f"{os.cpu_count()} cores, "
        f"load average at the end {load_average()}" + (f", {settings}" if settings else ""),
    ]
    text = "\n".join(head) + "\n\n" + "\n\n".join(sections) + "\n"
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as f:
            f.write(text + "\n")


def stats(address: str, agent_id: str) -> pb.StatsResponse:
    """Daemon-wide Stats (rows and index of every agent): the benchmarks' daemons run with
    auth off, where the local caller is an operator."""
    with MemoryClient(address, timeout=120.0) as c:
        return c.stats(agent_id, daemon_wide=True)


# -- the Stream RPC -----------------------------------------------------------------


class StreamChannel:
    """A channel with a connection of its own, offering the client's ``stream()``.

    gRPC shares one connection among the channels a process opens to the same address
    with the same options; on one connection at most ``server.max_streams_per_connection``
    (100) calls run at once and the others wait, unanswered, for a free slot. A load of
    many Streams spreads them over StreamChannels (``grpc.use_local_subchannel_pool``)."""

    def __init__(self, address: str, token: str | None = None):
        options = [("grpc.use_local_subchannel_pool", 1), ("grpc.enable_retries", 0)]
        self._channel = grpc.aio.insecure_channel(address, options=options)
        self._stub = memory_pb2_grpc.MemoryServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def stream(self, requests: AsyncIterator[pb.StreamRequest]) -> AsyncIterator[pb.StreamResponse]:
        return self._responses(self._stub.Stream(requests, metadata=self._metadata))

    @staticmethod
    async def _responses(call: Any) -> AsyncIterator[pb.StreamResponse]:
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as e:
            raise error_from_rpc(e) from None

    async def close(self) -> None:
        await self._channel.close()


class StreamSession:
    """One open Stream RPC shared by any number of coroutines.

    ``await session.call(store=...)`` sends one op with a fresh request id and returns its
    response; calls from several coroutines are in flight together on the one stream
    (pipelining). Responses are matched by request_id, in whatever order they arrive.
    """

    def __init__(self, client: AsyncMemoryClient | StreamChannel):
        self._requests: asyncio.Queue[pb.StreamRequest | None] = asyncio.Queue()
        self._waiting: dict[str, asyncio.Future[pb.StreamResponse]] = {}
        self._next_id = 0
        self.broken: MemorydError | None = None  # set once the stream has ended
        self._responses = client.stream(self._outgoing())
        self._reader = asyncio.create_task(self._read())

    async def _outgoing(self) -> AsyncIterator[pb.StreamRequest]:
        while (request := await self._requests.get()) is not None:
            yield request

    async def _read(self) -> None:
        error = MemorydError(grpc.StatusCode.UNAVAILABLE, "the daemon ended the stream")
        try:
            async for response in self._responses:
                future = self._waiting.pop(response.request_id, None)
                if future is not None and not future.done():
                    future.set_result(response)
        except MemorydError as e:
            error = e
        self.broken = error
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(error)
        self._waiting.clear()

    async def call(self, **op: object) -> pb.StreamResponse:
        """Send one op and await its response; MemorydError once the stream has ended."""
        if self.broken is not None:
            raise self.broken
        self._next_id += 1
        request_id = str(self._next_id)
        future: asyncio.Future[pb.StreamResponse] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self._requests.put_nowait(pb.StreamRequest(request_id=request_id, **op))  # type: ignore[arg-type]
        return await future

    async def close(self) -> None:
        self._requests.put_nowait(None)
        with contextlib.suppress(Exception):
            await self._reader


@dataclass
class Acked:
    agent_id: str
    id: str
    text: str


@dataclass
class BulkResult:
    """``acked``: one entry per text stored, with the id the daemon answered (for a
    duplicate, the id of the memory it already had)."""

    acked: list[Acked] = field(default_factory=list)
    created: int = 0
    duplicates: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        done = self.created + self.duplicates + sum(self.errors.values())
        return done / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        errors = dict(self.errors) or "none"
        return (
            f"{self.created} created, {self.duplicates} duplicates, errors {errors}, "
            f"{self.seconds:.1f}s, {self.rate:.0f} stores/s"
        )


def add_load_args(p: argparse.ArgumentParser) -> None:
    """``--load-clients`` and ``--load-pipeline``: how :func:`load` fills the store."""
    p.add_argument("--load-clients", type=int, default=8, help="Streams used to (pre)load")
    p.add_argument("--load-pipeline", type=int, default=32, help="ops in flight per Stream")


def load(
    args: argparse.Namespace, address: str, items: Sequence[tuple[str, str]], label: str
) -> BulkResult:
    """:func:`bulk_store` with the script's ``--load-clients`` and ``--load-pipeline``."""
    return asyncio.run(
        bulk_store(
            address, items, clients=args.load_clients, pipeline=args.load_pipeline, label=label
        )
    )


async def bulk_store(
    address: str,
    items: Sequence[tuple[str, str]],
    *,
    clients: int = 8,
    pipeline: int = 32,
    label: str = "stored",
    token: str | None = None,
) -> BulkResult:
    """Store every (agent_id, text) through ``clients`` Streams, ``pipeline`` ops in flight
    on each. Returns what was acknowledged; failures are counted by status code name."""
    result = BulkResult()
    todo = iter(items)
    done = 0
    started = time.perf_counter()
    last_note = started

    async def worker(session: StreamSession) -> None:
        nonlocal done, last_note
        for agent_id, text in todo:
            try:
                r = await session.call(store=pb.StoreRequest(agent_id=agent_id, text=text))
            except MemorydError as e:
                result.errors[e.code.name] += 1
                continue
            if r.WhichOneof("result") == "error":
                result.errors[r.error.code_name] += 1
                continue
            result.acked.append(Acked(agent_id, r.store.memory.id, text))
            if r.store.outcome == pb.STORE_OUTCOME_CREATED:
                result.created += 1
            else:
                result.duplicates += 1
            done += 1
            now = time.perf_counter()
            if now - last_note > 10:
                last_note = now
                log(f"{label} {done}/{len(items)} ({done / (now - started):.0f}/s)")

    conns = [AsyncMemoryClient(address, retries=0, token=token) for _ in range(clients)]
    sessions = [StreamSession(c) for c in conns]
    try:
        await asyncio.gather(*(worker(s) for s in sessions for _ in range(pipeline)))
    finally:
        for s in sessions:
            await s.close()
        for c in conns:
            await c.close()
    result.seconds = time.perf_counter() - started
    return result


def rows_in_store(address: str) -> int:
    """Rows in the durable store, all agents (Stats.store_rows)."""
    return int(stats(address, "bench").store_rows)


def agents_round_robin(agents: Sequence[str], texts: Sequence[str]) -> list[tuple[str, str]]:
    return [(agents[i % len(agents)], t) for i, t in enumerate(texts)]
