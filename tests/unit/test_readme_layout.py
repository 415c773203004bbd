"""README's Layout section names every top-level folder of the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def top_level_folders() -> set[str]:
    try:
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked folders are unknown")
    return {path.split("/", 1)[0] for path in tracked if "/" in path}


def test_the_layout_lists_every_top_level_folder() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    block = layout.split("```\n", 1)[1].split("```", 1)[0]
    listed = set(re.findall(r"^([.\w-]+)/", block, flags=re.M))
    folders = top_level_folders()
    assert folders, "git lists no folder"
    assert folders <= listed, f"README's Layout does not list {sorted(folders - listed)}"
