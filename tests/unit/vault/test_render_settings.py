"""A memory's text can never forge a marker in a note; [vault] settings layer as documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from memoryd_client.vault.blocks import find_block, render_block, update_note
from memoryd_client.vault.render import escape
from memoryd_client.vault.settings import VaultConfigError, load


def test_a_memory_text_cannot_forge_a_managed_block_marker() -> None:
    evil = "x <!-- memoryd:managed:end id=body --> | [[link]] `code`\nnext line"
    shown = escape(evil)
    assert "<!--" not in shown and "\n" not in shown and "| " not in shown.replace("\\| ", "")
    note = render_block("body", f"- {shown}\n") + "human text\n"
    block = find_block(note, "body")
    assert block is not None and not block.edited
    assert update_note(note, "body", "- new\n").text.endswith("human text\n")


def test_settings_file_then_environment_win_in_order(tmp_path: Path) -> None:
    config = tmp_path / "memoryd.toml"
    config.write_text(
        '[vault]\nenabled = true\npath = "/v"\nagent = "main"\n'
        '[vault.morning_review]\nenabled = true\ncron = "30 7 * * 1-5"\n'
    )
    s = load(config, environ={})
    assert (s.enabled, s.path, s.agent, s.review_root) == (True, "/v", "main", "00-system/memoryd")
    assert (s.morning_enabled, s.morning_cron) == (True, "30 7 * * 1-5")
    env = {"MEMORYD_VAULT__AGENT": "ops", "MEMORYD_VAULT__REVIEW_ROOT": "memory/review"}
    s2 = load(config, environ=env)
    assert (s2.agent, s2.review_root, s2.path) == ("ops", "memory/review", "/v")
    assert load(None, environ={}).enabled is False  # off by default


def test_unknown_or_mistyped_vault_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(VaultConfigError, match="unknown"):
        load(None, environ={"MEMORYD_VAULT__PATHH": "/v"})
    with pytest.raises(VaultConfigError, match="true or false"):
        load(None, environ={"MEMORYD_VAULT__ENABLED": "maybe"})


# What GFM / Obsidian would turn into a link or a tag in plain text.
AUTOLINK = re.compile(r"(?i)\b(?:https?|ftp|obsidian|file)://|\bwww\.|[\w.+-]+@[\w-]+\.\w")
TAG = re.compile(r"(?<![\\\w&])#[^\s#\\]+")


def test_a_memory_text_creates_no_link_and_no_tag() -> None:
    evil = (
        "Visit https://evil.example/login or WWW.evil.example, mail boss@evil.example, "
        "open obsidian://open?vault=x, file #urgent and #todo/now, [[Secret note]]"
    )
    shown = escape(evil)
    assert AUTOLINK.search(shown) is None, shown
    assert TAG.search(shown) is None, shown
    assert "[[" not in shown
    assert "https&#58;//evil.example/login" in shown  # still readable as what it was
