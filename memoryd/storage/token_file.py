"""The late-interaction token vectors, in a local file instead of the daemon's memory.

A memory's token vectors (int8 [t, dim], ``repository.quantize_tokens``; ~13 KB for a
35-token turn) are three quarters of what the hot index would hold per memory, yet a
Recall reranks only its best ``recall.rerank_top`` candidates. So the index keeps, per
row, only where the vectors are in this file (an offset and a count, 10 bytes), and the
reranker reads the few it needs with one ``os.preadv`` each (``read_many``): from the
kernel's page cache (not the daemon's RSS) once warm, a few microseconds per candidate.
It is a local file also when the store is an object store (``storage.uri = s3://...``),
where reading the table per Recall would cost a round trip per query.

The file is derived data: LanceDB holds every memory's token vectors durably. A clean
shutdown, and the daemon while serving, save its map beside it (``token_map``: the table
and the rows it was made from, checksummed), and the next start reuses the file, reading
the table without its token-vector column, for the rows the map has as the table has them
now, and only the others' token vectors from the table (rows written or changed after the
map, before a crash); otherwise (no map, a reembed or restore swapped in, another model or
dimension, a truncated, replaced or edited file, most of the rows changed) the start writes
it afresh from the table (truncated, then every row appended), so nothing stale ever
carries over. Records are only appended: an overwrite or a delete leaves dead bytes, and
``HotIndex`` rewrites the live records into a new file once the dead ones outweigh them
(``should_compact``).

Each record starts with a header (magic, token count, dimension, the memory id's CRC-32)
that every read checks: a truncated or overwritten file, or an offset that
points elsewhere, reads as damaged (``read`` answers None and ``damaged`` turns True)
rather than as another memory's vectors, so a Recall falls back to its fused order
instead of giving a wrong ranking, until the file is rebuilt.

Not thread-safe: used from the event loop thread only, like the index.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import tempfile
import weakref
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memoryd.storage import token_map

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<IHHII")  # magic, tokens, dim, CRC-32 of the id, reserved (0)
_MAGIC = 0x314B544D  # "MTK1"
HEADER_BYTES = _HEADER.size
# Compact once dead bytes are more than the live ones and at least this many.
COMPACT_MIN_DEAD = 64 << 20


def id_hash(memory_id: str) -> int:
    # CRC-32, not a cryptographic hash: it tells records apart, it guards nothing (the
    # file is the daemon's own), and at ~0.1 us it is a fraction of a read's cost.
    return zlib.crc32(memory_id.encode())


class TokenFile:
    """An append-only file of token-vector records; callers keep (offset, count).

    ``path`` None: an anonymous temporary file (tests, tools); else the file is created
    or truncated at ``path``, or with ``keep`` (the bytes a map vouches for:
    ``token_map``) reopened with what lies beyond them cut off (records appended after the
    map was saved; ValueError if it is shorter) and then its modification time set back to
    ``mtime_ns`` (the map's); its ``live`` bytes are then the caller's to count. Whatever
    truncates or replaces the file at ``path`` first deletes the map beside it
    (``token_map.map_path``): a map only ever describes bytes nothing has written to since
    it was saved."""

    def __init__(
        self,
        dim: int,
        path: Path | None = None,
        *,
        keep: int | None = None,
        mtime_ns: int | None = None,
    ):
        self.dim = dim
        self.path = path
        self._fd = self._open(path, keep, mtime_ns)
        # An index dropped without close() (tests, tools) still gives its descriptor back.
        self._finalizer = weakref.finalize(self, _close_quietly, [self._fd])
        self.size = keep or 0  # bytes written (the end of the last record)
        self.live = 0  # bytes of records some row still points at
        self.damaged = False  # a read found a record that is not what the index expects
        self.generation = 0  # how many times the file was replaced (compaction, repair)

    @staticmethod
    def _open(path: Path | None, keep: int | None, mtime_ns: int | None) -> int:
        if path is None:
            with tempfile.TemporaryFile(prefix="memoryd-tokens-") as handle:
                return os.dup(handle.fileno())
        path.parent.mkdir(parents=True, exist_ok=True)
        if keep is None:
            token_map.remove(token_map.map_path(path))
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        try:
            size = os.fstat(fd).st_size
            if size < keep:
                raise ValueError(f"the token file {path} is {size} bytes, not {keep} or more")
            if size > keep:  # appended after the map was saved (the run went on, then died)
                os.ftruncate(fd, keep)
                if mtime_ns is not None:  # the file as it was then, byte for byte: say so
                    os.utime(fd, ns=(mtime_ns, mtime_ns))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def sync(self) -> os.stat_result:
        """Flush the file to disk; returns its stat afterwards (for the map)."""
        os.fsync(self._fd)
        return os.fstat(self._fd)

    def record_bytes(self, count: int) -> int:
        return HEADER_BYTES + count * self.dim

    def append(self, memory_id: str, tokens: np.ndarray) -> int:
        """Write a record; returns its offset (its count is ``tokens.shape[0]``)."""
        tokens = np.ascontiguousarray(tokens, dtype=np.int8)
        if tokens.ndim != 2 or tokens.shape[1] != self.dim or tokens.shape[0] > 0xFFFF:
            raise ValueError(f"token vectors of shape {tokens.shape}, want [t, {self.dim}]")
        header = _HEADER.pack(_MAGIC, tokens.shape[0], self.dim, id_hash(memory_id), 0)
        offset = self.size
        data = header + tokens.tobytes()
        written = os.pwrite(self._fd, data, offset)
        if written != len(data):
            raise OSError(f"short write to the token file ({written} of {len(data)} bytes)")
        self.size += len(data)
        self.live += len(data)
        return offset

    def read(self, memory_id: str, offset: int, count: int) -> np.ndarray | None:
        """The record at ``offset`` if it is ``memory_id``'s with ``count`` tokens; None
        (and ``damaged``) otherwise."""
        want = self.record_bytes(count)
        try:
            data = os.pread(self._fd, want, offset)
        except OSError:
            data = b""
        if len(data) == want and self._holds(data, 0, memory_id, count):
            return np.frombuffer(data, np.int8, offset=HEADER_BYTES).reshape(count, self.dim)
        self._found_damaged(memory_id, offset)
        return None

    def holds(self, memory_id: str, offset: int, count: int) -> bool:
        """Whether the record at ``offset`` is ``memory_id``'s with ``count`` tokens, by its
        header alone (a start's check of a sample of what a map says; nothing is marked)."""
        try:
            data = os.pread(self._fd, HEADER_BYTES, offset)
        except OSError:
            return False
        return len(data) == HEADER_BYTES and self._holds(data, 0, memory_id, count)

    def read_many(
        self, records: Sequence[tuple[str, int, int]]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Several records, each ``(memory_id, offset, count)`` as ``read`` takes them, back
        to back: ``(tokens int8 [sum of counts, dim], starts int64 [n + 1])``, record i's
        vectors at rows starts[i]:starts[i + 1] (``maxsim``'s layout). Each is read with one
        ``os.preadv`` straight into its place (its header into one scratch buffer), not
        copied out of a bytes object of its own and concatenated again; the bookkeeping in
        plain Python around them (numpy calls for 20 records cost more than the records'
        reads: bench/RESULTS.md, "Hot path, sixth pass"). None (and ``damaged``) if any
        record is not what the caller expects."""
        starts = [0]
        total = 0
        for _, _, count in records:
            total += count
            starts.append(total)
        flat = np.empty(total * self.dim, dtype=np.int8)
        if not self._read_each(records, flat, starts):
            return None
        return flat.reshape(-1, self.dim), np.array(starts, dtype=np.int64)

    def _read_each(
        self, records: Sequence[tuple[str, int, int]], flat: np.ndarray, starts: list[int]
    ) -> bool:
        """``read_many``'s records into ``flat``; False (and ``damaged``) at the first that
        is not what the caller expects."""
        into = flat.data  # a memoryview; int8: an element is a byte
        header = bytearray(HEADER_BYTES)
        dim, fd, holds = self.dim, self._fd, self._holds
        for (memory_id, offset, count), start in zip(records, starts, strict=False):
            at, size = start * dim, count * dim
            try:
                got = os.preadv(fd, [header, into[at : at + size]], offset)
            except OSError:
                got = -1
            if got != HEADER_BYTES + size or not holds(header, 0, memory_id, count):
                self._found_damaged(memory_id, offset)
                return False
        return True

    def _holds(self, data: bytes | bytearray, at: int, memory_id: str, count: int) -> bool:
        """Whether the header at ``data[at:]`` is ``memory_id``'s record of ``count`` tokens."""
        magic, n, dim, hashed, _ = _HEADER.unpack_from(data, at)
        return magic == _MAGIC and n == count and dim == self.dim and hashed == id_hash(memory_id)

    def _found_damaged(self, memory_id: str, offset: int) -> None:
        if not self.damaged:
            log.warning(
                "the token file %s does not hold memory %s's token vectors at %d: damaged; "
                "recalls rerank without them until it is rebuilt",
                self.path or "(temporary)",
                memory_id,
                offset,
            )
        self.damaged = True

    def dropped(self, count: int) -> None:
        """A row stopped pointing at a record of ``count`` tokens (overwrite, delete)."""
        self.live -= self.record_bytes(count)

    def should_compact(self) -> bool:
        dead = self.size - self.live
        return dead >= COMPACT_MIN_DEAD and dead > self.live

    def replace_with(self, other: TokenFile) -> None:
        """Take ``other``'s file (written as a compacted copy) in place of this one."""
        if self.path is not None and other.path is not None:
            token_map.remove(token_map.map_path(self.path))  # it describes the old file
            # Not os.replace: on ext4 a rename over an existing file first writes out the
            # new one's dirty pages (auto_da_alloc), ~0.3 s a GB on the event loop. Between
            # the two steps a crash leaves no file, which a start rewrites (no map either).
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            os.rename(other.path, self.path)
        self.close()
        self._fd, self.size, self.live, self.damaged = other._fd, other.size, other.live, False
        other._finalizer.detach()
        other._fd = -1
        self._finalizer = weakref.finalize(self, _close_quietly, [self._fd])
        self.generation += 1

    def close(self) -> None:
        self._finalizer.detach()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _close_quietly(holder: list[int]) -> None:
    with contextlib.suppress(OSError):
        os.close(holder[0])
