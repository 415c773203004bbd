"""Reliability under faults and load: what memoryd keeps, and how it answers (issue #11).

Every scenario starts its own daemon (``python -m memoryd serve`` on a free loopback port)
on a data dir of its own, removed at the end unless ``--keep-data``.

``--scenario kill9``: ``--rounds`` (200) rounds on one data dir, each: start the daemon,
run ``--streams`` Streams of Stores, each Store with its own idempotency key and
``--pipeline`` of them in flight per Stream, SIGKILL the daemon at a random moment
(uniform in ``--kill-after``, seconds after the load began), restart it, then check:
every acknowledged store is there (Get by id, same text), no text is stored twice (List of
the round's agents), a retry of every key sent (acknowledged or not, as a client would
after a crash) replays the acknowledged id, and the daemon-wide row count
(Stats.store_rows) equals the rows found by every round so far. After the last round every
acknowledged id of every round is read back once more.

``--scenario diskfull``: the data dir on a tmpfs of ``--disk-mib`` (64 MiB) mounted for the
run (needs root), a ballast file leaving ``--headroom-mib`` free once the daemon is up;
Stores through Streams until the disk is full and for ``--full-seconds`` after: the status
codes and messages seen (the contract: RESOURCE_EXHAUSTED or UNAVAILABLE saying "no space
left on device", never INTERNAL), health and Stats meanwhile, Recall and Get while full;
then the tmpfs is enlarged (``mount -o remount,size=``) and the time until a Store succeeds
again without a restart is measured; every refused key is retried; finally SIGTERM,
restart, and every acknowledged store checked as for kill9.

``--scenario sigterm``: ``--rounds`` (default 5 here) rounds of: Streams of keyed Stores and
unary Store/Recall clients, SIGTERM at a random moment, the clients going on until they are
refused; reported: exit code and time to exit, how the calls in flight at the signal and
those sent after it were answered (finished, or UNAVAILABLE), and after a restart every
acknowledged store checked as for kill9.

``--scenario soak``: ``--clients`` (32) clients, each its own agent (their channels share
one connection), mixing every RPC (Store, Recall, Forget by id and by query, Update, Get,
List, Stats, a short Stream, BuildContext, Capture, Export of a small agent) for
``--duration`` (600 s); a client forgets what it stored once it holds ``--pool``
memories, so the row count stays flat. Reported: errors by status code per RPC, latency
per RPC, and per minute the calls, errors, p50/p99 and the daemon's RSS (flat = no leak)
and rows.

``--scenario fairness``: a keys file with key A (``tenant-a-*``) and key B
(``tenant-b-*``); B makes one Recall at a time (a distinct query each, so each is embedded;
``--b-interval`` between calls) while idle, then while ``--flood-streams`` (200) Streams of
key A, in another process, flood Recalls and Stores (``--flood-recalls``: half of each;
``--flood-pipeline`` ops in flight each) for ``--duration`` (60 s here); done with
``[limits]`` off, then (restarted on the same data) with
``MEMORYD_LIMITS__REQUESTS_PER_SECOND`` at each of ``--rates`` (100,25; per credential).
Reported: B's p50/p99 idle and under the flood, the ratio of the p99s (target: at most 2),
A's throughput.

    python bench/reliability.py --scenario kill9 --rounds 200
    python bench/reliability.py --scenario diskfull
    python bench/reliability.py --scenario sigterm
    python bench/reliability.py --scenario soak --duration 600
    python bench/reliability.py --scenario fairness
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import corpus
import grpc
import harness
from google.protobuf import unknown_fields
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memoryd_client import AsyncMemoryClient, MemorydError, pb
from memoryd_client._gen.memoryd.v1 import hooks_pb2, hooks_pb2_grpc, memory_pb2_grpc
from memoryd_client.errors import error_for, error_from_rpc

STATUS = {s.value[0]: s for s in grpc.StatusCode}
OUTCOME = {pb.STORE_OUTCOME_CREATED: "CREATED", pb.STORE_OUTCOME_DUPLICATE: "DUPLICATE"}


def short(message: str, n: int = 110) -> str:
    """One line, without the parts that differ call by call (incident ids, ports)."""
    message = " ".join(message.split())
    message = re.sub(r"incident [0-9a-f]+", "incident <id>", message)
    message = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", message)
    return message if len(message) <= n else message[: n - 3] + "..."


def codes(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "0"


# -- keyed stores through Streams -------------------------------------------------------


@dataclass(frozen=True)
class Item:
    key: str
    agent: str
    text: str


def keyed_items(prefix: str, agents: Sequence[str], texts: Iterator[str]) -> Iterator[Item]:
    """Distinct texts, round-robin over the agents, each with its own idempotency key."""
    for i, text in enumerate(texts):
        yield Item(f"{prefix}-{i}", agents[i % len(agents)], text)


@dataclass
class Attempts:
    """What a load sent and what it heard back, by idempotency key."""

    sent: dict[str, Item] = field(default_factory=dict)
    acked: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (id, outcome)
    refused: dict[str, str] = field(default_factory=dict)  # answered with an error
    unanswered: set[str] = field(default_factory=set)  # the call ended without an answer
    messages: Counter[str] = field(default_factory=Counter)  # "CODE: message" -> count
    calls: list[tuple[float, float, str, str]] = field(default_factory=list)  # t0, t1, kind, code

    def note(self, code: str, message: str) -> None:
        self.messages[f"{code}: {short(message)}"] += 1

    def errors(self) -> Counter[str]:
        return Counter(code for _, _, _, code in self.calls if code != "OK")


async def keyed_stores(
    address: str,
    items: Iterator[Item],
    att: Attempts,
    *,
    streams: int,
    pipeline: int,
    stop: Callable[[], bool] = lambda: False,
    pause: float = 0.0,
) -> None:
    """Store ``items`` through ``streams`` Streams with ``pipeline`` ops in flight on each,
    until ``stop()`` or the stream ends (a killed daemon); everything lands in ``att``."""
    clients = [AsyncMemoryClient(address, retries=0, timeout=120.0) for _ in range(streams)]
    sessions = [harness.StreamSession(c) for c in clients]

    async def worker(session: harness.StreamSession) -> None:
        while not stop() and session.broken is None:
            item = next(items, None)
            if item is None:
                return
            att.sent[item.key] = item
            request = pb.StoreRequest(agent_id=item.agent, text=item.text, idempotency_key=item.key)
            t0 = time.perf_counter()
            try:
                r = await session.call(store=request)
            except MemorydError as e:
                att.unanswered.add(item.key)
                att.calls.append((t0, time.perf_counter(), "Stream Store", e.code.name))
                att.note(e.code.name, e.message)
                return
            t1 = time.perf_counter()
            if r.WhichOneof("result") == "error":
                att.refused[item.key] = r.error.code_name
                att.calls.append((t0, t1, "Stream Store", r.error.code_name))
                att.note(r.error.code_name, r.error.message)
                if pause:
                    await asyncio.sleep(pause)
                continue
            att.acked[item.key] = (r.store.memory.id, r.store.outcome)
            att.calls.append((t0, t1, "Stream Store", "OK"))

    try:
        await asyncio.gather(*(worker(s) for s in sessions for _ in range(pipeline)))
    finally:
        for s in sessions:
            await s.close()
        for c in clients:
            await c.close()


@dataclass
class Check:
    """What came back after a restart, for one load (see ``check_after_restart``)."""

    acked: int = 0
    found: int = 0
    lost: list[str] = field(default_factory=list)
    text_differs: int = 0
    doubled: int = 0  # extra rows of a text sent once
    unacked_committed: int = 0  # sent, not acknowledged, yet stored (allowed)
    replay_same: int = 0
    replay_other: list[str] = field(default_factory=list)  # a retry gave another id
    replay_errors: Counter[str] = field(default_factory=Counter)
    rows: int = 0  # rows of the load's agents after the retries
    unknown_rows: int = 0  # rows whose text was never sent

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.text_differs or self.doubled or self.replay_other or self.unknown_rows
        )

    def problems(self) -> str:
        out = [f"lost {x}" for x in self.lost[:3]] + self.replay_other[:3]
        if self.text_differs:
            out.append(f"{self.text_differs} texts differ")
        if self.doubled:
            out.append(f"{self.doubled} doubled rows")
        if self.unknown_rows:
            out.append(f"{self.unknown_rows} rows never sent")
        out += [f"retry {k}" for k in self.replay_errors]
        return "; ".join(out)


async def list_texts(client: AsyncMemoryClient, agents: Sequence[str]) -> dict[str, list[str]]:
    """text -> ids, over every memory of the agents' own scopes (all pages)."""
    out: dict[str, list[str]] = defaultdict(list)
    for agent in agents:
        token = ""
        while True:
            page = await client.list(agent, page_size=500, page_token=token)
            for m in page.memories:
                if m.agent_id == agent:
                    out[m.text].append(m.id)
            token = page.next_page_token
            if not token:
                break
    return out


