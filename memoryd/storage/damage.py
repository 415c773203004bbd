"""Damaged store files found at start: which file, why, and what the operator can do.

LanceDB reports a damaged table with a Rust error naming no file ("Invalid range 0..0 for
object of size 0 bytes", "failed to fill whole buffer"). Every Lance file, data fragment
and manifest alike, ends with the magic bytes ``LANC``; a file that is empty or lacks them
was cut short (a crash or a full disk while it was written, a copy interrupted), so the
culprit can be named without reading the table.

A table's versions are its manifests, ``_versions/<n>.manifest``: with LanceDB's default
naming ``n`` is ``2**64 - 1 - version`` (the newest sorts first), with the older naming it
is the version itself. Opening reads the newest; so an unreadable newest manifest makes
the table unopenable until it is moved aside, after which the version before it opens.
"""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

MAGIC = b"LANC"
_U64_MAX = 2**64 - 1
_RUST_SOURCE = re.compile(r",\s*/\S+\.rs:\d+:\d+")

HOW_TO_GO_ON = (
    "To go on, either start once with --open-last-good (setting storage.open_last_good): "
    "memoryd then opens the newest version of the table whose files all read, moving an "
    "unreadable newest manifest aside, and the writes after that version are lost; or "
    "restore a backup into a new data dir (memoryd restore --data-dir NEW BACKUP) and "
    "serve from that."
)


def short_error(error: BaseException) -> str:
    """LanceDB's message without its Rust source location."""
    text = _RUST_SOURCE.sub("", str(error))
    return text.removeprefix("lance error: ").strip()


def manifest_version(path: Path) -> int:
    n = int(path.stem)
    return _U64_MAX - n if n > _U64_MAX // 2 else n


def manifests_newest_first(table_dir: Path) -> list[Path]:
    found = []
    for path in (table_dir / "_versions").glob("*.manifest"):
        if path.stem.isdigit():
            found.append(path)
    return sorted(found, key=manifest_version, reverse=True)


def _cut_short(path: Path) -> str | None:
    try:
        size = path.stat().st_size
        if size == 0:
            return "is empty (0 bytes)"
        with path.open("rb") as f:
            f.seek(max(0, size - len(MAGIC)))
            tail = f.read()
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if tail != MAGIC:
        return f"is cut short ({size} bytes, no Lance footer)"
    return None


def damaged_files(table_dir: Path) -> list[tuple[Path, str]]:
    """The newest manifest and every data fragment of the table that is cut short."""
    candidates = manifests_newest_first(table_dir)[:1]
    candidates += sorted((table_dir / "data").glob("*.lance"))
    out = []
    for path in candidates:
        why = _cut_short(path)
        if why is not None:
            out.append((path, why))
    return out


def describe(table_dir: Path, error: BaseException, failed: str) -> str:
    """What to tell the operator when ``failed`` ("opened", "read") went wrong."""
    damaged = damaged_files(table_dir)
    if damaged:
        found = "; ".join(f"{path} {why}" for path, why in damaged)
    else:
        found = f"LanceDB says: {short_error(error)}"
    return f"the table {table_dir} cannot be {failed}: {found}. {HOW_TO_GO_ON}"


def quarantine_dir(table_dir: Path) -> Path:
    """Where files moved aside go: beside the store, one folder per start."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return table_dir.parent.parent / f"damaged-{stamp}" / table_dir.name


def move_aside(path: Path, table_dir: Path, into: Path) -> Path:
    target = into / path.relative_to(table_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(target))
    return target
