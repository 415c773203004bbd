"""Notes the vault CLI writes: front matter and managed block are memoryd's, a person's text
is kept, and a block a person edited becomes a proposal instead of being overwritten."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memoryd_client.vault.cli import Vault
from memoryd_client.vault.settings import VaultSettings


def make_vault(tmp_path: Path) -> Vault:
    args = argparse.Namespace(vault=str(tmp_path), agent="main", review_root=None, address=None)
    return Vault(args, VaultSettings())


def test_an_edited_block_becomes_a_proposal_and_is_logged(tmp_path: Path) -> None:
    v = make_vault(tmp_path)
    assert v.write_note("dashboards/overview.md", {"type": "t", "n": 1}, "# v1\n") == "created"
    note = tmp_path / "00-system/memoryd/dashboards/overview.md"
    note.write_text(note.read_text().replace("# v1", "# v1, corrected by me") + "\nmine\n")
    edited = note.read_text()
    assert (
        v.write_note("dashboards/overview.md", {"type": "t", "n": 2}, "# v2\n")
        == "edited_by_person"
    )
    after = note.read_text()
    assert after.split("---\n", 2)[2] == edited.split("---\n", 2)[2]  # body untouched
    assert "n: 2" in after  # memoryd's front matter is memoryd's
    proposal = tmp_path / "00-system/memoryd/proposals/dashboards__overview--body.md"
    assert proposal.read_text().endswith("# v2\n")
    log = [
        json.loads(line)
        for line in (tmp_path / "00-system/memoryd/managed-blocks.log.jsonl")
        .read_text()
        .splitlines()
    ]
    assert [e["action"] for e in log] == ["created", "edited_by_person"]
    assert log[1]["proposal"] == "proposals/dashboards__overview--body.md"


def test_a_rebuild_keeps_a_persons_text_after_the_block(tmp_path: Path) -> None:
    v = make_vault(tmp_path)
    v.write_note("README.md", {"type": "r"}, "first\n", "readme")
    note = tmp_path / "00-system/memoryd/README.md"
    note.write_text(note.read_text() + "\nMy own notes.\n")
    assert v.write_note("README.md", {"type": "r"}, "second\n", "readme") == "replaced"
    text = note.read_text()
    assert "second\n" in text and "first" not in text and text.endswith("My own notes.\n")


def test_a_rebuild_keeps_front_matter_a_person_added(tmp_path: Path) -> None:
    v = make_vault(tmp_path)
    v.write_note("dashboards/overview.md", {"type": "t", "n": 1}, "# v1\n")
    note = tmp_path / "00-system/memoryd/dashboards/overview.md"
    text = note.read_text()
    note.write_text(text.replace("---\n", "---\ntags:\n  - weekly\n  - memory\nrating: 5\n", 1))
    v.write_note("dashboards/overview.md", {"type": "t", "n": 2}, "# v2\n")
    after = note.read_text()
    front = after.split("---\n", 2)[1]
    assert front == 'type: "t"\nn: 2\ntags:\n  - weekly\n  - memory\nrating: 5\n'
    assert "# v2" in after