async def check_after_restart(address: str, att: Attempts, agents: Sequence[str]) -> Check:
    """After a restart: List the agents (doubles, unacknowledged but stored), Get every
    acknowledged id, retry every key sent (acknowledged ones must replay their id), and
    count the rows again."""
    ck = Check(acked=len(att.acked))
    sem = asyncio.Semaphore(32)
    async with AsyncMemoryClient(address, timeout=120.0, retries=6) as c:
        before = await list_texts(c, agents)
        ck.unacked_committed = sum(
            1 for k, item in att.sent.items() if k not in att.acked and item.text in before
        )

        async def get(key: str) -> None:
            item, (id_, _) = att.sent[key], att.acked[key]
            async with sem:
                try:
                    m = await c.get(item.agent, id_)
                except MemorydError as e:
                    ck.lost.append(f"{id_} ({e.code.name})")
                    return
            ck.found += 1
            ck.text_differs += m.text != item.text

        await asyncio.gather(*(get(k) for k in att.acked))

        async def replay(key: str) -> None:
            item = att.sent[key]
            async with sem:
                try:
                    r = await c.store(item.agent, item.text, idempotency_key=key)
                except MemorydError as e:
                    ck.replay_errors[e.code.name] += 1
                    return
            if key in att.acked:
                id_, outcome = att.acked[key]
                if r.memory.id == id_ and r.outcome == outcome:
                    ck.replay_same += 1
                else:
                    ck.replay_other.append(
                        f"key {key}: acked {id_} {OUTCOME.get(outcome, outcome)}, "
                        f"retry {r.memory.id} {OUTCOME.get(r.outcome, r.outcome)}"
                    )
            elif item.text in before and r.memory.id not in before[item.text]:
                ck.replay_other.append(f"key {key}: stored unacked, retry made {r.memory.id}")

        await asyncio.gather(*(replay(k) for k in att.sent))
        after = await list_texts(c, agents)
    sent_texts = {item.text for item in att.sent.values()}
    ck.doubled = sum(len(ids) - 1 for ids in after.values() if len(ids) > 1)
    ck.unknown_rows = sum(len(ids) for t, ids in after.items() if t not in sent_texts)
    ck.rows = sum(len(ids) for ids in after.values())
    return ck


async def daemon_rows(address: str) -> int:
    async with AsyncMemoryClient(address, timeout=120.0, retries=6) as c:
        return int((await c.stats("bench", daemon_wide=True)).store_rows)


async def health(address: str) -> str:
    async with grpc.aio.insecure_channel(address) as ch:
        try:
            r = await health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=10.0
            )
        except grpc.aio.AioRpcError as e:
            return f"{e.code().name}: {short(e.details() or '')}"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)


def scalar_fields(message: Any) -> str:
    """The set scalar fields of a message (whatever this client's stubs know of it)."""
    parts = []
    for fd, value in message.ListFields():
        if not isinstance(value, int | float | str | bool):
            continue  # maps and repeated fields
        parts.append(f"{fd.name}={value:.0f}" if isinstance(value, float) else f"{fd.name}={value}")
    unknown = len(unknown_fields.UnknownFieldSet(message))
    if unknown:
        parts.append(f"{unknown} fields unknown to these stubs")
    return ", ".join(parts)


def log_counts(daemon: harness.Daemon) -> str:
    """Lines of the current run's log: all, ERROR, tracebacks, "no space"."""
    text = daemon.log_text()
    lines = text.splitlines()
    errors = sum(1 for line in lines if " ERROR " in line or '"ERROR"' in line)
    first = next((line for line in lines if " ERROR " in line or '"ERROR"' in line), "")
    return (
        f"{len(lines)} lines, {errors} ERROR, {text.count('Traceback')} tracebacks, "
        f"{text.lower().count('no space left')} 'no space left'"
        + (f"; first ERROR: `{short(first, 200)}`" if first else "")
    )


def new_daemon(base: Path, data_dir: Path, env: dict[str, str] | None = None) -> harness.Daemon:
    return harness.Daemon(data_dir, base / "stderr.log", env=dict(env or {}))


def start(daemon: harness.Daemon) -> float:
    t0 = time.perf_counter()
    daemon.start()
    return time.perf_counter() - t0


@contextlib.contextmanager
def workspace(args: argparse.Namespace) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="memoryd-rel-"))
    try:
        yield base
    finally:
        if args.keep_data:
            harness.log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


# -- kill -9 ------------------------------------------------------------------------


KILL9_HEADERS = (
    "round",
    "kill after s",
    "sent",
    "acked",
    "in flight at kill",
    "stored unacked",
    "lost",
    "doubled",
    "retry gave another id",
    "rows ok",
    "restart s",
    "round s",
    "problems",
)


