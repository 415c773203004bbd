"""The review root: the only place the vault CLI writes.

Every path is relative to the review root, checked before use: absolute paths, ``..``
components and NUL bytes are refused, the resolved path (symlinks followed) must stay
inside the resolved root, and no component may be ``.obsidian`` unless
``allow_dot_obsidian_write`` is set. Directories are created one at a time and a symlinked
directory is refused; files are written to a fresh temporary file in the same directory
(O_EXCL | O_NOFOLLOW) and renamed over the target, so a symlink planted at the target is
replaced, never followed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path, PurePosixPath


class VaultPathError(Exception):
    """A path that would leave the review root (or touch .obsidian without permission)."""


def _relative_parts(rel: str, what: str) -> tuple[str, ...]:
    if "\x00" in rel:
        raise VaultPathError(f"{what} {rel!r} contains a NUL byte")
    pure = PurePosixPath(rel.replace("\\", "/"))
    if pure.is_absolute() or rel.startswith("~") or (len(rel) > 1 and rel[1] == ":"):
        raise VaultPathError(f"{what} {rel!r} must be relative")
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    if ".." in parts:
        raise VaultPathError(f"{what} {rel!r} may not contain '..'")
    if not parts:
        raise VaultPathError(f"{what} {rel!r} is empty")
    return parts


class ReviewRoot:
    """``vault / review_root``, with writes confined to it."""

    def __init__(self, vault: Path, review_root: str, *, allow_dot_obsidian: bool = False):
        self.vault = vault
        self.allow_dot_obsidian = allow_dot_obsidian
        parts = _relative_parts(review_root, "review root")
        self._check_obsidian(parts, review_root)
        self.rel = "/".join(parts)
        self.root = vault.joinpath(*parts)

    def _check_obsidian(self, parts: tuple[str, ...], shown: str) -> None:
        if not self.allow_dot_obsidian and any(p.lower() == ".obsidian" for p in parts):
            raise VaultPathError(
                f"{shown!r} is inside .obsidian/, which is never written unless "
                "vault.allow_dot_obsidian_write = true"
            )

    def check_vault(self) -> Path:
        """The vault's real path; raises OSError when it is missing or not a directory."""
        real = self.vault.resolve(strict=True)
        if not real.is_dir():
            raise NotADirectoryError(f"{self.vault} is not a directory")
        return real

    def real_root(self) -> Path:
        vault = self.check_vault()
        root = self.root.resolve()
        if not root.is_relative_to(vault):
            raise VaultPathError(f"review root {self.rel!r} resolves outside the vault ({root})")
        return root

    def path(self, rel: str) -> Path:
        """The checked absolute path of ``rel`` under the review root."""
        parts = _relative_parts(rel, "path")
        self._check_obsidian(parts, rel)
        root = self.real_root()
        target = root.joinpath(*parts)
        if not target.resolve().is_relative_to(root):
            raise VaultPathError(f"path {rel!r} resolves outside the review root")
        return target

    def _mkdirs(self, directory: Path) -> None:
        root = self.real_root()
        if not root.exists():
            # The review root itself: created from the vault down, no symlinked steps.
            vault = self.check_vault()
            self._mkdir_chain(vault, root.relative_to(vault).parts)
        self._mkdir_chain(root, directory.relative_to(root).parts)

    @staticmethod
    def _mkdir_chain(base: Path, parts: tuple[str, ...]) -> None:
        current = base
        for part in parts:
            current = current / part
            if current.is_symlink():
                raise VaultPathError(f"{current} is a symlink; the vault CLI does not follow it")
            if not current.exists():
                current.mkdir()
            elif not current.is_dir():
                raise VaultPathError(f"{current} is not a directory")

    def read(self, rel: str) -> str | None:
        """The text of ``rel`` (None when absent); a symlink is refused."""
        target = self.path(rel)
        if target.is_symlink():
            raise VaultPathError(f"{rel!r} is a symlink; the vault CLI does not follow it")
        try:
            return target.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def write(self, rel: str, text: str) -> Path:
        """Atomically write ``rel`` (creating its directories) inside the review root."""
        target = self.path(rel)
        self._mkdirs(target.parent)
        # Checked again now that the directories exist: a directory swapped for a symlink
        # in between is caught here.
        target = self.path(rel)
        tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, flags, 0o644)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return target

    def append(self, rel: str, line: str) -> None:
        target = self.path(rel)
        self._mkdirs(target.parent)
        target = self.path(rel)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(target, flags, 0o644)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line if line.endswith("\n") else line + "\n")
