"""Faults of a fleet on one bucket, against a moto server: the object store unreachable
(a proxy in front of moto cut and restored, so the in-memory server keeps its buckets) and
a daemon killed with kill -9 in the middle of writes while another daemon writes too (Lance's
commits keep every acknowledged write; what this tests of memoryd's own is that the other
daemon writes on, serves the killed one's agents and takes the maintenance lease over)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memoryd_client import MemoryClient, MemorydError
from memoryd_testing.launcher import Daemon
from memoryd_testing.memories import FACTS
from memoryd_testing.records import record, row
from memoryd_testing.s3 import S3Server, TcpProxy

from memoryd.core.errors import StoreUnavailable
from memoryd.storage.lance_store import LanceStore

pytestmark = pytest.mark.integration

STORAGE = "memoryd.storage"
FOLLOW = "memoryd.follow"


def storage_health(address: str, entry: str = STORAGE) -> int:
    with grpc.insecure_channel(address) as channel:
        request = health_pb2.HealthCheckRequest(service=entry)
        return health_pb2_grpc.HealthStub(channel).Check(request, timeout=10).status


def lease_pid(s3: S3Server, bucket: str) -> int | None:
    """The pid written in the maintenance lease of s3://bucket/memoryd (None: none yet)."""
    try:
        got = s3.client().get_object(Bucket=bucket, Key="memoryd/_memoryd/maintenance.lease")
    except s3.client().exceptions.NoSuchKey:
        return None
    return int(json.loads(got["Body"].read())["pid"])


def gauge(daemon: Daemon, name: str) -> float:
    """One unlabelled metric of the daemon's Prometheus endpoint."""
    with urllib.request.urlopen(daemon.metrics_url(), timeout=10) as r:
        text = r.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found, text
    return float(found.group(1))


def maintainer(daemon: Daemon) -> float:
    """The daemon's memoryd_store_maintainer gauge (1: it compacts and cleans up)."""
    return gauge(daemon, "memoryd_store_maintainer")