def scenario_kill9(args: argparse.Namespace) -> list[str]:
    rng = random.Random(args.seed)
    lo, hi = (float(x) for x in args.kill_after.split("-"))
    texts = corpus.memories(args.seed)
    rows: list[list[object]] = []
    all_acked: list[tuple[Item, str]] = []
    expected_rows = 0
    totals: Counter[str] = Counter()
    round_seconds: list[float] = []
    restart_seconds: list[float] = []
    with workspace(args) as base:
        daemon = new_daemon(base, args.data_dir or base / "data")
        start(daemon)
        for rnd in range(1, args.rounds + 1):
            t_round = time.perf_counter()
            agents = [f"k9-r{rnd:03d}-{i}" for i in range(args.agents)]
            att = Attempts()
            kill_after = rng.uniform(lo, hi)
            items = keyed_items(f"k9-{args.seed}-{rnd}", agents, texts)

            async def load(
                att: Attempts = att, items: Iterator[Item] = items, kill_after: float = kill_after
            ) -> None:
                async def killer(after: float) -> None:
                    await asyncio.sleep(after)
                    os.kill(daemon.pid, signal.SIGKILL)

                await asyncio.gather(
                    killer(kill_after),
                    keyed_stores(
                        daemon.address, items, att, streams=args.streams, pipeline=args.pipeline
                    ),
                )

            asyncio.run(load())
            daemon.stop(kill=True)  # reaps the killed process
            try:
                restart = start(daemon)
            except RuntimeError as e:
                rows.append([rnd, f"{kill_after:.2f}", len(att.sent), len(att.acked)])
                harness.log(f"round {rnd}: the daemon did not come back: {e}")
                totals["restart failures"] += 1
                break
            ck = asyncio.run(check_after_restart(daemon.address, att, agents))
            expected_rows += ck.rows
            rows_now = asyncio.run(daemon_rows(daemon.address))
            rows_ok = rows_now == expected_rows
            if not rows_ok:
                totals["rows mismatches"] += 1
                expected_rows = rows_now  # report once, judge later rounds on their own
            for key, (id_, _) in att.acked.items():
                all_acked.append((att.sent[key], id_))
            seconds = time.perf_counter() - t_round
            round_seconds.append(seconds)
            restart_seconds.append(restart)
            totals["sent"] += len(att.sent)
            totals["acked"] += len(att.acked)
            totals["unanswered"] += len(att.unanswered)
            totals["stored unacked"] += ck.unacked_committed
            totals["lost"] += len(ck.lost)
            totals["doubled"] += ck.doubled
            totals["retry other id"] += len(ck.replay_other)
            totals["text differs"] += ck.text_differs
            totals["unknown rows"] += ck.unknown_rows
            totals["refused"] += len(att.refused)
            problem = ck.problems() + ("" if rows_ok else f"; store_rows {rows_now}")
            rows.append(
                [
                    rnd,
                    f"{kill_after:.2f}",
                    len(att.sent),
                    len(att.acked),
                    len(att.unanswered),
                    ck.unacked_committed,
                    len(ck.lost),
                    ck.doubled,
                    len(ck.replay_other),
                    "yes" if rows_ok else "NO",
                    f"{restart:.1f}",
                    f"{seconds:.1f}",
                    problem or "",
                ]
            )
            harness.log(
                f"round {rnd}/{args.rounds}: killed after {kill_after:.2f}s, "
                f"{len(att.acked)}/{len(att.sent)} acked, lost {len(ck.lost)}, "
                f"doubled {ck.doubled}, rows {rows_now} ({'ok' if rows_ok else 'MISMATCH'}), "
                f"{seconds:.1f}s"
            )
        final = "not run (the daemon did not restart)"
        if daemon.process is not None:
            harness.log(f"reading back all {len(all_acked)} acknowledged stores")
            final_lost, final_differs = asyncio.run(read_back(daemon.address, all_acked))
            final = (
                f"{len(all_acked)} acknowledged over {len(round_seconds)} rounds: "
                f"{len(all_acked) - len(final_lost)} found by Get, {len(final_lost)} missing, "
                f"{final_differs} with another text"
                + (f" (first: {'; '.join(final_lost[:3])})" if final_lost else "")
            )
            totals["final missing"] = len(final_lost)
            code = daemon.stop()
            final += f"; daemon exit {code}"
        else:
            daemon.stop(kill=True)
        log_tail = daemon.log_tail(5)
    rs = harness.summary_ms(round_seconds)
    st = harness.summary_ms(restart_seconds)
    summary = harness.table(
        (
            "rounds",
            "sent",
            "acknowledged",
            "in flight at kill",
            "stored unacked",
            "lost",
            "doubled",
            "retry gave another id",
            "rows mismatches",
            "refused",
            "round s p50/max",
            "restart s p50/max",
        ),
        [
            [
                len(round_seconds),
                totals["sent"],
                totals["acked"],
                totals["unanswered"],
                totals["stored unacked"],
                totals["lost"],
                totals["doubled"],
                totals["retry other id"],
                totals["rows mismatches"],
                totals["refused"],
                f"{rs['p50'] / 1000:.1f} / {rs['max'] / 1000:.1f}",
                f"{st['p50'] / 1000:.1f} / {st['max'] / 1000:.1f}",
            ]
        ],
    )
    setup = (
        f"{args.streams} Streams x {args.pipeline} Stores in flight, {args.agents} new agents "
        f"per round, SIGKILL uniformly {lo:g}-{hi:g} s after the load began; every key sent "
        "is retried after the restart. Final read-back: " + final + "."
    )
    if totals["restart failures"]:
        setup += f" The daemon did not restart; log tail:\n\n```\n{log_tail}\n```"
    per_round = harness.table(KILL9_HEADERS, rows)
    return [
        setup,
        summary,
        "<details><summary>per round</summary>\n\n" + per_round + "\n\n</details>",
    ]


async def read_back(
    address: str, acked: list[tuple[Item, str]], *, retries: int = 6
) -> tuple[list[str], int]:
    """Get every (item, id): the ids missing (with their code), and how many differ."""
    lost: list[str] = []
    differs = 0
    sem = asyncio.Semaphore(32)
    async with AsyncMemoryClient(address, timeout=120.0, retries=retries) as c:

        async def one(item: Item, id_: str) -> None:
            nonlocal differs
            async with sem:
                try:
                    m = await c.get(item.agent, id_)
                except MemorydError as e:
                    lost.append(f"{id_} ({e.code.name})")
                    return
            differs += m.text != item.text

        await asyncio.gather(*(one(i, x) for i, x in acked))
    return lost, differs


# -- disk full ----------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, mib: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        for _ in range(10):
            if subprocess.run(["umount", str(path)], check=False).returncode == 0:
                break
            time.sleep(1.0)
        else:
            harness.log(f"could not unmount {path}")


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int) -> int:
    """Write a ballast file until ``leave`` bytes are free; returns its size."""
    ballast = path / "ballast"
    chunk = b"\0" * (1 << 20)
    written = 0
    with ballast.open("wb") as f:
        while free_bytes(path) - len(chunk) > leave:
            f.write(chunk)
            f.flush()
            written += len(chunk)
    return written


