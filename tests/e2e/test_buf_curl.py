"""The README's ``buf curl`` command lines, run as printed against real daemons.

The block after the ``<!-- buf-curl: ... -->`` marker in README.md is read, each command
(backslash continuations joined) is run by bash with only the daemon's address put in place
of ``127.0.0.1:50051``, and its output is checked. ``buf`` is the one the TypeScript client
installs (npm ``@bufbuild/buf``, pinned in clients/typescript/package-lock.json).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memoryd_client import MemoryClient
from memoryd_testing.node import node_env, run_setup

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
README_ADDRESS = "127.0.0.1:50051"
TOKEN = "buf-curl-test-token-91c2"


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- buf-curl:", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands: list[str] = []
    pending = ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        commands.append(pending + line)
        pending = ""
    assert not pending, "a command of the README block ends in a backslash"
    return commands


@pytest.fixture(scope="module")
def buf_env() -> dict[str, str]:
    env = node_env()
    run_setup("ts_setup.sh", env)
    buf_bin = ROOT / "clients" / "typescript" / "node_modules" / ".bin"
    assert (buf_bin / "buf").exists()
    env["PATH"] = f"{buf_bin}{os.pathsep}{env['PATH']}"
    return env


def run(command: str, address: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command.replace(README_ADDRESS, address)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_readme_commands_work_as_printed(
    make_daemon: Callable[..., Any], buf_env: dict[str, str]
) -> None:
    commands = readme_commands()
    plain = [c for c in commands if "Authorization" not in c]
    with_auth = [c for c in commands if "Authorization" in c]
    assert [c.split("/memoryd.v1.MemoryService/")[-1] for c in plain[1:]] == [
        "Store",
        "Recall",
        "Stats",
    ]
    assert len(with_auth) == 1

    address = make_daemon().start().address
    listed, stored, recalled, stats = (run(c, address, buf_env) for c in plain)
    for done in (listed, stored, recalled, stats):
        assert done.returncode == 0, done.stderr
    methods = listed.stdout.split()
    for rpc in ("Store", "Recall", "Forget", "Update", "Get", "List", "Stats", "Stream"):
        assert f"memoryd.v1.MemoryService/{rpc}" in methods
    assert "memoryd.v1.HookService/BuildContext" in methods
    memory = json.loads(stored.stdout)
    assert memory["outcome"] == "STORE_OUTCOME_CREATED"
    assert memory["memory"]["agentId"] == "main"
    [hit] = json.loads(recalled.stdout)["results"]
    assert hit["memory"]["id"] == memory["memory"]["id"]
    assert hit["memory"]["text"] == "The user prefers dark mode in every editor"
    assert json.loads(stats.stdout)["total"] == "1"

    secured = make_daemon({"MEMORYD_AUTH_TOKEN": TOKEN}).start().address
    with MemoryClient(secured, token=TOKEN) as client:
        client.store("main", "Standup is at 9:30 every weekday")
    [command] = with_auth
    allowed = run(command, secured, {**buf_env, "MEMORYD_AUTH_TOKEN": TOKEN})
    assert allowed.returncode == 0, allowed.stderr
    listed_memories = json.loads(allowed.stdout)
    assert [m["text"] for m in listed_memories["memories"]] == ["Standup is at 9:30 every weekday"]
    refused = run(command, secured, {**buf_env, "MEMORYD_AUTH_TOKEN": "wrong"})
    # A wrong token is refused on the reflection requests already.
    assert refused.returncode != 0
    assert "Standup" not in refused.stdout
