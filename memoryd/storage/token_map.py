"""The token file's map: what lets a start reuse ``tokens.bin`` instead of rewriting it.

The token file (``token_file``) is derived from the store's token-vector column. Writing it
afresh at every start means reading that column whole (~12 KiB per memory: 12 GB at a
million memories) and writing as much again. So the repository writes, beside it,
``tokens.bin.map``: what the file was made from and where each row's record is:

- the table (``LanceStore.identity``): its location, embedding model and dimension, schema
  (with the random id the table was created with: a table re-created, replaced or restored
  under the same name has another), and the version and row count it had then;
- the file: its size, modification time, inode and device (after an fsync);
- per row: the memory id, the state of the row its record was written for (updated_at in
  microseconds and 64 bits of its content hash), and the record's offset and token count
  (-1: the row has none);

written atomically (a temporary file, fsync, rename, fsync of the directory) and ending in
the SHA-256 of everything before it: at a clean shutdown, and while serving once rows have
changed (``Repository.checkpoint_tokens``), so that a crash or a kill -9 finds one too.

The token file is only ever appended to; whatever truncates or replaces it (a start that
rewrites it, a compaction, a repair) first deletes the map (``TokenFile``). So a map always
describes the file's first ``size`` bytes as they still are. A start takes it when it
reads whole, names this table (location, model, dimension, schema: ``TABLE_KEYS``), and the
file is the same one (inode, device), at least that long (longer: records appended after
the map, cut off) and, when exactly that long, unmodified since. Then every row the table
has in the state the map saved takes its record from the map (a sample of the records'
headers is checked first, and, when the table's version moved on since the map, a sample of
the token vectors against the table's: a writer that changed token vectors without a new
updated_at is caught there); the rows the map does not have so (written, changed or
restored since) are read from the table and appended; rows the table no longer has leave
dead records. Anything else (another table or file, a map that does not read, more than a
quarter of the rows to read) rewrites the file from the table. The per-record header check
of ``token_file`` stays as the last guard.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 2  # 1: the content hash kept as its CRC-32 (still read: see TokenMap.wide)
_MAGIC = b"MTKMAP01"
_U32 = struct.Struct("<I")
_DIGEST_BYTES = hashlib.sha256().digest_size
# offsets, counts, updated_at, content-hash CRCs, id lengths (then the ids' UTF-8 bytes)
_COLUMNS = ("<i8", "<i4", "<i8", "<u8", "<u4")
_COLUMNS_1 = ("<i8", "<i4", "<i8", "<u4", "<u4")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class Unusable(Exception):
    """The map cannot vouch for the token file; the message says why."""


def map_path(token_path: Path) -> Path:
    return token_path.with_name(token_path.name + ".map")


def row_state(updated_at: datetime, content_hash: str, *, wide: bool = True) -> tuple[int, int]:
    """A row's state as the map keeps it: updated_at in microseconds since the epoch and
    64 bits of the content hash (``hash_bits``): what tells a row the map's record was
    written for from one changed, restored or re-created since (a new text is a new
    content hash; memoryd's every write stamps updated_at). ``wide`` False: the CRC-32 of
    the content hash, as a map of format 1 kept it."""
    return micros(updated_at), hash_bits(content_hash) if wide else zlib.crc32(
        content_hash.encode()
    )


def micros(at: datetime) -> int:
    return (at - _EPOCH) // _MICROSECOND


def hash_bits(content_hash: str) -> int:
    """64 bits of a content hash: its first 16 hex digits (a SHA-256, ``core.text``), or
    of its BLAKE2b for any other string."""
    head = content_hash[:16]
    if len(head) == 16 and head.isascii() and head.isalnum():
        try:
            return int(head, 16)
        except ValueError:
            pass
    return int.from_bytes(hashlib.blake2b(content_hash.encode(), digest_size=8).digest())


# What a map names of the table that must be unchanged for a start to take any of it: the
# version and row count may have moved on since (a map saved while serving, then a crash),
# as the rows are compared one by one.
TABLE_KEYS = ("uri", "table", "model", "dim", "schema")


def table_mismatch(saved: dict[str, Any], now: dict[str, Any]) -> str:
    """Why the table ``now`` is not the one the map was saved for ("": it is)."""
    keys = TABLE_KEYS
    return mismatch({k: saved.get(k) for k in keys}, {k: now.get(k) for k in keys}, "the table")


def file_mismatch(saved: dict[str, Any], now: os.stat_result) -> str:
    """Why the token file as it is ``now`` is not the one the map describes ("": it is):
    the same file (inode and device), at least as long and, when exactly as long, not
    modified since. Longer: records appended after the map was saved, which the start cuts
    off (``TokenFile``, which then sets the modification time back to the map's); the
    bytes the map describes are checked by a sample of the records' headers then
    (``Repository``), and every read checks its record's."""
    size = saved.get("size")
    if saved.get("ino") != now.st_ino or saved.get("dev") != now.st_dev:
        return "the token file is another file than the map's"
    if not isinstance(size, int) or now.st_size < size:
        return f"the token file is {now.st_size} bytes, shorter than the map's {size}"
    if now.st_size == size and saved.get("mtime_ns") != now.st_mtime_ns:
        return (
            f"the token file's mtime_ns is {now.st_mtime_ns!r}, the map's {saved.get('mtime_ns')!r}"
        )
    return ""


def file_identity(stat: os.stat_result) -> dict[str, int]:
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ino": stat.st_ino,
        "dev": stat.st_dev,
    }


@dataclass(slots=True)
class TokenMap:
    ids: list[str]
    offsets: np.ndarray  # int64: where each row's record starts
    counts: np.ndarray  # int32: its token count (-1: none)
    updated: np.ndarray  # int64: the row's updated_at, microseconds since the epoch
    hashes: np.ndarray  # uint64: 64 bits of the row's content hash (uint32 CRC-32: format 1)
    # "table": the store's identity, "file": the token file's (file_identity)
    header: dict[str, Any] = field(default_factory=dict)
    digest: str = ""  # the SHA-256 of the map as written or read (hex)
    wide: bool = True  # hashes as row_state keeps them (False: a map of format 1)

    def __post_init__(self) -> None:
        n = len(self.ids)
        if any(len(c) != n for c in (self.offsets, self.counts, self.updated, self.hashes)):
            raise ValueError("the map's columns differ in length")


def write(path: Path, rows: TokenMap, encoded: tuple[list[bytes], np.ndarray] | None = None) -> str:
    """Write ``rows`` to ``path`` atomically and durably; returns its SHA-256 (hex).
    ``encoded``: its ids as ``encode_strings`` gives them, if already encoded."""
    ids, lengths = encoded if encoded is not None else encode_strings(rows.ids)
    header = {**rows.header, "format": FORMAT, "rows": len(rows.ids)}
    columns = (rows.offsets, rows.counts, rows.updated, rows.hashes, lengths)
    return write_framed(path, _MAGIC, header, [*column_bytes(columns, _COLUMNS), *ids])


# Strings encoded at a time (``encode_strings``): each piece is a few milliseconds' work
# holding the GIL; a million ids in one piece held it ~140 ms while the loop waited.
ENCODE_PIECE = 32_768


def encode_strings(strings: list[str]) -> tuple[list[bytes], np.ndarray]:
    """``strings`` in UTF-8, one after the other (in pieces, to be written one after the
    other), and each one's length in bytes (``encode_pieces`` collected)."""
    pieces, lengths = [], []
    for piece, n in encode_pieces(strings):
        pieces.append(piece)
        lengths.append(n)
    return pieces, np.concatenate(lengths) if lengths else np.zeros(0, np.int64)


def encode_pieces(strings: list[str]) -> Iterator[tuple[bytes, np.ndarray]]:
    """``ENCODE_PIECE`` strings at a time: their UTF-8 one after the other and each one's
    length in bytes; without a bytes object per string when all are ASCII (ids are: a
    million of them were ~70 MB)."""
    for at in range(0, len(strings), ENCODE_PIECE):
        some = strings[at : at + ENCODE_PIECE]
        joined = "".join(some)
        if joined.isascii():
            yield joined.encode(), np.fromiter(map(len, some), np.int64, len(some))
        else:
            encoded = [s.encode() for s in some]
            yield b"".join(encoded), np.fromiter(map(len, encoded), np.int64, len(encoded))


def column_bytes(columns: Sequence[Any], dtypes: Sequence[str]) -> list[memoryview]:
    """Each column as the bytes of its array in its little-endian type, copied only if it is
    not in that type already."""
    return [
        np.ascontiguousarray(np.asarray(c, dtype=t)).data.cast("B")
        for c, t in zip(columns, dtypes, strict=True)
    ]


def read(path: Path) -> TokenMap:
    """The map at ``path``; ``Unusable`` if there is none or it does not read whole."""
    header, body, at, digest = read_framed(
        path,
        _MAGIC,
        (1, FORMAT),
        "the map",
        "no map: the last run did not shut down cleanly, or this is the first start",
    )
    try:
        n = int(header["rows"])
        columns = []
        wide = header.get("format") == FORMAT
        for dtype in _COLUMNS if wide else _COLUMNS_1:
            columns.append(np.frombuffer(body, dtype, n, at))
            at += np.dtype(dtype).itemsize * n
        ids = strings(body, at, columns.pop(), "the map's ids")
        offsets, counts, updated, hashes = columns
        return TokenMap(
            ids, offsets, counts, updated, hashes, header=header, digest=digest, wide=wide
        )
    except (ValueError, KeyError, TypeError, struct.error) as e:
        raise Unusable(f"the map does not parse ({e})") from None


def write_framed(
    path: Path, magic: bytes, header: dict[str, Any], sections: Sequence[bytes | memoryview]
) -> str:
    """Write ``magic``, the JSON ``header`` (its length first) and ``sections`` to ``path``,
    ending in the SHA-256 of everything before it, atomically (a temporary file, fsync,
    rename, fsync of the directory); returns the SHA-256 (hex). The token map's format,
    and the saved postings' (``term_map``)."""
    head = json.dumps(header, sort_keys=True).encode()
    parts = [magic, _U32.pack(len(head)), head, *sections]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            for part in parts:
                f.write(part)
            f.write(digest.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    sync_dir(path.parent)
    return digest.hexdigest()


def read_framed(
    path: Path, magic: bytes, version: int | tuple[int, ...], what: str, missing: str
) -> tuple[dict[str, Any], bytes, int, str]:
    """A file ``write_framed`` wrote: its header, its bytes without the checksum, where its
    sections start in them, and its SHA-256 (hex). ``Unusable`` (``missing`` if there is no
    file) unless it reads whole, as format ``version`` (or one of them)."""
    try:
        data = read_regular(path, what)
    except FileNotFoundError:
        raise Unusable(missing) from None
    except OSError as e:
        raise Unusable(f"{what} cannot be read ({e.strerror})") from None
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if len(data) < len(magic) + _U32.size + _DIGEST_BYTES or not body.startswith(magic):
        raise Unusable(f"{what}: not such a file (cut short, or another file)")
    if hashlib.sha256(body).digest() != digest:
        raise Unusable(f"the checksum of {what} does not match (cut short or edited)")
    try:
        at = len(magic)
        (size,) = _U32.unpack_from(body, at)
        at += _U32.size
        header = json.loads(body[at : at + size])
    except (ValueError, struct.error) as e:
        raise Unusable(f"{what} does not parse ({e})") from None
    versions = version if isinstance(version, tuple) else (version,)
    if (
        not isinstance(header, dict)
        or type(header.get("format")) is not int  # (True == 1)
        or header["format"] not in versions
    ):
        found = header.get("format") if isinstance(header, dict) else header
        raise Unusable(f"the format of {what} is {found!r}, not {versions[-1]}")
    return header, body, at + size, digest.hex()


def strings(body: bytes, at: int, lengths: np.ndarray, what: str) -> list[str]:
    """The UTF-8 strings of ``lengths`` bytes each from ``at`` to the end of ``body`` (the
    last section of a framed file); ``Unusable`` unless they fill it exactly."""
    ends = (np.cumsum(lengths, dtype=np.int64) + at).tolist()
    if (ends[-1] if ends else at) != len(body):
        raise Unusable(f"{what} do not add up to the file's length")
    starts = [at, *ends[:-1]] if ends else []
    return [body[s:e].decode() for s, e in zip(starts, ends, strict=True)]


def read_regular(path: Path, what: str) -> bytes:
    """The bytes of the regular file at ``path``, not following a symlink and never
    waiting on a FIFO or a device (``Unusable`` for anything but a regular file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unusable(f"{what} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    """Delete the map (and a temporary file a failed save left), durably."""
    removed = False
    for p in (path, path.with_name(path.name + ".tmp")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed = True
    if removed:
        sync_dir(path.parent)


def mismatch(saved: dict[str, Any], now: dict[str, Any], what: str) -> str:
    """Why ``now`` is not ``saved`` ("" if they are equal), naming the first key that
    differs."""
    for key in sorted(saved.keys() | now.keys()):
        if saved.get(key) != now.get(key):
            return f"{what}'s {key} is {now.get(key)!r}, the map's {saved.get(key)!r}"
    return ""


def sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