def scenario_diskfull(args: argparse.Namespace) -> list[str]:
    if os.geteuid() != 0:
        raise SystemExit("diskfull mounts a tmpfs: run it as root")
    texts = corpus.memories(args.seed)
    agents = [f"df-{i}" for i in range(args.agents)]
    notes: list[list[object]] = []
    att = Attempts()
    with workspace(args) as base, tmpfs(base / "mnt", args.disk_mib) as mnt:
        daemon = new_daemon(base, mnt / "data")
        start(daemon)
        address = daemon.address
        try:
            ballast = fill(mnt, args.headroom_mib << 20)
            harness.log(
                f"tmpfs {args.disk_mib} MiB, ballast {ballast >> 20} MiB, "
                f"{free_bytes(mnt) >> 20} MiB free"
            )
            notes.append(
                ["before", f"{free_bytes(mnt) >> 20} MiB free", asyncio.run(health(address)), ""]
            )
            full = asyncio.run(
                fill_disk(args, address, keyed_items("df", agents, texts), att, mnt, notes)
            )
            probes = asyncio.run(while_full(address, agents, att, texts))
            notes += probes
            recovered = asyncio.run(recover(args, address, mnt, agents, texts, att, notes))
            logs = log_counts(daemon)
            code = daemon.stop()
            notes.append(["SIGTERM", f"exit {code}", "", ""])
            restart = start(daemon)
            ck = asyncio.run(check_after_restart(daemon.address, att, agents))
            rows_now = asyncio.run(daemon_rows(daemon.address))
        finally:
            daemon.stop()
    by_code = Counter(code for _, _, _, code in att.calls)
    messages = harness.table(
        ("status: message (Stream Store answers)", "count"),
        sorted(att.messages.items(), key=lambda kv: -kv[1]),
    )
    verdict = [
        "INTERNAL seen: " + ("YES (breaks the contract)" if "INTERNAL" in by_code else "no"),
        f"first refusal after {full:.1f}s of storing" if full else "the disk never filled",
        f"recovered without a restart: {recovered}",
        f"after SIGTERM + restart ({restart:.1f}s): {ck.found}/{ck.acked} acknowledged found, "
        f"lost {len(ck.lost)}, doubled {ck.doubled}, retries replaying the acknowledged id "
        f"{ck.replay_same}/{ck.acked}, other id {len(ck.replay_other)}, "
        f"{ck.unacked_committed} unanswered yet stored, rows of the run {ck.rows}, "
        f"daemon rows {rows_now}" + (f"; problems: {ck.problems()}" if not ck.ok else ""),
        f"the daemon's log while the disk filled and came back: {logs}",
    ]
    return [
        f"tmpfs of {args.disk_mib} MiB, {args.headroom_mib} MiB left free by a ballast file; "
        f"{args.streams} Streams x {args.pipeline} keyed Stores in flight; full for "
        f"{args.full_seconds:g}s, then remounted at {args.disk_mib * 2} MiB.",
        harness.table(("Stream Store answers by code", "count"), sorted(by_code.items())),
        messages,
        harness.table(("moment", "what", "health", "Stats / answer"), notes),
        "\n".join(f"- {v}" for v in verdict),
    ]


async def fill_disk(
    args: argparse.Namespace,
    address: str,
    items: Iterator[Item],
    att: Attempts,
    mnt: Path,
    notes: list[list[object]],
) -> float:
    """Store until a Store is refused, and on for ``--full-seconds``; returns the seconds
    until the first refusal (0 = never within ``--fill-timeout``)."""
    t0 = time.perf_counter()
    first: list[float] = []

    def stop() -> bool:
        now = time.perf_counter()
        if not first and att.refused:
            first.append(now)
            harness.log(f"first refusal after {now - t0:.1f}s: {next(iter(att.messages))}")
        if first:
            return now - first[0] > args.full_seconds
        return now - t0 > args.fill_timeout

    await keyed_stores(
        address, items, att, streams=args.streams, pipeline=args.pipeline, stop=stop, pause=0.2
    )
    async with AsyncMemoryClient(address, timeout=30.0, retries=0) as c:
        try:
            st = scalar_fields(await c.stats(args_agent(att), daemon_wide=True))
        except MemorydError as e:
            st = f"Stats: {e.code.name}: {short(e.message)}"
    notes.append(
        [
            "full",
            f"{free_bytes(mnt) >> 10} KiB free, {len(att.acked)} acked",
            await health(address),
            st,
        ]
    )
    return (first[0] - t0) if first else 0.0


def args_agent(att: Attempts) -> str:
    return next(iter(att.sent.values())).agent if att.sent else "df-0"


async def while_full(
    address: str, agents: Sequence[str], att: Attempts, texts: Iterator[str]
) -> list[list[object]]:
    """While the disk is full: one unary Store, a Recall, and Get of what was acknowledged."""
    out: list[list[object]] = []
    async with AsyncMemoryClient(address, timeout=30.0, retries=0) as c:
        try:
            r = await c.store(agents[0], next(texts), idempotency_key="df-unary-full")
            answer = f"{OUTCOME.get(r.outcome, r.outcome)} {r.memory.id}"
        except MemorydError as e:
            answer = f"{e.code.name}: {short(e.message)}"
        out.append(["full", "unary Store", "", answer])
        try:
            rr = await c.recall(agents[0], next(corpus.queries(1)))
            answer = f"OK, {len(rr.results)} results"
        except MemorydError as e:
            answer = f"{e.code.name}: {short(e.message)}"
        out.append(["full", "Recall", "", answer])
    acked = [(att.sent[k], v[0]) for k, v in att.acked.items()]
    lost, differs = await read_back(address, acked, retries=0)
    out.append(
        [
            "full",
            "Get of every acknowledged store",
            "",
            f"{len(att.acked) - len(lost)}/{len(att.acked)} found, {differs} differ",
        ]
    )
    return out


async def recover(
    args: argparse.Namespace,
    address: str,
    mnt: Path,
    agents: Sequence[str],
    texts: Iterator[str],
    att: Attempts,
    notes: list[list[object]],
) -> str:
    """Enlarge the tmpfs; time until a Store is CREATED again; retry every refused key."""
    subprocess.run(["mount", "-o", f"remount,size={args.disk_mib * 2}m", str(mnt)], check=True)
    t0 = time.perf_counter()
    answers: Counter[str] = Counter()
    recovered = ""
    async with AsyncMemoryClient(address, timeout=30.0, retries=0) as c:
        i = 0
        while time.perf_counter() - t0 < args.fill_timeout:
            item = Item(f"df-recover-{i}", agents[i % len(agents)], next(texts))
            i += 1
            att.sent[item.key] = item
            try:
                r = await c.store(item.agent, item.text, idempotency_key=item.key)
            except MemorydError as e:
                answers[e.code.name] += 1
                att.refused[item.key] = e.code.name
                await asyncio.sleep(0.25)
                continue
            att.acked[item.key] = (r.memory.id, r.outcome)
            recovered = (
                f"yes, a Store succeeded {time.perf_counter() - t0:.2f}s after the remount "
                f"(answers before it: {codes(answers)})"
            )
            break
        st = scalar_fields(await c.stats(agents[0], daemon_wide=True))
        notes.append(["space back", f"{free_bytes(mnt) >> 20} MiB free", await health(address), st])
        retried: Counter[str] = Counter()
        for key in [k for k in att.refused if k not in att.acked]:
            item = att.sent[key]
            try:
                r = await c.store(item.agent, item.text, idempotency_key=key)
            except MemorydError as e:
                retried[e.code.name] += 1
                continue
            att.acked[key] = (r.memory.id, r.outcome)
            retried[OUTCOME.get(r.outcome, str(r.outcome))] += 1
        notes.append(["space back", "retry of every refused key", "", codes(retried)])
    return recovered or f"NO, still refused {args.fill_timeout:g}s after ({codes(answers)})"


