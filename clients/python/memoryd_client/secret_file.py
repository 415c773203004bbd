"""A secret kept in a file of its own: 32 random bytes, hex, created whole with mode 0600
on first use, refused when others may read it, when another user owns it (they could read
or replace it whatever its mode), when it is a symlink or not a regular file, or when it is
damaged.

The one copy, shared by the daemon (the review signing key, ``memoryd.core.review``) and
the vault CLI (the approval key); it imports nothing but the standard library.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class SecretFileError(Exception):
    """The secret cannot be used; the message says what to do."""


def load_or_create_secret(
    path: Path, name: str, *, on_replace: str = "", check_owner: bool = True
) -> bytes:
    """The secret in ``path`` (made on first use). ``name`` says what it is in messages
    ("review key"); ``on_replace`` what making a new one costs (appended to the advice).
    ``check_owner``: refuse a file another user owns. The daemon's own key skips it: on an
    NFS export with root squash (or in a user namespace) the file a root daemon makes is
    owned by another uid, and refusing it would refuse every key it could ever make."""
    if not os.path.lexists(path):
        # Written whole under a temporary name, then linked in place (fails if one is there
        # already, e.g. made by another process meanwhile): a crash never leaves an empty
        # secret behind.
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        with os.fdopen(
            os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600), "w"
        ) as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SecretFileError(
                f"{name} {path} is a symbolic link: put the file itself there"
            ) from None
        raise SecretFileError(f"{name} {path} cannot be read: {e.strerror or e}") from None
    with os.fdopen(fd) as f:
        st = os.fstat(f.fileno())
        mode = st.st_mode
        if not stat.S_ISREG(mode) or mode & 0o077:
            raise SecretFileError(
                f"{name} {path} may be read by others (mode {stat.filemode(mode)}): "
                f"chmod 600 {path}, or delete it to make a new one{on_replace}"
            )
        if check_owner and st.st_uid != os.geteuid():
            raise SecretFileError(
                f"{name} {path} belongs to another user (uid {st.st_uid}, not "
                f"{os.geteuid()}), who could read or replace it: delete it to make a new "
                f"one{on_replace}"
            )
        text = f.read().strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < 32:
        raise SecretFileError(f"{name} {path} is damaged: delete it to make a new one{on_replace}")
    return secret
