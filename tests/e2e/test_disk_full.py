"""A full disk, for real: the data dir on a small tmpfs that the test fills up.

Writes are answered RESOURCE_EXHAUSTED "no space left on device", the ``memoryd.storage``
health entry and Stats report it while reads go on, the daemon recovers by itself once
space is freed, and every acknowledged memory is still there after a restart. Needs root
(to mount a tmpfs); skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memoryd_client import MemoryClient, MemorydError

pytestmark = pytest.mark.e2e

DISK_BYTES = 16 << 20
LEFT_FREE = 400 << 10  # what the filler leaves: a few dozen Stores' worth
WORDS = [
    "river",
    "mountain",
    "copper",
    "violin",
    "garden",
    "lantern",
    "harbor",
    "pepper",
    "meadow",
    "falcon",
    "orbit",
    "canyon",
    "saffron",
    "glacier",
    "marble",
    "thunder",
    "velvet",
    "compass",
    "orchard",
    "beacon",
    "quartz",
    "tundra",
    "ember",
    "willow",
    "cobalt",
    "prairie",
    "sextant",
    "juniper",
    "basalt",
    "monsoon",
]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """A filler file taking all but ``leave`` bytes of ``disk``."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with filler.open("wb") as f:
        f.write(bytes(max(0, free - leave)))
    return filler


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(1200))


def _storage_health(address: str) -> int:
    with grpc.insecure_channel(address) as ch:
        request = health_pb2.HealthCheckRequest(service="memoryd.storage")
        return health_pb2_grpc.HealthStub(ch).Check(request, timeout=10).status


def _eventually(check, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_a_full_disk_is_resource_exhausted_reported_and_recovered(
    small_disk, make_daemon, new_agent
):
    env = {"MEMORYD_STORE__DUPLICATE_THRESHOLD": "1.0"}  # random texts: never near-duplicates
    daemon = make_daemon(env)
    daemon.data_dir = small_disk / "data"
    daemon.start()
    agent = new_agent()
    rng = random.Random(7)
    acknowledged: list[str] = []
    with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
        acknowledged.append(client.store(agent, _text(rng)).memory.id)
        filler = _fill(small_disk, LEFT_FREE)
        error: MemorydError | None = None
        for _ in range(500):
            try:
                acknowledged.append(client.store(agent, _text(rng)).memory.id)
            except MemorydError as e:
                error = e
                break
        assert error is not None, "the disk never filled up"
        assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED, error
        assert "no space left on device" in error.message
        for leak in ("Traceback", "LanceError", "os error", str(small_disk)):
            assert leak not in error.message, error.message

        serving, not_serving = health_pb2.HealthCheckResponse.SERVING, 2
        assert _eventually(lambda: _storage_health(daemon.address) == not_serving, 10)
        stats = client.stats(agent)
        assert stats.storage_status.startswith("no space left on device"), stats
        # Reads go on, and see exactly what was acknowledged.
        assert stats.total == len(acknowledged)
        assert client.recall(agent, "copper violin").results

        filler.unlink()  # space is back: no restart, no write needed to notice
        assert _eventually(lambda: _storage_health(daemon.address) == serving, 30), (
            daemon.log_tail()
        )
        assert client.stats(agent).storage_status == "ok"
        acknowledged.append(client.store(agent, _text(rng)).memory.id)
    log = daemon.log_path.read_text(errors="replace")
    assert "no space left on device" in log and "writes succeed again" in log
    assert daemon.stop() == 0

    daemon.start()
    with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
        listed = {m.id for m in client.list_all(agent, page_size=500)}
    assert listed == set(acknowledged)
    assert daemon.stop() == 0
