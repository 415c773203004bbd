"""A damaged or read-only store at start, damaged for real on disk: ``memoryd serve`` names
the file or directory and what to do, exits 2 without a traceback, and with
``--open-last-good`` (storage.open_last_good) opens the newest version that reads whole."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from memoryd_client import MemoryClient
from memoryd_testing.memories import FACTS

pytestmark = pytest.mark.e2e

TEXTS = FACTS[:3]


@pytest.fixture
def three_commits(make_daemon, new_agent) -> tuple[object, str, list[str]]:
    """A stopped daemon whose store holds three memories, committed one version each."""
    daemon = make_daemon()
    daemon.start()
    agent = new_agent()
    with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
        ids = [client.store(agent, text).memory.id for text in TEXTS]
    assert daemon.stop() == 0
    return daemon, agent, ids


def _table(daemon) -> Path:
    return daemon.data_dir / "lancedb" / "memories.lance"


def _serve(memoryd_cli: Callable[..., subprocess.CompletedProcess[str]], daemon, *flags: str):
    return memoryd_cli(
        "serve", "--listen", "127.0.0.1:0", "--data-dir", str(daemon.data_dir), *flags
    )


def _refused(done: subprocess.CompletedProcess[str], *mentions: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("memoryd: "), last
    for fragment in mentions:
        assert fragment in last, (fragment, last)


def _listed(daemon, agent: str) -> set[str]:
    with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
        return {m.id for m in client.list_all(agent)}


def test_an_empty_newest_manifest_is_named_and_the_version_before_opens(three_commits, memoryd_cli):
    daemon, agent, ids = three_commits
    manifests = sorted((_table(daemon) / "_versions").glob("*.manifest"), key=lambda p: int(p.stem))
    assert all(int(p.stem) > 2**63 for p in manifests)  # LanceDB's naming: 2**64-1-version
    newest = manifests[0]
    newest.write_bytes(b"")

    _refused(_serve(memoryd_cli, daemon), str(newest), "empty", "--open-last-good", "restore")

    daemon.env = {"MEMORYD_STORAGE__OPEN_LAST_GOOD": "true"}
    daemon.start()
    assert _listed(daemon, agent) == set(ids[:2])  # the third commit's version is lost
    assert not newest.exists()
    assert list(daemon.data_dir.glob(f"damaged-*/memories.lance/_versions/{newest.name}"))
    assert daemon.stop() == 0
    daemon.env = {}
    daemon.start()  # whole again: opens without the flag
    assert _listed(daemon, agent) == set(ids[:2])
    assert daemon.stop() == 0


def test_a_fragment_cut_short_is_named_and_the_last_good_version_opens(three_commits, memoryd_cli):
    daemon, agent, ids = three_commits
    fragments = sorted(
        (_table(daemon) / "data").glob("*.lance"), key=lambda p: p.stat().st_mtime_ns
    )
    newest = fragments[-1]  # the third Store's
    os.truncate(newest, newest.stat().st_size // 2)

    _refused(_serve(memoryd_cli, daemon), str(newest), "cut short", "--open-last-good", "restore")

    daemon.env = {"MEMORYD_STORAGE__OPEN_LAST_GOOD": "true"}
    daemon.start()
    assert _listed(daemon, agent) == set(ids[:2])  # rolled back past the third Store
    with MemoryClient(daemon.address, timeout=60.0, retries=0) as client:
        ids.append(client.store(agent, TEXTS[2]).memory.id)  # and writable again
    assert "rolled back to version" in daemon.log_tail(200)
    assert daemon.stop() == 0
    daemon.env = {}
    daemon.start()
    assert _listed(daemon, agent) == {ids[0], ids[1], ids[3]}
    assert daemon.stop() == 0


def test_a_read_only_data_dir_is_named_with_what_to_do(three_commits, memoryd_cli):
    daemon, _agent, _ids = three_commits
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root (chmod does not stop root)")
    target = str(daemon.data_dir)
    bound = subprocess.run(["mount", "--bind", target, target], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bound.stderr.strip()}")
    try:
        ro = subprocess.run(
            ["mount", "-o", "remount,ro,bind", target], capture_output=True, text=True
        )
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {ro.stderr.strip()}")
        _refused(_serve(memoryd_cli, daemon), target, "not writable", "permissions")
    finally:
        subprocess.run(["umount", target], check=False)