def wait_until(condition: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_an_unreachable_store_refuses_writes_serves_reads_and_recovers_by_itself(
    s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    uri = f"s3://{bucket}/memoryd"
    proxy = TcpProxy(s3.port).start()
    daemon = Daemon(tmp_path / "d", tmp_path / "d.log", s3.daemon_env(uri, proxy.endpoint))
    daemon.start()
    serving = health_pb2.HealthCheckResponse.SERVING
    try:
        with MemoryClient(daemon.address, retries=0) as c:
            kept = c.store("main", "The user keeps bees on the roof").memory
            assert storage_health(daemon.address) == serving
            assert storage_health(daemon.address, FOLLOW) == serving

            proxy.stop()  # the object store goes away
            started = time.monotonic()
            with pytest.raises(MemorydError) as caught:
                c.store("main", "The user's car is green", timeout=120)
            # Bounded by the default timeouts and retries (the store client's own default
            # retried for minutes); a generous bound, not a measurement.
            assert time.monotonic() - started < 60
            assert caught.value.code == grpc.StatusCode.UNAVAILABLE
            message = caught.value.details
            assert uri in message and "cannot be reached (connection failed)" in message
            assert "nothing was written" in message
            with pytest.raises(MemorydError) as again:  # refused at once while it is down
                c.store("main", "The user's bike is red")
            assert again.value.code == grpc.StatusCode.UNAVAILABLE

            # Reads go on from memory; health and Stats say why writes fail.
            got = c.recall("main", "who keeps bees?")
            assert [r.memory.id for r in got.results][:1] == [kept.id]
            assert c.get("main", kept.id).text == kept.text
            wait_until(lambda: storage_health(daemon.address) != serving)
            assert "cannot be reached" in c.stats("main").storage_status
            # Following the others' commits fails too: the index no longer moves.
            wait_until(lambda: storage_health(daemon.address, FOLLOW) != serving)

            proxy.start()  # it comes back: writes succeed again, no restart
            stored: list[str] = []

            def store_succeeds() -> bool:
                try:
                    stored.append(c.store("main", "The user's car is green").memory.id)
                except MemorydError as e:
                    assert e.code == grpc.StatusCode.UNAVAILABLE, e
                    return False
                return True

            wait_until(store_succeeds)
            wait_until(lambda: storage_health(daemon.address) == serving)
            assert c.stats("main").storage_status == "ok"
            wait_until(lambda: storage_health(daemon.address, FOLLOW) == serving)
    finally:
        proxy.stop()
        proxy.start()  # let the daemon flush and release its lease on the way out
        assert daemon.stop() == 0, daemon.log_tail()
        proxy.stop()

    # What was acknowledged after the outage is in the bucket: a fresh daemon reads it.
    fresh = Daemon(tmp_path / "f", tmp_path / "f.log", s3.daemon_env(uri)).start()
    try:
        with MemoryClient(fresh.address, retries=0) as c:
            assert c.get("main", stored[0]).text == "The user's car is green"
            assert c.get("main", kept.id).text == kept.text
    finally:
        assert fresh.stop() == 0, fresh.log_tail()


def test_kill_9_mid_writes_loses_no_acknowledged_write_and_the_other_daemon_serves_on(
    s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    uri = f"s3://{bucket}/memoryd"
    env = {
        **s3.daemon_env(uri),
        "MEMORYD_STORAGE__LEASE_SECONDS": "4",
        "MEMORYD_METRICS__LISTEN": "127.0.0.1:0",
    }
    doomed = Daemon(tmp_path / "a", tmp_path / "a.log", env).start()
    # The first daemon holds the maintenance lease (it compacts and cleans up) ...
    wait_until(lambda: lease_pid(s3, bucket) == doomed.pid)
    survivor = Daemon(tmp_path / "b", tmp_path / "b.log", env).start()
    assert maintainer(doomed) == 1 and maintainer(survivor) == 0
    acked: dict[str, str] = {}  # memory id: agent, for every Store answered OK
    lock = threading.Lock()
    stop = threading.Event()
    survivor_errors: list[BaseException] = []

    def write(daemon: Daemon, agent: str, *, may_fail: bool) -> None:
        with MemoryClient(daemon.address, retries=0) as c:
            for i in range(len(FACTS)):
                if stop.is_set():
                    return
                try:
                    memory = c.store(agent, FACTS[i], timeout=60).memory
                except MemorydError as e:
                    if not may_fail:
                        survivor_errors.append(e)
                    return  # killed: whatever was not answered OK is not owed
                with lock:
                    acked[memory.id] = agent

    writers = [
        threading.Thread(target=write, args=(doomed, f"agent-{n}"), kwargs={"may_fail": True})
        for n in range(3)
    ] + [threading.Thread(target=write, args=(survivor, "agent-b"), kwargs={"may_fail": False})]
    try:
        for w in writers:
            w.start()
        wait_until(lambda: sum(a != "agent-b" for a in acked.values()) >= 15)
        doomed.kill()  # kill -9, Stores in flight
        # The survivor keeps writing, and serves the killed daemon's agents too.
        with MemoryClient(survivor.address, retries=0) as c:
            for n in range(3):
                moved = c.store(f"agent-{n}", f"Agent {n} moved to the other daemon").memory
                acked[moved.id] = f"agent-{n}"
        stop.set()
        for w in writers:
            w.join(timeout=120)
        assert not survivor_errors, survivor_errors
        # ... and, killed, never renews it: the survivor takes maintenance over.
        wait_until(lambda: lease_pid(s3, bucket) == survivor.pid)
        wait_until(lambda: maintainer(survivor) == 1)
        # Its follow gauges: it keeps up with the table (nothing seen left unapplied).
        wait_until(lambda: gauge(survivor, "memoryd_follow_versions_behind") == 0)
        assert gauge(survivor, "memoryd_follow_seconds_since_check") >= 0
    finally:
        stop.set()
        doomed.kill()
        assert survivor.stop() == 0, survivor.log_tail()

    # A fresh daemon opens the store cleanly and finds every acknowledged memory.
    fresh = Daemon(tmp_path / "c", tmp_path / "c.log", env).start()
    try:
        with MemoryClient(fresh.address, retries=0) as c:
            missing = []
            for memory_id, agent in acked.items():
                try:
                    c.get(agent, memory_id)
                except MemorydError as e:
                    missing.append((memory_id, agent, e.code))
            assert not missing, f"{len(missing)} of {len(acked)} acknowledged: {missing[:5]}"
    finally:
        assert fresh.stop() == 0, fresh.log_tail()


async def test_a_store_that_hangs_is_unavailable_too_and_recovered_from(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not refused but never answered: the bounded timeouts end the write, it answers
    StoreUnavailable, and writes resume once the store answers again."""
    s3.set_credentials(monkeypatch)
    proxy = TcpProxy(s3.port).start()
    uri = f"s3://{s3.new_bucket()}/memoryd"
    options = {**s3.storage_options(proxy.endpoint), "timeout": "2s"}
    store = LanceStore(uri, table="m", model_name="x", dim=8, storage_options=options)
    store.start()
    try:
        await store.add([row(1)])
        proxy.stop()
        proxy.start(hang=True)
        with pytest.raises(StoreUnavailable, match=re.escape(f"object store {uri} cannot be")):
            await store.add([row(2)])
        assert store.status().startswith(f"the object store {uri} cannot be reached")
        proxy.stop()
        proxy.start()
        deadline = time.monotonic() + 60
        while True:
            try:
                await store.add([row(3)])
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "writes did not resume"
                await asyncio.sleep(0.5)
        assert store.status() == "ok"
    finally:
        store.close()
        proxy.stop()
    fresh = LanceStore(uri, table="m", model_name="x", dim=8, storage_options=s3.storage_options())
    assert sorted(m.id for m, _, _ in fresh.scan()) == [record(1).id, record(3).id]