# -- SIGTERM under load ---------------------------------------------------------------


async def unary_worker(
    address: str, agent: str, items: Iterator[Item], att: Attempts, term: list[float]
) -> None:
    """Alternating keyed Store and Recall, until refused after the SIGTERM."""
    queries = corpus.queries(hash(agent) % 1000)
    async with AsyncMemoryClient(address, retries=0, timeout=60.0) as c:
        n = 0
        while True:
            n += 1
            t0 = time.perf_counter()
            kind = "unary Store" if n % 2 else "unary Recall"
            item = next(items)
            try:
                if kind == "unary Store":
                    att.sent[item.key] = item
                    r = await c.store(item.agent, item.text, idempotency_key=item.key)
                    att.acked[item.key] = (r.memory.id, r.outcome)
                else:
                    await c.recall(agent, next(queries))
                att.calls.append((t0, time.perf_counter(), kind, "OK"))
            except MemorydError as e:
                if kind == "unary Store":
                    att.refused[item.key] = e.code.name
                att.calls.append((t0, time.perf_counter(), kind, e.code.name))
                att.note(e.code.name, e.message)
                if term:
                    return
                await asyncio.sleep(0.1)


def scenario_sigterm(args: argparse.Namespace) -> list[str]:
    rng = random.Random(args.seed)
    lo, hi = (float(x) for x in args.kill_after.split("-"))
    texts = corpus.memories(args.seed)
    rows: list[list[object]] = []
    phases: Counter[tuple[str, str, str]] = Counter()
    messages: Counter[str] = Counter()
    with workspace(args) as base:
        daemon = new_daemon(base, args.data_dir or base / "data")
        start(daemon)
        try:
            for rnd in range(1, args.rounds + 1):
                agents = [f"st-r{rnd:03d}-{i}" for i in range(args.agents)]
                att = Attempts()
                items = keyed_items(f"st-{args.seed}-{rnd}", agents, texts)
                after = rng.uniform(lo, hi)
                term: list[float] = []
                exit_info: dict[str, float] = {}

                async def load(
                    att: Attempts = att,
                    items: Iterator[Item] = items,
                    agents: list[str] = agents,
                    after: float = after,
                    term: list[float] = term,
                    exit_info: dict[str, float] = exit_info,
                ) -> None:
                    proc = daemon.process
                    assert proc is not None

                    async def terminate() -> None:
                        await asyncio.sleep(after)
                        term.append(time.perf_counter())
                        proc.send_signal(signal.SIGTERM)
                        code = await asyncio.to_thread(proc.wait, 120)
                        exit_info["code"] = code
                        exit_info["seconds"] = time.perf_counter() - term[0]

                    await asyncio.gather(
                        terminate(),
                        keyed_stores(
                            daemon.address,
                            items,
                            att,
                            streams=args.streams,
                            pipeline=args.pipeline,
                            stop=lambda: bool(term) and "code" in exit_info,
                        ),
                        *(
                            unary_worker(daemon.address, agents[i % len(agents)], items, att, term)
                            for i in range(args.unary_clients)
                        ),
                    )

                asyncio.run(load())
                code = daemon.stop()
                t_term = term[0]
                for t0, t1, kind, status in att.calls:
                    if t1 < t_term:
                        phase = "answered before the signal"
                    elif t0 < t_term:
                        phase = "in flight at the signal"
                    else:
                        phase = "sent after the signal"
                    phases[(phase, kind.split()[0], status)] += 1
                messages.update(att.messages)
                restart = start(daemon)
                ck = asyncio.run(check_after_restart(daemon.address, att, agents))
                rows.append(
                    [
                        rnd,
                        f"{after:.2f}",
                        code,
                        f"{exit_info.get('seconds', float('nan')):.2f}",
                        len(att.sent),
                        len(att.acked),
                        ck.found,
                        len(ck.lost),
                        ck.doubled,
                        ck.replay_same,
                        len(ck.replay_other),
                        ck.unacked_committed,
                        f"{restart:.1f}",
                        ck.problems(),
                    ]
                )
                harness.log(
                    f"round {rnd}: exit {code} {exit_info.get('seconds', 0):.2f}s after SIGTERM, "
                    f"{len(att.acked)} acked, lost {len(ck.lost)}, doubled {ck.doubled}"
                )
        finally:
            daemon.stop()
    phase_rows = []
    for phase in ("answered before the signal", "in flight at the signal", "sent after the signal"):
        for via in ("Stream", "unary"):
            got = Counter({st: n for (p, v, st), n in phases.items() if (p, v) == (phase, via)})
            errors = codes(Counter({k: v for k, v in got.items() if k != "OK"}))
            phase_rows.append([phase, via, got.get("OK", 0), errors])
    return [
        f"{args.streams} Streams x {args.pipeline} keyed Stores in flight plus "
        f"{args.unary_clients} unary clients (keyed Store / Recall alternating), SIGTERM "
        f"uniformly {lo:g}-{hi:g} s after the load began, clients going on until refused; "
        "shutdown grace is the daemon's `server.shutdown_grace_seconds`.",
        harness.table(
            (
                "round",
                "SIGTERM after s",
                "exit code",
                "exit s",
                "stores sent",
                "acked",
                "found after restart",
                "lost",
                "doubled",
                "retry same id",
                "retry other id",
                "stored unacked",
                "restart s",
                "problems",
            ),
            rows,
        ),
        harness.table(("calls", "via", "OK", "errors by code"), phase_rows),
        harness.table(
            ("status: message", "count"), sorted(messages.items(), key=lambda kv: -kv[1])
        ),
    ]


# -- soak -----------------------------------------------------------------------------


SOAK_OPS = (
    ("Store", 15),
    ("Recall", 25),
    ("Forget", 10),
    ("Update", 8),
    ("Get", 10),
    ("List", 5),
    ("Stats", 3),
    ("Stream", 5),
    ("BuildContext", 10),
    ("Capture", 5),
    ("Export", 4),
)


@dataclass
class SoakClient:
    agent: str
    client: AsyncMemoryClient
    channel: grpc.aio.Channel
    rng: random.Random
    pool: list[tuple[str, str]] = field(default_factory=list)  # (id, text) it stored


