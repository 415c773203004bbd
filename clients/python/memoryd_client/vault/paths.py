"""The review root: the only place the vault CLI writes.

Every path is relative to the review root, checked before use: absolute paths, ``..``
components and NUL bytes are refused, and no component (of the review root or of the path
under it) may be ``.obsidian`` unless ``allow_dot_obsidian_write`` is set.

The vault directory itself may be a symlink (that is the person's choice); below it nothing
is followed. Every access walks from the vault's real path one component at a time with
directory file descriptors opened ``O_NOFOLLOW | O_DIRECTORY``, creating missing
directories with ``mkdirat``, so a symlink anywhere between the vault and the file (the
review root, a folder under it, the file itself) is refused, and one swapped in while a
write runs cannot redirect it: the file is written to a fresh temporary name in the
directory already opened (``O_CREAT | O_EXCL | O_NOFOLLOW``) and renamed within that
directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


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
    """``vault / review_root``, with every access confined to it."""

    def __init__(self, vault: Path, review_root: str, *, allow_dot_obsidian: bool = False):
        self.vault = vault
        self.allow_dot_obsidian = allow_dot_obsidian
        parts = _relative_parts(review_root, "review root")
        self._check_obsidian(parts, review_root)
        self.parts = parts
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
        """The review root's real path (it may not exist yet); refused when any folder
        between the vault and it is a symlink or not a folder."""
        with self._dir((), create=False, missing_ok=True):
            pass
        return self.check_vault().joinpath(*self.parts)

    def _checked(self, rel: str) -> tuple[str, ...]:
        parts = _relative_parts(rel, "path")
        self._check_obsidian(parts, rel)
        return parts

    def path(self, rel: str) -> Path:
        """Where ``rel`` is (for messages): the vault's real path, the root, ``rel``."""
        return self.check_vault().joinpath(*self.parts, *self._checked(rel))

    @contextlib.contextmanager
    def _dir(
        self, parts: tuple[str, ...], *, create: bool, missing_ok: bool = False
    ) -> Iterator[int | None]:
        """A file descriptor of the directory ``root/parts``, reached without following a
        symlink (None when it is missing and ``missing_ok``)."""
        fd = os.open(self.check_vault(), _DIR_FLAGS & ~_NOFOLLOW)
        try:
            shown = self.vault
            for part in (*self.parts, *parts):
                shown = shown / part
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        if missing_ok:
                            yield None
                            return
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = self._open_dir(part, fd, shown)
                except OSError as e:
                    raise self._not_a_dir(e, shown) from None
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def _open_dir(self, part: str, fd: int, shown: Path) -> int:
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as e:
            raise self._not_a_dir(e, shown) from None

    @staticmethod
    def _not_a_dir(e: OSError, shown: Path) -> Exception:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            return VaultPathError(
                f"{shown} is a symlink or not a folder; the vault CLI follows no symlink "
                "below the vault"
            )
        return e

    @staticmethod
    def _refuse_link(name: str, fd: int, rel: str) -> None:
        """A symlink at the target is refused (the rename would replace it, never follow
        it, but a link there is not memoryd's and says someone is playing tricks)."""
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise VaultPathError(f"{rel!r} is a symlink; the vault CLI does not follow it")

    def read(self, rel: str) -> str | None:
        """The text of ``rel`` (None when absent); a symlink is refused."""
        parts = self._checked(rel)
        with self._dir(parts[:-1], create=False, missing_ok=True) as d:
            if d is None:
                return None
            try:
                fd = _open_here(parts[-1], os.O_RDONLY, d, rel)
            except FileNotFoundError:
                return None
            with os.fdopen(fd, encoding="utf-8") as f:
                return f.read()

    def write(self, rel: str, text: str) -> Path:
        """Atomically write ``rel`` (creating its directories) inside the review root."""
        parts = self._checked(rel)
        name = parts[-1]
        with self._dir(parts[:-1], create=True) as d:
            assert d is not None
            self._refuse_link(name, d, rel)
            tmp = f".{name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=d)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(tmp, name, src_dir_fd=d, dst_dir_fd=d)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=d)
                raise
        return self.path(rel)

    def append(self, rel: str, line: str) -> None:
        parts = self._checked(rel)
        with self._dir(parts[:-1], create=True) as d:
            assert d is not None
            fd = _open_here(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, d, rel)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                if os.fstat(f.fileno()).st_nlink > 1:  # a regular file: _open_here checked
                    # A hard link would make the append land in a file elsewhere.
                    raise VaultPathError(
                        f"{rel!r} is not a plain file of its own (a hard link?); not appended to"
                    )
                f.write(line if line.endswith("\n") else line + "\n")

    def remove(self, rel: str) -> None:
        parts = self._checked(rel)
        with self._dir(parts[:-1], create=False, missing_ok=True) as d:
            if d is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(parts[-1], dir_fd=d)


def _open_here(name: str, flags: int, dir_fd: int, rel: str) -> int:
    """``name`` in the directory ``dir_fd``, never through a symlink (0644 if created),
    and only if it is a regular file: a FIFO or device planted in the review root would
    otherwise block the CLI in ``open`` or ``read`` forever (opened non-blocking, checked,
    then switched back to blocking)."""
    try:
        fd = os.open(name, flags | _NOFOLLOW | _NONBLOCK, 0o644, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise VaultPathError(
                f"{rel!r} is a symlink; the vault CLI does not follow it"
            ) from None
        if e.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing
            raise VaultPathError(f"{rel!r} is not a regular file; not opened") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise VaultPathError(f"{rel!r} is not a regular file; not opened")
    if _NONBLOCK:
        os.set_blocking(fd, True)
    return fd
