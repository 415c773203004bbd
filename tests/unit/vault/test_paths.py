"""Writes stay inside the review root: traversal, absolute paths, symlinks out, .obsidian."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from memoryd_client.vault import paths
from memoryd_client.vault.paths import ReviewRoot, VaultPathError


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    v = tmp_path / "vault"
    v.mkdir()
    return v


def outside_files(tmp_path: Path, vault: Path) -> set[Path]:
    return {p for p in tmp_path.rglob("*") if not p.is_relative_to(vault)}


def test_a_note_is_written_under_the_review_root(vault: Path) -> None:
    root = ReviewRoot(vault, "00-system/memoryd")
    target = root.write("dashboards/overview.md", "hello\n")
    assert target == vault / "00-system" / "memoryd" / "dashboards" / "overview.md"
    assert target.read_text() == "hello\n"
    assert root.read("dashboards/overview.md") == "hello\n"
    assert root.read("dashboards/missing.md") is None


@pytest.mark.parametrize(
    "rel",
    ["../escape.md", "a/../../escape.md", "/etc/passwd", "~/x.md", "C:/x.md", "a/\x00.md", "."],
)
def test_traversal_and_absolute_paths_are_refused(tmp_path: Path, vault: Path, rel: str) -> None:
    root = ReviewRoot(vault, "00-system/memoryd")
    before = outside_files(tmp_path, vault)
    with pytest.raises(VaultPathError):
        root.write(rel, "x")
    assert outside_files(tmp_path, vault) == before


@pytest.mark.parametrize("review_root", ["../outside", "/tmp/elsewhere", "a/../../b", ""])
def test_a_review_root_outside_the_vault_is_refused(vault: Path, review_root: str) -> None:
    with pytest.raises(VaultPathError):
        ReviewRoot(vault, review_root)


def test_a_symlinked_directory_leading_out_is_refused(tmp_path: Path, vault: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = ReviewRoot(vault, "00-system/memoryd")
    root.write("README.md", "x")
    os.symlink(outside, vault / "00-system" / "memoryd" / "records")
    with pytest.raises(VaultPathError):
        root.write("records/a.md", "leak")
    assert list(outside.iterdir()) == []


def test_a_review_root_that_is_a_symlink_out_is_refused(tmp_path: Path, vault: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault / "00-system").mkdir()
    os.symlink(outside, vault / "00-system" / "memoryd")
    root = ReviewRoot(vault, "00-system/memoryd")
    with pytest.raises(VaultPathError):
        root.write("README.md", "leak")
    assert list(outside.iterdir()) == []


def test_a_symlinked_file_is_replaced_never_followed(tmp_path: Path, vault: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me")
    root = ReviewRoot(vault, "00-system/memoryd")
    root.write("README.md", "x")
    link = vault / "00-system" / "memoryd" / "doctor.md"
    os.symlink(secret, link)
    with pytest.raises(VaultPathError):  # resolves outside: refused before any write
        root.write("doctor.md", "overwritten?")
    assert secret.read_text() == "keep me"
    with pytest.raises(VaultPathError):
        root.read("doctor.md")


def test_a_symlink_inside_the_root_is_refused_never_followed(vault: Path) -> None:
    root = ReviewRoot(vault, "00-system/memoryd")
    root.write("a.md", "original a")
    os.symlink(vault / "00-system" / "memoryd" / "a.md", vault / "00-system" / "memoryd" / "b.md")
    with pytest.raises(VaultPathError, match="symlink"):
        root.write("b.md", "new b")
    with pytest.raises(VaultPathError, match="symlink"):
        root.append("b.md", "new b")
    assert (vault / "00-system" / "memoryd" / "a.md").read_text() == "original a"


def test_dot_obsidian_is_never_written_unless_allowed(vault: Path) -> None:
    with pytest.raises(VaultPathError, match="allow_dot_obsidian_write"):
        ReviewRoot(vault, ".obsidian/plugins")
    root = ReviewRoot(vault, "00-system/memoryd")
    with pytest.raises(VaultPathError):
        root.write(".obsidian/workspace.json", "{}")
    with pytest.raises(VaultPathError):
        root.write("x/.Obsidian/y.md", "{}")
    assert not (vault / ".obsidian").exists()
    allowed = ReviewRoot(vault, ".obsidian/memoryd", allow_dot_obsidian=True)
    allowed.write("note.md", "ok")
    assert (vault / ".obsidian" / "memoryd" / "note.md").read_text() == "ok"


def test_a_missing_vault_is_an_os_error_and_nothing_is_created(tmp_path: Path) -> None:
    root = ReviewRoot(tmp_path / "gone", "00-system/memoryd")
    with pytest.raises(OSError):
        root.write("README.md", "x")
    assert not (tmp_path / "gone").exists()


def test_dot_obsidian_is_never_written_through_a_symlinked_review_root(vault: Path) -> None:
    (vault / ".obsidian").mkdir()
    os.symlink(vault / ".obsidian", vault / "00-system")  # inside the vault, yet .obsidian
    root = ReviewRoot(vault, "00-system/memoryd")
    with pytest.raises(VaultPathError, match="symlink"):
        root.write("README.md", "x")
    with pytest.raises(VaultPathError, match="symlink"):
        root.real_root()
    assert list((vault / ".obsidian").iterdir()) == []


def test_a_symlink_swapped_in_during_a_write_cannot_put_a_file_outside(
    tmp_path: Path, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = ReviewRoot(vault, "00-system/memoryd")
    root.write("records/a.md", "x")
    records = vault / "00-system" / "memoryd" / "records"
    token_hex = paths.secrets.token_hex

    def swap_then_name(n: int) -> str:  # runs after the checks, before the file is made
        if not records.is_symlink():
            records.rename(records.with_name("moved"))
            os.symlink(outside, records)
        return token_hex(n)

    monkeypatch.setattr(paths.secrets, "token_hex", swap_then_name)
    with contextlib.suppress(VaultPathError):
        root.write("records/b.md", "leak")
    assert list(outside.iterdir()) == []


def test_a_hard_linked_log_is_never_appended_to(tmp_path: Path, vault: Path) -> None:
    precious = tmp_path / "bashrc"
    precious.write_text("export PATH=/usr/bin\n")
    root = ReviewRoot(vault, "00-system/memoryd")
    root.write("README.md", "x")
    os.link(precious, vault / "00-system" / "memoryd" / "managed-blocks.log.jsonl")
    with pytest.raises(VaultPathError, match="hard link"):
        root.append("managed-blocks.log.jsonl", '{"at": "now"}')
    assert precious.read_text() == "export PATH=/usr/bin\n"


@pytest.mark.timeout(20)
def test_a_fifo_planted_in_the_review_root_is_refused_not_waited_on(vault: Path) -> None:
    # Opening a FIFO blocks until the other end opens: the CLI would hang for good.
    root = ReviewRoot(vault, "00-system/memoryd")
    root.write("README.md", "x")
    here = vault / "00-system" / "memoryd"
    os.mkfifo(here / "inbox.md")
    os.mkfifo(here / "managed-blocks.log.jsonl")
    with pytest.raises(VaultPathError, match="not a regular file"):
        root.read("inbox.md")
    with pytest.raises(VaultPathError, match="not a regular file"):
        root.append("managed-blocks.log.jsonl", '{"at": "now"}')
    assert root.read("README.md") == "x"  # a regular file still reads (blocking mode back)
    root.append("ok.log", "one")
    root.append("ok.log", "two")
    assert root.read("ok.log") == "one\ntwo\n"