async def soak_op(
    op: str, sc: SoakClient, texts: Iterator[str], queries: Iterator[str], export_agent: str
) -> str:
    """One call of ``op``; returns the op actually done (a Store becomes a Forget when the
    client holds ``pool`` memories, and the other way round when it holds none)."""
    c = sc.client
    if op == "Store":
        r = await c.store(sc.agent, next(texts), idempotency_key=secrets.token_hex(8))
        if r.outcome == pb.STORE_OUTCOME_CREATED:
            sc.pool.append((r.memory.id, r.memory.text))
    elif op == "Forget":
        i = sc.rng.randrange(len(sc.pool))
        id_, text = sc.pool[i]
        if sc.rng.random() < 0.7:
            await c.forget(sc.agent, id=id_)
            sc.pool.pop(i)
        else:
            fr = await c.forget(sc.agent, query=text)
            gone = set(fr.deleted_ids)
            sc.pool[:] = [(x, t) for x, t in sc.pool if x not in gone]
    elif op == "Update":
        i = sc.rng.randrange(len(sc.pool))
        id_, text = sc.pool[i]
        if sc.rng.random() < 0.25:
            new = next(texts)
            await c.update(sc.agent, id_, text=new)
            sc.pool[i] = (id_, new)
        else:
            await c.update(sc.agent, id_, importance=sc.rng.random(), metadata={"n": str(i)})
    elif op == "Get":
        await c.get(sc.agent, sc.rng.choice(sc.pool)[0])
    elif op == "Recall":
        await c.recall(sc.agent, next(queries))
    elif op == "List":
        await c.list(sc.agent, page_size=20)
    elif op == "Stats":
        await c.stats(sc.agent)
    elif op == "Stream":
        session = harness.StreamSession(c)
        try:
            text = next(texts)
            key = secrets.token_hex(8)
            store = pb.StoreRequest(agent_id=sc.agent, text=text, idempotency_key=key)
            answers = await asyncio.gather(
                session.call(store=store),
                session.call(recall=pb.RecallRequest(agent_id=sc.agent, query=next(queries))),
            )
            for r in answers:
                if r.WhichOneof("result") == "error":
                    raise error_for(STATUS[r.error.code], r.error.message)
            if answers[0].store.outcome == pb.STORE_OUTCOME_CREATED:
                sc.pool.append((answers[0].store.memory.id, text))
        finally:
            await session.close()
    elif op == "BuildContext":
        stub = hooks_pb2_grpc.HookServiceStub(sc.channel)
        await rpc(
            stub.BuildContext(
                hooks_pb2.BuildContextRequest(
                    agent_id=sc.agent, session_id="soak", prompt="Do you remember " + next(queries)
                ),
                timeout=60.0,
            )
        )
    elif op == "Capture":
        stub = hooks_pb2_grpc.HookServiceStub(sc.channel)
        msg = hooks_pb2.ChatMessage(role="user", text="Please remember that " + next(texts))
        cr = await rpc(
            stub.Capture(
                hooks_pb2.CaptureRequest(agent_id=sc.agent, session_id="soak", messages=[msg]),
                timeout=60.0,
            )
        )
        sc.pool += [(m.id, m.text) for m in cr.captured]
    elif op == "Export":
        stub = memory_pb2_grpc.MemoryServiceStub(sc.channel)
        call = stub.Export(pb.ExportRequest(agent_id=export_agent), timeout=60.0)
        n = 0
        try:
            async for _ in call:
                n += 1
        except grpc.aio.AioRpcError as e:
            raise error_from_rpc(e) from None
        if n == 0:
            raise MemorydError(grpc.StatusCode.DATA_LOSS, "Export of the small agent was empty")
    return op


