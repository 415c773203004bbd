"""Backups: the daemon writes a backup at start and on its schedule, keeps the newest N,
and `memoryd restore` brings one back into an empty data dir that a daemon then serves."""

from __future__ import annotations

import time

import pytest
from memoryd_client import MemoryClient

pytestmark = pytest.mark.e2e


def test_backup_written_pruned_and_restored(make_daemon, memoryd_cli, new_agent, tmp_path) -> None:  # type: ignore[no-untyped-def]
    backups = tmp_path / "backups"
    env = {
        "MEMORYD_BACKUP__ENABLED": "true",
        "MEMORYD_BACKUP__DIR": str(backups),
        "MEMORYD_BACKUP__KEEP": "2",
    }
    daemon = make_daemon(env).start()
    agent = new_agent()
    with MemoryClient(daemon.address) as c:
        ids = [
            c.store(agent, t).memory.id
            for t in ("the cat is called Miso", "rent is due on the 3rd")
        ]
    # A restart writes a fresh backup (the first one is written at start), now with both.
    for _ in range(3):
        assert daemon.stop() == 0
        time.sleep(1.1)  # backup names carry the second
        daemon.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(backups.glob("*.jsonl.gz"))) < 2:
        time.sleep(0.2)
    files = sorted(backups.glob("memoryd-backup-*.jsonl.gz"))
    assert len(files) == 2  # keep = 2: older ones pruned
    assert daemon.stop() == 0

    target = tmp_path / "restored"
    done = memoryd_cli("restore", str(files[-1]), "--data-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert "restored 2 memories" in done.stdout
    again = memoryd_cli("restore", str(files[-1]), "--data-dir", str(target))
    assert again.returncode != 0 and "already holds a store" in again.stderr

    restored = make_daemon({})
    restored.data_dir = target
    restored.start()
    with MemoryClient(restored.address) as c:
        assert {c.get(agent, i).id for i in ids} == set(ids)
        assert (
            c.recall(agent, "what is the cat called?").results[0].memory.text
            == "the cat is called Miso"
        )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        pytest.param('[storage]\ntable = "x"\n', "line 1: not a memoryd backup", id="not-json"),
        pytest.param('{"text": "only text"}\n', "ctl import AGENT FILE", id="text-only"),
        pytest.param(
            '{"id": "x", "agent_id": "a", "scope": "agent:a", "text": "t"}\n',
            "line 1: id 'x' is not a UUID",
            id="bad-id",
        ),
    ],
)
def test_restore_of_a_file_that_is_not_a_backup_says_so_and_writes_nothing(
    memoryd_cli, tmp_path, content, said
) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "not-a-backup.jsonl"
    bad.write_text(content, encoding="utf-8")
    target = tmp_path / "restored"
    result = memoryd_cli("restore", str(bad), "--data-dir", str(target))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()]  # one line, no traceback
    assert result.stderr.startswith(f"memoryd: {bad}") and said in result.stderr
    assert not target.exists()