async def rpc(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except grpc.aio.AioRpcError as e:
        raise error_from_rpc(e) from None


def pick(sc: SoakClient, pool_cap: int) -> str:
    op = sc.rng.choices([o for o, _ in SOAK_OPS], weights=[w for _, w in SOAK_OPS])[0]
    if op in ("Store", "Capture", "Stream") and len(sc.pool) >= pool_cap:
        return "Forget"
    if op in ("Forget", "Update", "Get") and not sc.pool:
        return "Store"
    return op


def scenario_soak(args: argparse.Namespace) -> list[str]:
    texts = corpus.memories(args.seed)
    queries = corpus.queries(args.seed)
    agents = [f"soak-{i:02d}" for i in range(args.clients)]
    export_agent = "soak-export"
    with workspace(args) as base:
        daemon = new_daemon(base, args.data_dir or base / "data")
        start(daemon)
        try:
            preload = [(export_agent, t) for t in corpus.take(texts, 20)]
            preload += harness.agents_round_robin(agents, corpus.take(texts, args.memories))
            loaded = asyncio.run(harness.bulk_store(daemon.address, preload, label="preloaded"))
            harness.log(f"preloaded: {loaded.summary()}")
            samples, minutes = asyncio.run(
                soak_run(args, daemon, agents, export_agent, texts, queries)
            )
            rss_end = harness.proc_status(daemon.pid)
            logs = log_counts(daemon)
            code = daemon.stop()
        finally:
            daemon.stop()
    by_op: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for s in samples:
        by_op[s[1]].append(s)
    op_rows = []
    for op, _ in SOAK_OPS:
        got = by_op.get(op, [])
        ok = [sec for _, _, sec, code in got if code == "OK"]
        lat = harness.summary_ms(ok)
        errs = Counter(code for *_, code in got if code != "OK")
        op_rows.append([op, len(got), codes(errs), lat["p50"], lat["p99"], lat["max"]])
    all_errs = Counter(code for *_, code in samples if code != "OK")
    return [
        f"{args.clients} clients (one agent each, one call at a time; their channels share "
        "one connection), "
        f"{args.duration:g}s, {args.memories} memories preloaded ({loaded.summary()}); "
        f"a client forgets once it holds {args.pool} memories. Errors in total: "
        f"{codes(all_errs)} of {len(samples)} calls. Daemon exit {code}, VmHWM "
        f"{harness.mib(rss_end.get('VmHWM'))} MiB; its log: {logs}.",
        harness.table(("RPC", "calls", "errors", "p50 ms", "p99 ms", "max ms"), op_rows),
        harness.table(
            (
                "minute",
                "calls",
                "errors",
                "p50 ms",
                "p99 ms",
                "Recall p99 ms",
                "Store p99 ms",
                "daemon RSS MiB",
                "rows",
                "daemon CPU",
            ),
            minutes,
        ),
    ]


async def soak_run(
    args: argparse.Namespace,
    daemon: harness.Daemon,
    agents: list[str],
    export_agent: str,
    texts: Iterator[str],
    queries: Iterator[str],
) -> tuple[list[Any], list[list[object]]]:
    address = daemon.address
    samples: list[Any] = []  # (done_at, op, seconds, code)
    t_start = time.perf_counter()
    stop_at = t_start + args.duration
    clients = []
    for i, agent in enumerate(agents):
        clients.append(
            SoakClient(
                agent,
                AsyncMemoryClient(address, retries=0, timeout=60.0),
                grpc.aio.insecure_channel(address),
                random.Random(f"{args.seed}-{i}"),
            )
        )
    for sc in clients:  # the preloaded memories are the client's to forget too
        page = await sc.client.list(sc.agent, page_size=500)
        sc.pool = [(m.id, m.text) for m in page.memories]

    async def worker(sc: SoakClient) -> None:
        while time.perf_counter() < stop_at:
            op = pick(sc, args.pool)
            t0 = time.perf_counter()
            try:
                await soak_op(op, sc, texts, queries, export_agent)
                code = "OK"
            except MemorydError as e:
                code = e.code.name
                if code not in seen_messages:
                    seen_messages[code] = e.message
                    harness.log(f"{op}: {code}: {short(e.message)}")
            t1 = time.perf_counter()
            samples.append((t1 - t_start, op, t1 - t0, code))

    seen_messages: dict[str, str] = {}
    minutes: list[list[object]] = []

    async def monitor() -> None:
        cpu0 = harness.cpu_seconds(daemon.pid)
        minute = 0
        while True:
            minute += 1
            await asyncio.sleep(max(0.0, t_start + 60 * minute - time.perf_counter()))
            lo, hi = 60 * (minute - 1), 60 * minute
            got = [s for s in samples if lo <= s[0] < hi]
            ok = [s[2] for s in got if s[3] == "OK"]
            rec = [s[2] for s in got if s[3] == "OK" and s[1] == "Recall"]
            sto = [s[2] for s in got if s[3] == "OK" and s[1] == "Store"]
            lat, r, s_ = harness.summary_ms(ok), harness.summary_ms(rec), harness.summary_ms(sto)
            rss = harness.proc_status(daemon.pid).get("VmRSS")
            cpu1 = harness.cpu_seconds(daemon.pid)
            cpu = "n/a" if cpu0 is None or cpu1 is None else f"{100 * (cpu1 - cpu0) / 60:.0f}%"
            cpu0 = cpu1
            try:
                rows = await daemon_rows(address)
            except MemorydError:
                rows = -1
            errs = Counter(s[3] for s in got if s[3] != "OK")
            minutes.append(
                [
                    minute,
                    len(got),
                    codes(errs),
                    lat["p50"],
                    lat["p99"],
                    r["p99"],
                    s_["p99"],
                    harness.mib(rss),
                    rows,
                    cpu,
                ]
            )
            harness.log(
                f"minute {minute}: {len(got)} calls, errors {codes(errs)}, p99 "
                f"{lat['p99']:.1f} ms, RSS {harness.mib(rss)} MiB, rows {rows}"
            )
            if hi >= args.duration:
                return

    try:
        await asyncio.gather(monitor(), *(worker(sc) for sc in clients))
    finally:
        for sc in clients:
            await sc.client.close()
            await sc.channel.close()
    return samples, minutes


# -- fairness ---------------------------------------------------------------------------


def write_keys(path: Path) -> dict[str, str]:
    keys = {name: "mk_" + secrets.token_urlsafe(24) for name in ("a", "b")}
    entries = []
    for name, secret in keys.items():
        digest = hashlib.sha256(secret.encode()).hexdigest()
        entries.append(
            f'[[key]]\nname = "tenant-{name}"\nsha256 = "{digest}"\nagents = ["tenant-{name}-*"]\n'
        )
    path.write_text("\n".join(entries), encoding="utf-8")
    return keys


async def b_recalls(
    address: str, token: str, agent: str, queries: Iterator[str], seconds: float, interval: float
) -> tuple[list[float], Counter[str]]:
    """One Recall at a time for ``seconds``, ``interval`` between calls; no retries."""
    lat: list[float] = []
    errors: Counter[str] = Counter()
    async with AsyncMemoryClient(address, token=token, retries=0, timeout=30.0) as c:
        await c.recall(agent, "warm up the channel")
        stop_at = time.perf_counter() + seconds
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            try:
                await c.recall(agent, next(queries))
                lat.append(time.perf_counter() - t0)
            except MemorydError as e:
                errors[e.code.name] += 1
            await asyncio.sleep(interval)
    return lat, errors


def send_result(out: Connection, work: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """In its own process: run ``work(*args)`` and send its result back through ``out``."""
    out.send(asyncio.run(work(*args)))
    out.close()


async def flood(
    address: str,
    token: str,
    streams: int,
    pipeline: int,
    seconds: float,
    seed: int,
    recall_share: float,
) -> dict[str, Any]:
    """``streams`` Streams of key A, Recalls (``recall_share``) and Stores, for ``seconds``."""
    texts = corpus.memories(seed + 7)
    queries = corpus.queries(seed + 7)
    agents = [f"tenant-a-{i}" for i in range(10)]
    done: Counter[str] = Counter()
    per_conn = 20  # Streams per connection, under server.max_streams_per_connection
    clients = [
        harness.StreamChannel(address, token) for _ in range((streams + per_conn - 1) // per_conn)
    ]
    sessions = [harness.StreamSession(clients[i // per_conn]) for i in range(streams)]
    rng = random.Random(seed)
    t0 = time.perf_counter()
    stop_at = t0 + seconds

    async def worker(s: harness.StreamSession) -> None:
        while time.perf_counter() < stop_at and s.broken is None:
            agent = agents[rng.randrange(len(agents))]
            if rng.random() < recall_share:
                kind, op = (
                    "Recall",
                    {"recall": pb.RecallRequest(agent_id=agent, query=next(queries))},
                )
            else:
                kind, op = "Store", {"store": pb.StoreRequest(agent_id=agent, text=next(texts))}
            try:
                r = await s.call(**op)
            except MemorydError as e:
                done[f"{kind} {e.code.name}"] += 1
                return
            code = r.error.code_name if r.WhichOneof("result") == "error" else "OK"
            done[f"{kind} {code}"] += 1

    cpu0 = time.process_time()
    try:
        await asyncio.wait_for(
            asyncio.gather(*(worker(s) for s in sessions for _ in range(pipeline))),
            timeout=seconds + 120,
        )
    except TimeoutError:
        done["still waiting at the end"] += 1
    elapsed = time.perf_counter() - t0
    for s in sessions:
        await s.close()
    for c in clients:
        await c.close()
    return {"done": dict(done), "seconds": elapsed, "cpu": time.process_time() - cpu0}


def scenario_fairness(args: argparse.Namespace) -> list[str]:
    queries = corpus.queries(args.seed)
    texts = corpus.memories(args.seed)
    rows: list[list[object]] = []
    a_rows: list[list[object]] = []
    with workspace(args) as base:
        keys = write_keys(base / "keys.toml")
        data = args.data_dir or base / "data"
        configs = [("[limits] off", {})]
        for rate in (float(x) for x in args.rates.split(",") if x.strip()):
            env = {"MEMORYD_LIMITS__REQUESTS_PER_SECOND": f"{rate:g}"}
            configs.append((f"requests_per_second={rate:g}", env))
        for i, (label, extra) in enumerate(configs):
            env = {"MEMORYD_AUTH__KEYS_FILE": str(base / "keys.toml"), **extra}
            daemon = new_daemon(base, data, env)
            start(daemon)
            try:
                if i == 0:
                    preload(daemon.address, keys, texts, args.memories)
                harness.log(f"{label}: B idle for {args.idle_seconds:g}s")
                idle, idle_err = asyncio.run(
                    b_recalls(
                        daemon.address,
                        keys["b"],
                        "tenant-b-0",
                        queries,
                        args.idle_seconds,
                        args.b_interval,
                    )
                )
                harness.log(
                    f"{label}: flood of {args.flood_streams} Streams for {args.duration:g}s"
                )
                ctx = multiprocessing.get_context("spawn")
                rx, tx = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=send_result,
                    args=(
                        tx,
                        flood,
                        daemon.address,
                        keys["a"],
                        args.flood_streams,
                        args.flood_pipeline,
                        args.duration + args.warmup,
                        args.seed + i,
                        args.flood_recalls,
                    ),
                )
                proc.start()
                cpu0 = harness.cpu_seconds(daemon.pid)
                time.sleep(args.warmup)
                flooded, flood_err = asyncio.run(
                    b_recalls(
                        daemon.address,
                        keys["b"],
                        "tenant-b-0",
                        queries,
                        args.duration,
                        args.b_interval,
                    )
                )
                cpu1 = harness.cpu_seconds(daemon.pid)
                result = rx.recv() if rx.poll(args.duration + 300) else {"done": {}, "seconds": 0}
                proc.join(60)
                rss = harness.proc_status(daemon.pid)
            finally:
                daemon.stop()
            a, b = harness.summary_ms(idle), harness.summary_ms(flooded)
            ratio = b["p99"] / a["p99"] if a["p99"] else float("nan")
            rows.append(
                [
                    label,
                    a["n"],
                    a["p50"],
                    a["p99"],
                    b["n"],
                    b["p50"],
                    b["p99"],
                    f"{ratio:.2f}",
                    "yes" if ratio <= 2 else "no",
                    codes(idle_err + flood_err),
                ]
            )
            done = Counter(result["done"])
            secs = result["seconds"] or float("nan")
            ok_rec, ok_sto = done.get("Recall OK", 0), done.get("Store OK", 0)
            errs = Counter({k: v for k, v in done.items() if not k.endswith(" OK")})
            dcpu = (
                "n/a"
                if cpu0 is None or cpu1 is None
                else f"{100 * (cpu1 - cpu0) / (args.duration):.0f}%"
            )
            a_rows.append(
                [
                    label,
                    f"{ok_rec / secs:.1f}",
                    f"{ok_sto / secs:.1f}",
                    codes(errs),
                    f"{secs:.0f}",
                    f"{100 * result.get('cpu', 0) / secs:.0f}%",
                    dcpu,
                    harness.mib(rss.get("VmHWM")),
                ]
            )
            harness.log(f"{label}: B p99 idle {a['p99']:.1f} ms, flooded {b['p99']:.1f} ms")
    return [
        f"Tenant B (its own key): one Recall at a time on `tenant-b-0` "
        f"({args.memories // 2} memories), a distinct query each (embedded every time), "
        f"{args.b_interval * 1000:g} ms between calls, no retries; {args.idle_seconds:g}s idle, "
        f"then {args.duration:g}s while tenant A (another key, another process) floods "
        f"{args.flood_streams} Streams x {args.flood_pipeline} ops in flight, "
        f"{args.flood_recalls:.0%} Recalls and the rest Stores, over 10 agents "
        f"({args.memories // 2} memories), measured after {args.warmup:g}s of flood.",
        harness.table(
            (
                "config",
                "B idle calls",
                "idle p50 ms",
                "idle p99 ms",
                "B flooded calls",
                "flooded p50 ms",
                "flooded p99 ms",
                "p99 ratio",
                "within 2x",
                "B errors",
            ),
            rows,
        ),
        harness.table(
            (
                "config",
                "A Recalls/s",
                "A Stores/s",
                "A errors",
                "A seconds",
                "flood process CPU",
                "daemon CPU",
                "daemon peak RSS MiB",
            ),
            a_rows,
        ),
    ]


def preload(address: str, keys: dict[str, str], texts: Iterator[str], n: int) -> None:
    a_agents = [f"tenant-a-{i}" for i in range(10)]
    a_items = harness.agents_round_robin(a_agents, corpus.take(texts, n // 2))
    b_items = [("tenant-b-0", t) for t in corpus.take(texts, n // 2)]
    for items, token in ((a_items, keys["a"]), (b_items, keys["b"])):
        r = asyncio.run(harness.bulk_store(address, items, token=token, label="preloaded"))
        harness.log(f"preloaded: {r.summary()}")


# -- main -----------------------------------------------------------------------------

TITLES = {
    "kill9": "Reliability: kill -9 during Streams of keyed Stores",
    "diskfull": "Reliability: disk full",
    "sigterm": "Reliability: SIGTERM under load",
    "soak": "Reliability: soak, every RPC",
    "fairness": "Reliability: fairness between tenants",
}
SCENARIOS: dict[str, Callable[[argparse.Namespace], list[str]]] = {
    "kill9": scenario_kill9,
    "diskfull": scenario_diskfull,
    "sigterm": scenario_sigterm,
    "soak": scenario_soak,
    "fairness": scenario_fairness,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scenario", choices=tuple(SCENARIOS), required=True)
    p.add_argument("--rounds", type=int, help="kill9: 200; sigterm: 5")
    p.add_argument(
        "--kill-after", help="LO-HI seconds after the load began (kill9 0.2-1.5, sigterm 1-4)"
    )
    p.add_argument("--streams", type=int, default=4, help="Streams of keyed Stores")
    p.add_argument("--pipeline", type=int, default=8, help="Stores in flight per Stream")
    p.add_argument("--agents", type=int, default=4, help="agents per round (kill9, sigterm)")
    p.add_argument("--unary-clients", type=int, default=4, help="sigterm: unary clients")
    p.add_argument("--disk-mib", type=int, default=64, help="diskfull: tmpfs size")
    p.add_argument("--headroom-mib", type=int, default=6, help="diskfull: free after the ballast")
    p.add_argument("--full-seconds", type=float, default=10.0, help="diskfull: keep storing")
    p.add_argument("--fill-timeout", type=float, default=300.0, help="diskfull: give up after")
    p.add_argument("--clients", type=int, default=32, help="soak: clients")
    p.add_argument("--duration", type=float, help="soak: 600 s; fairness: flood seconds (60)")
    p.add_argument("--memories", type=int, help="soak: preloaded (640); fairness: 2000")
    p.add_argument("--pool", type=int, default=40, help="soak: memories a client keeps")
    p.add_argument("--flood-streams", type=int, default=200)
    p.add_argument(
        "--flood-recalls", type=float, default=0.5, help="share of Recalls in the flood (0-1)"
    )
    p.add_argument("--flood-pipeline", type=int, default=2, help="ops in flight per flood Stream")
    p.add_argument(
        "--rates", default="100,25", help="fairness: requests/s per key, one run each ('' = none)"
    )
    p.add_argument(
        "--b-interval", type=float, default=0.05, help="fairness: B's pause between calls"
    )
    p.add_argument("--idle-seconds", type=float, default=20.0, help="fairness: B alone")
    p.add_argument("--warmup", type=float, default=5.0, help="fairness: flood before measuring")
    p.add_argument("--data-dir", type=Path, help="data dir (default: a temp dir; never deleted)")
    p.add_argument("--keep-data", action="store_true", help="keep the temp dir and its log")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()
    args.rounds = args.rounds or (200 if args.scenario == "kill9" else 5)
    args.kill_after = args.kill_after or ("0.2-1.5" if args.scenario == "kill9" else "1-4")
    args.duration = args.duration or (600.0 if args.scenario == "soak" else 60.0)
    args.memories = (
        args.memories if args.memories is not None else (640 if args.scenario == "soak" else 2000)
    )
    harness.log(f"{args.scenario}: load average {harness.load_average()}")
    sections = SCENARIOS[args.scenario](args)
    harness.report(args, TITLES[args.scenario], sections)


if __name__ == "__main__":
    main()
