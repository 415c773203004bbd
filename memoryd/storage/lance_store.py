"""The durable store: one LanceDB table, written by one thread with group commit.

Every write (add, replace, delete) is queued to a single writer thread. The writer takes
everything queued (up to ``max_batch`` rows), turns each run of the same kind into one
LanceDB operation (one ``add`` for many new rows, one ``delete`` for many ids) and only
then resolves the callers' futures. So an acknowledged write is on disk (it survives a
kill -9), and concurrent writers share commits instead of growing one fragment each.

Every commit writes a new version: a manifest listing every fragment, so a burst of small
commits left thousands of manifests behind (bench/RESULTS.md, "How big a store grows").
Each compaction is followed by a cleanup of the versions replaced more than
``keep_versions_seconds`` ago (10 s). A compaction merges the fragments under
``COMPACT_TARGET_ROWS`` rows, in steps of ``COMPACT_STEP_ROWS`` rewritten (~220 MiB;
LanceDB's own ``optimize`` rewrote every fragment of a table under a million rows, 13 GiB at
1M memories), and those with deleted rows (see ``PURGE_EVERY_SECONDS``). It runs
every ``compact_every`` commits (as before), and by time: once the writer has been idle
``keep_versions_seconds`` after a compaction that had to keep versions (too young then),
a cleanup with nothing to compact, which costs next to nothing; and every
``cleanup_every_seconds`` (an hour) while commits are waiting for one, so a slow trickle of
Stores is compacted once an hour, not after each Store. So the versions on disk are
at most those of the last ``compact_every`` commits (x ``COMPACT_FORCE_FACTOR`` under
writes that never pause) and of the last seconds, and the data directory stays
proportional to the memories it holds. That runs on a thread of its own, so appends
(Stores) keep committing meanwhile: the fragments are rewritten beside them and the
rewrite committed with the appends held for that commit alone (Lance rebases it over the
appends committed since its plan), while a delete or an update committed during one makes
the compaction fail (and its work is lost). So the writer holds deletes and updates back
until a compaction step in progress ends; the Stores queued behind them commit meanwhile,
except one naming a memory a write before it names, which keeps its place
(``_hold_rewrites``).

Access counts (bumped by every Recall that returns a memory) go to a log table of their
own, ``<table>_access`` (id, count, last access), appended a batch at a time and folded to
one row per id now and then; loading applies the newest entry per id. Rewriting the
memories' rows for them instead (vectors and token vectors included) took the writer
seconds once a minute under read load, and every Store waited behind it.

A full disk (ENOSPC, or a quota: EDQUOT) is recognised in one place, :func:`no_space`, and
answered as ``StorageFull`` (RESOURCE_EXHAUSTED "no space left on device"). Nothing of the
failed commit is visible and every acknowledged write is kept (LanceDB commits by writing
a new manifest last). The store then reports the fault (``status()``, shown in Stats and
in the ``memoryd.storage`` health entry) until a write succeeds again or, while the writer
is idle, the disk has ``SPACE_FREED_BYTES`` more free than when the write failed: so it
recovers by itself once space is freed. (Not "a small probe file can be written": a failed
commit leaves some space free, enough for a probe but not for the next commit, and health
flapped back to SERVING while Stores still failed.)

A store shared by several daemons (an object store, ``storage.uri = s3://...``): only the
holder of the maintenance lease (:mod:`memoryd.storage.lease`) compacts and cleans up,
judged from the table itself (its small fragments, whoever wrote them), and the cleanup
deletes only versions replaced more than ``keep_versions`` ago, since other daemons read
them: of the memories' table exactly those, by number (:func:`replaced_versions`; also
``keep_versions`` after a purge, so the texts it purged leave the bucket then), of the
others by LanceDB's time cutoff (:func:`safe_older_than`). Appends, updates and deletes of
every daemon commit beside it (Lance rebases them over a compaction; a compaction that
loses to a delete is retried).
An object store that does not answer a write (:func:`store_unreachable`) is answered as
``StoreUnavailable`` (UNAVAILABLE, naming the store and the cause) and reported by
``status()`` like a full disk; later writes are refused at once, without waiting for a
timeout each, until a probe (reading the newest manifest, backing off from
``PROBE_FIRST_SECONDS`` to ``PROBE_MAX_SECONDS``) finds it answering again.

Damaged files found at start (an empty newest manifest, a data fragment cut short) stop the
daemon with a ``DataCorrupt`` naming the file and what to do (``storage.damage``); with
``open_last_good`` the store instead opens the newest version that reads whole: an
unreadable newest manifest is moved aside, and a version whose fragments do not read is
rolled back by restoring the newest older version that does (Lance's ``restore``, which
commits that version's state as a new one). A store that cannot be written (a read-only
mount, wrong ownership) is a ``ConfigError`` naming the directory.

The table's schema carries the embedding identity (model name and dimension); opening a
store made by another model is refused with a clear message.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import hashlib
import json
import logging
import os
import queue
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memoryd.core.errors import ConfigError, DataCorrupt, StorageFull, StoreUnavailable
from memoryd.core.jobs import post
from memoryd.core.records import Category, KeyRecord, Memory, StoreOutcome, stored_memory
from memoryd.storage import damage, heap
from memoryd.storage.lease import MaintenanceLease

if TYPE_CHECKING:
    from lance.optimize import CompactionOptions

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
IDLE_COMPACT_SECONDS = 1.0
# A delete or update waiting for a compaction step looks this often for Stores queued
# behind it that may commit first.
PASS_POLL_SECONDS = 0.02
COMPACT_FORCE_FACTOR = 5
KEEP_VERSIONS_SECONDS = 10.0  # versions replaced longer ago go at the next cleanup
SHARED_KEEP_VERSIONS_SECONDS = 900.0  # ... on an object store (others read it too)
# A stop waits this long for a compaction in progress (minutes at 100k memories on a busy
# machine when every fragment was rewritten: a stop waiting for it outlasted systemd's and
# Kubernetes' grace and was killed,
# losing the token file's map), then leaves it: Lance commits a compaction in one atomic
# step at its end, so one cut short by the exit leaves only unreferenced files.
COMPACTION_STOP_WAIT_SECONDS = 5.0
# A compaction that failed (no space, an unexpected error) is not asked for again before
# this long, doubled after each failure in a row up to the most (it was asked for, and
# logged, every idle second while a disk stayed full).
COMPACT_RETRY_FIRST_SECONDS = 1.0
COMPACT_RETRY_MAX_SECONDS = 300.0
CLEANUP_EVERY_SECONDS = 3600.0  # a compaction at least this often while commits wait
# A compaction of the memories' table merges fragments smaller than this and leaves larger
# ones as they are (but for deleted rows, below), so it rewrites at most about this many
# rows besides the new ones (~13 KB a row: ~220 MiB). A fragment it rewrites is written
# as fragments of about this many rows (a larger one from before, once). LanceDB's optimize
# takes Lance's default, 1,048,576: every fragment of a table under a million rows was
# rewritten to add a burst's few rows (13 GB at 1M memories).
COMPACT_TARGET_ROWS = 16_384
# A compaction also rewrites a fragment with more than a tenth of its rows deleted (Lance's
# default), so its space is freed; and once this long (storage.purge_every_seconds) has
# passed since the last purge began, with deletes or updates committed since (or since the
# store was opened), a purge rewrites every fragment with any row deleted, so a forgotten
# (or replaced) memory's text leaves the data files within about that long after its
# Forget (with the cleanup of the versions that held it, and of the files of rewrites never
# committed). The purge asks for itself when the writer is idle.
PURGE_EVERY_SECONDS = 3600.0
# A compaction step commits its rewrites once they reach this many rows (at least one
# task), then lets the deletes and updates waiting for it through; the next step follows
# at the writer's next turn. So a purge of a large table, or a large fragment from before,
# never holds a Forget back for more than about one fragment's rewrite.
COMPACT_STEP_ROWS = 16_384
# A rewrite of more rows than this (in one task: a large fragment from before, written by
# LanceDB's optimize or a bulk load, which a purge, or a compaction once a tenth of it is
# deleted, rewrites whole: ~56 s at 1M rows) runs beside this daemon's deletes and updates
# instead of holding them (and the writer, with every Store behind them) for its whole run.
# A delete committed meanwhile on the fragment it rewrites makes Lance refuse its commit:
# it is tried again at the next step, and after ``LONE_TASK_TRIES`` refusals in a row it
# holds them off, so a steady trickle of Forgets cannot put it off for good. On a local
# disk only: on an object store the files of a refused rewrite (a copy of the rows just
# forgotten) would stay until the cleanup of unverified files, 7 days later.
LONE_TASK_ROWS = 4 * COMPACT_STEP_ROWS
LONE_TASK_TRIES = 3
META_MODEL = b"memoryd.embedding_model"
META_DIM = b"memoryd.embedding_dim"
META_SCHEMA = b"memoryd.schema_version"
# a random id set when the table is created: a table re-created (a reembed, a restore) with
# the same version number has another (LanceStore.identity hashes the schema metadata)
META_CREATED = b"memoryd.table_id"
SPACE_FREED_BYTES = 8 << 20
# Under writes that never pause, the writer hands the heap's free pages back to the system
# (``heap.release_free_pages``) after this many rows; and whenever it goes idle after
# writes, and after each compaction.
TRIM_EVERY_ROWS = 8192
# ... and, while a compaction runs, this often
# when idle: the compaction frees its read and write buffers as it goes, and glibc kept
# ~210 MiB of them at 100k (2 KB a memory) until it ended.
COMPACT_TRIM_SECONDS = 5.0
# When idle (no write for a second, no compaction running) the writer drops LanceDB's
# caches if they hold more than this: the manifests and metadata of a burst's versions
# (up to storage.cache_mib; 64 MiB at 100k Stores, ~0.6 KB a memory).
CACHE_DROP_BYTES = 4 << 20
# ... and once more this long after the last commit or compaction, whatever else is due:
# what is freed after those trims (the cache drop's old session, the row arrays' trim, a
# compaction's last buffers) stayed resident, 132 MiB at 100k Stores (1.4 KB a memory,
# store_rss.py, idle 600 s) until something trimmed again.
SETTLE_TRIM_SECONDS = 30.0
STATUS_OK = "ok"
# A shared store (several daemons, see storage/lease.py): the lease holder looks at the
# table this often (idle or not) for fragments to compact and versions to clean up.
SHARED_MAINTAIN_CHECK_SECONDS = 5.0
# Object store: the versions the last purge replaced are looked for this often once due
# until all are gone (a version stamped by a clock ahead keeps them a while longer).
SWEEP_RETRY_SECONDS = 60.0
KEEP_ALL = timedelta(days=3650)  # optimize's cleanup when no version is due to go
# While the object store is unreachable: the first probe after this long, then doubling.
PROBE_FIRST_SECONDS = 0.5
PROBE_MAX_SECONDS = 8.0
PROBE_OPTIONS = {"client_max_retries": "0", "client_retry_timeout": "2"}
# An object store's client by default retries a failed request for minutes (Lance: 10
# retries within 180 s; object_store: no overall timeout), so a Store hung that long in an
# outage. These bound a request and its retries to about ten seconds; storage_options of
# the user's own win. (Keys measured against lancedb 0.40: timeout, connect_timeout are
# object_store's client options; client_max_retries, client_retry_timeout are Lance's.)
# Lance retries a failed data-file upload a few times more on top (measured: 4 tries), so
# a store that accepts connections and never answers fails a write after about 4 x timeout
# (10 s: a 5 MiB part needs 4 Mbit/s; raise it for slower links).
OBJECT_STORE_DEFAULTS = {
    "connect_timeout": "2s",
    "timeout": "10s",
    "client_max_retries": "3",
    "client_retry_timeout": "10",
}

# LanceDB raises no OSError on a full disk but a RuntimeError carrying Rust's io error,
# measured with lancedb 0.x on a 3 MiB tmpfs, alike for add, delete and merge_insert:
# "lance error: LanceError(IO): No space left on device (os error 28), <rust source>".
_NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded|os error (28|122)\b")


# Lance's commit gave up rebasing onto commits made meanwhile (its retry budget spent).
_CONCURRENT_WRITERS = re.compile(r"too many concurrent writers|commit conflict", re.IGNORECASE)


# An object store that does not answer (connection refused or reset, a timeout, a DNS
# failure) or answers with an error: Lance's and object_store's wording.
_STORE_IO = re.compile(
    r"LanceError\(IO\)|error sending request|timed out|Generic \w+ error|dns error"
    r"|connect error|Connection refused",
    re.IGNORECASE,
)

# An HTTP status is read only where the message names one ("... status code: 403
# Forbidden", "with status 503 Service Unavailable", reqwest's "HTTP status server error
# (503 ..."): a bare number is as likely a duration or a size ("in 403.86ms", "(503
# bytes"), and a connection that failed after 403 ms was once reported as access denied.
# A status proves the store answered, so it is read before the connection's words, which
# a host or bucket name may hold ("minio-connect").
_STATUS = r"(?:status(?: code)?:? |HTTP status (?:client|server) error \()"
_STORE_CAUSES = (
    (re.compile(r"timed out", re.IGNORECASE), "the request timed out"),
    (re.compile(r"dns error|failed to lookup", re.IGNORECASE), "its host name does not resolve"),
    (
        re.compile(
            _STATUS + r"40[13]\b|\bForbidden\b|AccessDenied|InvalidAccessKeyId"
            r"|SignatureDoesNotMatch|ExpiredToken|InvalidToken|AuthorizationHeaderMalformed"
            r"|lacked (the necessary privileges|valid authentication)",
            re.IGNORECASE,
        ),
        "access denied",
    ),
    (
        re.compile(_STATUS + r"5\d\d\b|Server returned error response", re.IGNORECASE),
        "the store answered with a server error",
    ),
    (
        re.compile(
            r"error sending request|\bconnect error|connection (refused|reset|closed|aborted)",
            re.IGNORECASE,
        ),
        "connection failed",
    ),
)


def object_store_options(uri: str, options: dict[str, str] | None) -> dict[str, str]:
    """``options`` for LanceDB, with bounded timeouts and retries for an object store."""
    if is_local(uri):
        return dict(options or {})
    return {**OBJECT_STORE_DEFAULTS, **(options or {})}


def is_local(uri: str) -> bool:
    return "://" not in uri.removeprefix("file://")


def store_unreachable(error: BaseException) -> bool:
    """Whether a failed operation on an object store says the store did not answer (or
    answered with an error), as opposed to a conflict between writers or a bug."""
    text = str(error)
    return bool(_STORE_IO.search(text)) and not _CONCURRENT_WRITERS.search(text)


def unreachable_cause(error: BaseException) -> str:
    text = str(error)
    for pattern, cause in _STORE_CAUSES:
        if pattern.search(text):
            return cause
    return "an I/O error"


def id_filter(ids: Iterable[str]) -> str:
    """A Lance filter for the rows of ``ids`` (each quoted as an SQL string)."""
    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    return f"id IN ({quoted})"


def safe_older_than(
    stamps: Sequence[tuple[int, float]], keep: timedelta, now: float
) -> timedelta | None:
    """The ``older_than`` for Lance's cleanup that deletes only versions replaced more
    than ``keep`` ago (None: nothing is due). Lance deletes a version when its own commit
    time is older than the cutoff (and it is not the newest), so a version committed long
    ago and replaced a second ago would go at once, under a reader of another daemon that
    opened it a moment before. Here the cutoff is the commit time of the version that was
    the newest ``keep`` ago (``vk``, the newest committed before then), or of any later
    version if earlier (clocks of several daemons): ``vk`` and every later version stay, and
    each version before ``vk`` was replaced (by ``vk`` at the latest) more than ``keep``
    ago. LanceDB computes its cutoff as (its now - older_than) when its cleanup starts,
    after the compaction that precedes it in ``optimize``: ``keep`` more of ``older_than``
    covers an optimize shorter than ``keep``. So a daemon that opens a version may read it
    for ``keep`` seconds, less the skew between the daemons' clocks, while an optimize
    lasts less than ``keep``."""
    horizon = now - keep.total_seconds()
    stamps = sorted(stamps)  # (version, commit time): version_stamps
    before = [i for i, (_, ts) in enumerate(stamps) if ts <= horizon]
    if not before or before[-1] == 0:
        return None  # no version, or none older than vk
    cutoff = min(ts for _, ts in stamps[before[-1] :])
    return timedelta(seconds=now - cutoff) + keep


def version_stamps(ds: Any) -> list[tuple[int, float]]:
    """Each version of a pylance dataset with its commit time (seconds since the epoch),
    from the manifests' nanoseconds: pylance's ``versions()`` makes naive local datetimes,
    which read an hour early in the hour a clock change repeats (helper-55's review), so a
    cleanup by them could delete a version replaced seconds before."""
    try:
        return [(int(v["version"]), int(v["timestamp"]) / 1e9) for v in ds._ds.versions()]
    except (AttributeError, KeyError, TypeError, ValueError):  # another pylance's shape
        return [(int(v["version"]), v["timestamp"].timestamp()) for v in ds.versions()]


def replaced_versions(
    stamps: Sequence[tuple[int, float]], keep: timedelta, now: float
) -> list[int]:
    """The versions replaced more than ``keep`` ago, by number, for Lance's cleanup of
    exactly those (``cleanup_old_versions(versions=...)``), from ``(version, commit time)``
    pairs (:func:`version_stamps`): every version before ``vk``, the newest committed
    ``keep`` ago or earlier (each was replaced by ``vk`` at the latest). What
    :func:`safe_older_than` allows, without the second ``keep`` its time cutoff needs: a
    cutoff dates versions by their own commits, so the one before a purge, committed within
    ``keep`` of it, stayed until a version committed ``keep`` after the purge was itself
    ``keep`` old (for good while nothing was written after the purge). A version is dated
    no earlier than any before it: one stamped earlier by a daemon whose clock runs behind
    was still committed after them, and does not count as old before they do."""
    horizon = now - keep.total_seconds()
    vk = None
    latest = float("-inf")
    for number, stamp in sorted(stamps):
        latest = max(latest, stamp)
        if latest <= horizon:
            vk = number
    if vk is None:
        return []
    return sorted(number for number, _ in stamps if number < vk)


# An append whose read version was overwritten since (another daemon folded the access log).
_OVERWRITTEN = re.compile(r"incompatible with concurrent transaction Overwrite", re.IGNORECASE)


def no_space(error: BaseException) -> bool:
    """Whether ``error`` says the disk (or the user's quota) is full."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return bool(_NO_SPACE.search(str(error)))


# A stored memory: the record, its vector, and its token vectors (int8, see
# repository.quantize_tokens; late interaction) when they were computed.
Row = tuple[Memory, np.ndarray, np.ndarray | None]


# An access-count entry: memory id, its access count, when it was last recalled.
Access = tuple[str, int, datetime | None]
ACCESS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("access_count", pa.int64(), nullable=False),
        pa.field("last_accessed_at", pa.timestamp("us", tz="UTC"), nullable=True),
    ]
)
# Idempotency keys whose Store created nothing (core.records.KeyRecord).
KEYS_SCHEMA = pa.schema(
    [
        pa.field("agent_id", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("memory_id", pa.string(), nullable=False),
        pa.field("outcome", pa.int8(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
KEYS_COMPACT_COMMITS = 200
ACCESS_FOLD_ROWS = 50_000  # fold the access log once it holds this many entries (or more)
ACCESS_FOLD_COMMITS = 60  # ... or after this many appends (hourly at one flush a minute)


def make_schema(model_name: str, dim: int) -> pa.Schema:
    ts = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("agent_id", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("summary", pa.string(), nullable=False),
            pa.field("category", pa.int8(), nullable=False),
            pa.field("importance", pa.float32(), nullable=False),
            pa.field("created_at", ts, nullable=False),
            pa.field("updated_at", ts, nullable=False),
            pa.field("expires_at", ts, nullable=True),
            pa.field("metadata", pa.string(), nullable=False),  # JSON object
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("idempotency_key", pa.string(), nullable=False),
            pa.field("access_count", pa.int32(), nullable=False),
            pa.field("last_accessed_at", ts, nullable=True),
            pa.field("related_ids", pa.list_(pa.string()), nullable=False),
            pa.field("supersedes", pa.string(), nullable=False),
            # ISO 639-1; null in rows written before the column existed (detected on load)
            pa.field("language", pa.string(), nullable=True),
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
            pa.field("token_vectors", pa.binary(), nullable=True),  # int8 [t, dim]
        ],
        metadata={
            META_MODEL: model_name.encode(),
            META_DIM: str(dim).encode(),
            META_SCHEMA: SCHEMA_VERSION.encode(),
        },
    )


def to_arrow(schema: pa.Schema, rows: Sequence[Row]) -> pa.Table:
    cols: dict[str, list[Any]] = {name: [] for name in schema.names}
    for m, v, tok in rows:
        cols["token_vectors"].append(
            None if tok is None else np.ascontiguousarray(tok, dtype=np.int8).tobytes()
        )
        cols["id"].append(m.id)
        cols["agent_id"].append(m.agent_id)
        cols["scope"].append(m.scope)
        cols["text"].append(m.text)
        cols["summary"].append(m.summary)
        cols["category"].append(int(m.category))
        cols["importance"].append(float(m.importance))
        cols["created_at"].append(m.created_at)
        cols["updated_at"].append(m.updated_at)
        cols["expires_at"].append(m.expires_at)
        cols["metadata"].append(json.dumps(m.metadata, ensure_ascii=False, sort_keys=True))
        cols["content_hash"].append(m.content_hash)
        cols["idempotency_key"].append(m.idempotency_key)
        cols["access_count"].append(m.access_count)
        cols["last_accessed_at"].append(m.last_accessed_at)
        cols["related_ids"].append(list(m.related_ids))
        cols["supersedes"].append(m.supersedes)
        cols["language"].append(m.language or None)
        cols["vector"].append(v)
    arrays = []
    for f in schema:
        if f.name == "vector":
            flat = np.ascontiguousarray(np.stack(cols["vector"]), dtype=np.float32).reshape(-1)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(flat), f.type.list_size))
        else:
            arrays.append(pa.array(cols[f.name], type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


_TIMESTAMPS = ("created_at", "updated_at", "expires_at", "last_accessed_at")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(column: pa.Array) -> list[int]:
    """A timestamp[us] column's microseconds since the epoch (0 where null)."""
    return column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).tolist()


def _datetimes(
    column: pa.Array, like: tuple[list[int], list[datetime | None]] | None = None
) -> list[datetime | None]:
    """A timestamp[us, UTC] column as aware datetimes: from the integers, ~10x faster than
    Arrow's own conversion (which costs ~1 s per 100k values). ``like``: another column's
    microseconds and datetimes, whose objects are shared where the values are equal (a
    memory never updated has updated_at == created_at: one object made and held, not two)."""
    micros = _micros(column)
    if column.null_count == 0:
        if like is not None:
            return [
                same if us == was else _EPOCH + timedelta(microseconds=us)
                for us, was, same in zip(micros, like[0], like[1], strict=True)
            ]
        return [_EPOCH + timedelta(microseconds=us) for us in micros]
    valid = column.is_valid().to_numpy(zero_copy_only=False).tolist()
    return [
        _EPOCH + timedelta(microseconds=us) if ok else None
        for us, ok in zip(micros, valid, strict=True)
    ]


def _string_tuples(column: pa.Array) -> list[tuple[str, ...]]:
    """A list<string> column as tuples; a column of empty lists (most memories link
    nowhere) without Arrow's per-row conversion (~5 us a row), each row the empty tuple."""
    if column.null_count == 0 and len(column.flatten()) == 0:
        return [()] * len(column)
    return [tuple(ids) if ids is not None else () for ids in column.to_pylist()]


# String columns of few distinct values: each value one interned str, not one per row
_FEW_VALUES = frozenset({"agent_id", "scope", "language"})


def _shared_strings(column: pa.Array) -> list[str | None]:
    """A string column of few distinct values (an agent's id, its scope, a language) as
    interned strs, one object per value: ``to_pylist`` makes a new one per row (~56 B
    each, ~170 B a memory for the three columns)."""
    if column.null_count:
        return [None if v is None else sys.intern(v) for v in column.to_pylist()]
    encoded = pc.dictionary_encode(column)
    values = [sys.intern(v) for v in encoded.dictionary.to_pylist()]
    return [values[i] for i in encoded.indices.to_numpy().tolist()]


_SCAN_BATCH = 8192  # rows per batch of the load at start
_TOKEN_READ_IDS = 2048  # ids per query of read_token_rows


def _token_blobs(column: pa.Array, dim: int) -> list[np.ndarray | None]:
    """The int8 [t, dim] token vectors of each row, as views of the column's buffer: at
    100k rows the daemon's RSS after the load was 2.1 GB with views and 2.9 GB with a copy
    per row (the freed Arrow buffers are not handed back to the system)."""
    if column.null_count == len(column):
        return [None] * len(column)
    _, offset_buffer, data = column.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=np.int32)[
        column.offset : column.offset + len(column) + 1
    ]
    flat = np.frombuffer(data, dtype=np.int8) if data is not None else np.zeros(0, np.int8)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [
        flat[offsets[i] : offsets[i + 1]].reshape(-1, dim) if valid[i] else None
        for i in range(len(column))
    ]


_CATEGORIES = {int(c): c for c in Category}


def from_arrow(batch: pa.RecordBatch, vector_dtype: type = np.float32) -> Iterator[Row]:
    """The batch's rows; their vectors as ``vector_dtype`` (float16 for the hot index's
    load, which keeps them so: one conversion per batch rather than one per row)."""
    names = [n for n in batch.schema.names if n not in ("vector", "token_vectors", *_TIMESTAMPS)]
    d: dict[str, list[Any]] = {
        n: _string_tuples(batch.column(n))
        if n == "related_ids"
        else _shared_strings(batch.column(n))
        if n in _FEW_VALUES
        else batch.column(n).to_pylist()
        for n in names
    }
    created = batch.column("created_at")
    d["created_at"] = _datetimes(created)
    like = (_micros(created), d["created_at"]) if created.null_count == 0 else None
    d["updated_at"] = _datetimes(batch.column("updated_at"), like)
    d["expires_at"] = _datetimes(batch.column("expires_at"))
    d["last_accessed_at"] = _datetimes(batch.column("last_accessed_at"))
    dim = batch.schema.field("vector").type.list_size
    vectors = (
        batch.column("vector").flatten().to_numpy(zero_copy_only=False).astype(vector_dtype)
    ).reshape(-1, dim)
    tokens = (
        _token_blobs(batch.column("token_vectors"), dim)
        if "token_vectors" in batch.schema.names
        else [None] * batch.num_rows  # a scan without them (the token file is reused)
    )
    n = batch.num_rows
    languages = d["language"] if "language" in d else [""] * n
    columns = zip(
        d["id"],
        d["agent_id"],
        d["scope"],
        d["text"],
        d["summary"],
        d["category"],
        d["importance"],
        d["created_at"],
        d["updated_at"],
        d["expires_at"],
        d["metadata"],
        d["content_hash"],
        d["idempotency_key"],
        d["access_count"],
        d["last_accessed_at"],
        d["related_ids"],
        d["supersedes"],
        languages,
        vectors,
        tokens,
        strict=True,
    )
    for (
        memory_id,
        agent_id,
        scope,
        text,
        summary,
        category,
        importance,
        created_at,
        updated_at,
        expires_at,
        metadata,
        content_hash,
        idempotency_key,
        access_count,
        last_accessed_at,
        related_ids,
        supersedes,
        language,
        vector,
        token_vectors,
    ) in columns:
        try:
            memory = stored_memory(
                memory_id,
                agent_id,
                scope,
                text,
                summary,
                _CATEGORIES[category] if category in _CATEGORIES else Category(category),
                float(importance),
                created_at,
                updated_at,
                expires_at,
                {} if metadata == "{}" else json.loads(metadata),
                content_hash,
                idempotency_key,
                int(access_count),
                last_accessed_at,
                related_ids,
                supersedes,
                language or "",
            )
        except (ValueError, TypeError) as e:
            raise DataCorrupt(f"stored memory {memory_id!r} cannot be read: {e}") from e
        yield memory, vector, token_vectors


@dataclass(slots=True)
class _Op:
    kind: Literal["add", "update", "delete", "access", "keys"]
    rows: list[Row] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    access: list[Access] = field(default_factory=list)
    keys: list[KeyRecord] = field(default_factory=list)
    future: asyncio.Future[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None

    @property
    def size(self) -> int:
        return len(self.rows) + len(self.ids) + len(self.access) + len(self.keys)


def store_identity(
    uri: str, table: str, storage_options: dict[str, str] | None = None
) -> tuple[str, int] | None:
    """The (model name, dimension) a store was made with, or None if it has no table."""
    db = lancedb.connect(uri, storage_options=storage_options or None)
    if table not in db.list_tables().tables:
        return None
    meta = db.open_table(table).schema.metadata or {}
    try:
        return meta[META_MODEL].decode(), int(meta[META_DIM])
    except (KeyError, ValueError):
        raise DataCorrupt(f"the store at {uri} has no embedding identity") from None


class LanceStore:
    def __init__(
        self,
        uri: str,
        *,
        table: str,
        model_name: str,
        dim: int,
        storage_options: dict[str, str] | None = None,
        max_batch: int = 512,
        compact_every: int = 200,
        cache_bytes: int = 64 << 20,
        access_fold_rows: int = ACCESS_FOLD_ROWS,
        open_last_good: bool = False,
        read_only: bool = False,
        keep_versions_seconds: float = KEEP_VERSIONS_SECONDS,
        cleanup_every_seconds: float = CLEANUP_EVERY_SECONDS,
        purge_every_seconds: float = PURGE_EVERY_SECONDS,
        shared: bool = False,
        maintenance: Literal["auto", "off"] = "auto",
        lease: MaintenanceLease | None = None,
        key_window: timedelta | None = None,
    ):
        """``shared``: other daemons write the same tables (storage.follow): every
        operation starts from the table's newest version, so a delete or an update finds
        the rows another daemon committed since this one last wrote. ``key_window``: the
        keys table's records of Stores that created nothing go at its compactions once
        they are this old (store.idempotency_days; None: never)."""
        self.uri = uri
        self.open_last_good = open_last_good
        local = uri.removeprefix("file://")
        self._local_dir = Path(local) if "://" not in local else None
        self.storage_options = object_store_options(uri, storage_options)
        # Compaction and cleanup: "off" never; else for a local directory always (the data
        # dir lock makes this daemon its only writer), for a store shared by several
        # daemons only while this one holds the maintenance lease (storage/lease.py).
        self.maintenance = maintenance
        self._lease = lease
        self.key_window = key_window
        if not read_only:  # a store only read (reembed's source) may sit on a read-only disk
            self._check_writable()
        self.model_name = model_name
        self.dim = dim
        self.max_batch = max_batch
        self.compact_every = compact_every
        # LanceDB warns that 0 removes versions a concurrent reader may hold: none here, but
        # a millisecond keeps its meaning without the warning.
        self.keep_versions = timedelta(seconds=max(keep_versions_seconds, 0.001))
        self._long_reads = 0  # whole-table reads while serving (long_read)
        self._long_reads_lock = threading.Lock()
        self.cleanup_every = cleanup_every_seconds
        self.purge_every = purge_every_seconds  # storage.purge_every_seconds
        # the last compaction that purged deleted rows (the first one does: a daemon
        # restarted more often than hourly purges too)
        self._purged_at = time.monotonic() - self.purge_every
        # Deletes and updates committed (each leaves a deleted row), and how many of them the
        # last purge covered (one more at the open of a table with deletion files: an earlier
        # daemon's Forgets may be waiting for a purge).
        self._deleting_commits = 0
        self._purged_upto = 0
        # A purge under way: its start, the deleting commits it covers, and the fragments
        # with deleted rows when it began: it ends once none is left (deletes committed
        # between its steps wait for the next one, else it never ends under a trickle).
        self._purging: tuple[float, int, set[int]] | None = None
        # When the last purge ended (wall time): the versions it replaced list the files
        # that held the texts it purged until a cleanup past it (_versions_due).
        self._purge_ended = 0.0
        # Object store: the table's version when the last purge ended, the newest version
        # before which every version was deleted since, and when to look for those again.
        self._purge_version = 0
        self._swept_version = 0
        self._sweep_at = 0.0
        # a purge ended and the local sweep of files no version lists has not run since
        self._sweep_owed = False
        self._more_to_compact = False  # the last step left planned tasks for the next
        self._lone_refusals = 0  # a large rewrite's commits refused in a row (LONE_TASK_ROWS)
        self.lone_refusals = 0  # ... and in all
        self.schema = make_schema(model_name, dim)
        # LanceDB's own caches default to 6 GB (index) + 1 GB (metadata) and fill with the
        # manifests of every version group commit writes, so the daemon's memory grew
        # with every commit. Reads are served by the hot index, so small caches do.
        self._cache_bytes = cache_bytes
        self._shared = shared
        self._session, self._db = self._connect()
        self.cache_drops = 0
        self._drop_failed_at = -1  # self.commits when dropping the caches last failed
        self._table_name = table
        table_dir = self._table_dir(table)
        if table_dir is not None and any((table_dir / "_deletions").glob("*")):
            self._deleting_commits = 1
        self._table = self._open_or_create(table)
        # The access log is made by its first write, so opening a store never writes to it.
        self._access_name = f"{table}_access"
        existing = self._db.list_tables().tables
        self._access = self._open(self._access_name) if self._access_name in existing else None
        self._access_rows = 0 if self._access is None else int(self._access.count_rows())
        self._access_commits = 0
        self.access_fold_rows = access_fold_rows
        self._access_fold_at = max(access_fold_rows, 2 * self._access_rows)
        self.access_folds = 0
        self._keys_name = f"{table}_keys"
        self._keys = self._open(self._keys_name) if self._keys_name in existing else None
        self._keys_commits = 0
        self._queue: queue.Queue[_Op | None] = queue.Queue()
        # Writes the writer took off the queue and has not committed yet, in order (None:
        # stop): the next of another kind than its group, and those queued behind a delete
        # or update held by a compaction step that did not go ahead of it.
        self._deferred: collections.deque[_Op | None] = collections.deque()
        self.passed_stores = 0  # Stores committed ahead of a held delete or update
        self._thread: threading.Thread | None = None
        self._commits_since_compact = 0
        # Held by the compactor while it rewrites the table; deletes and updates take it.
        self._rewrite_lock = threading.Lock()
        self._compact_due = threading.Event()
        self._compact_backoff = 0.0  # after failed compactions: seconds before the next
        self._compact_retry_at = 0.0  # (monotonic)
        self._compacting = False  # set by the writer when it asks, cleared by the compactor
        # set by close() when it stops without the compaction in progress: the process must
        # then end without waiting for it (memoryd serve does: cli._serve)
        self.abandoned_compaction = False
        self._retry_when_idle = False  # a compaction lost to concurrent appends: once idle
        self._compactor: threading.Thread | None = None
        self._stopping = False
        self.compactions = 0
        # Wall-clock times (LanceDB dates versions by the wall clock): the last new version
        # of the memories' table (start-up counts as one: a previous run may have left old
        # versions), the start of the last optimize, and the time before which every
        # version but the newest is gone.
        self._last_write = time.time()
        self._last_cleanup = time.time()
        self._cleaned_upto = 0.0
        self.commits = 0
        self.rows_written = 0
        # Bytes of the token-vector column the scans read (the load at start, a repair of
        # the token file): none at a start that reuses the token file (storage.token_map).
        self.token_bytes_read = 0
        self._untrimmed = 0  # rows written since the heap was last trimmed
        self._trimmed_at = time.monotonic()  # when it was
        self._settle_at: float | None = None  # when the trim after a burst is due
        self.heap_trims = 0
        self.fault: str | None = None  # why writes fail now (a full disk), else None
        self._free_at_fault: int | None = None  # free bytes on the disk when it began
        # Told (on the writer thread, before the writers' futures resolve) the ids of each
        # commit to the memories' table and the version it made: the follower
        # (storage.follow) uses it to never apply a followed row older than a local write.
        self.on_commit: Callable[[list[str], int], None] | None = None
        self.commit_lock = threading.Lock()
        # The object store did not answer a write: refuse writes (fast) until a probe, due
        # at _probe_at (monotonic), finds it answering again.
        self._unreachable = False
        self._probe_at = 0.0
        self._probe_backoff = PROBE_FIRST_SECONDS
        self._probe_db: Any = None
        self._fold_requested = False  # by the lease holder's pass: the log grew (others')
        self._shared_check_at = 0.0  # monotonic; see SHARED_MAINTAIN_CHECK_SECONDS
        self._optimized_at: dict[str, float] = {}  # table name: wall time of its optimize
        self.cleanups = 0

    def _connect(self) -> tuple[lancedb.Session, lancedb.DBConnection]:
        """A LanceDB session (its caches) and a connection through it."""
        session = lancedb.Session(
            index_cache_size_bytes=self._cache_bytes, metadata_cache_size_bytes=self._cache_bytes
        )
        db = lancedb.connect(
            self.uri,
            storage_options=self.storage_options or None,
            session=session,
            read_consistency_interval=timedelta(0) if self._shared else None,
        )
        return session, db

    def _open_or_create(self, name: str) -> Any:
        existing = self._db.list_tables().tables
        table = self._create(name, self.schema) if name not in existing else self._open(name)
        meta = table.schema.metadata or {}
        model = meta.get(META_MODEL, b"?").decode()
        dim = meta.get(META_DIM, b"?").decode()
        if model != self.model_name or dim != str(self.dim):
            raise ConfigError(
                f"the store at {self.uri} was made with embedding model {model!r} ({dim}-d); "
                f"this daemon embeds with {self.model_name!r} ({self.dim}-d). Point "
                "--data-dir (or storage.uri) at another location, configure the model "
                "the store was made with (embedder.model, or embedder.model_dir for a model "
                "of your own), or copy the store into one of this model with "
                "`memoryd reembed --from OLD_DIR --to NEW_DIR` (daemon stopped)."
            )
        missing = [f for f in self.schema if f.name not in table.schema.names]
        if missing:  # a store from an older memoryd: the new columns, null in old rows
            log.info("adding column(s) %s to %s", ", ".join(f.name for f in missing), name)
            table.add_columns(missing)
        return table

    def _create(self, name: str, schema: pa.Schema) -> Any:
        """Create table ``name``, or open it if another daemon on the same store created it
        first (Lance's conditional PUT of version 1 lets one of them win)."""
        if name == self._table_name:
            schema = schema.with_metadata(
                {**(schema.metadata or {}), META_CREATED: uuid.uuid4().hex.encode()}
            )
        try:
            return self._db.create_table(name, schema=schema, exist_ok=True)
        except Exception:
            if name not in self._db.list_tables().tables:
                raise
            return self._open(name)

    # -- opening a damaged store ---------------------------------------------------------

    def _check_writable(self) -> None:
        d = self._local_dir
        while d is not None and not d.exists() and d != d.parent:
            d = d.parent  # LanceDB creates what is missing: its nearest existing parent
        if d is not None and not os.access(d, os.W_OK):
            raise ConfigError(
                f"the store's directory {d} is not writable (read-only mount, or owned by "
                "another user): fix its ownership or permissions so the user running "
                "memoryd can write there, remount it read-write, or point --data-dir "
                "(storage.uri) elsewhere"
            )

    def _table_dir(self, name: str) -> Path | None:
        return None if self._local_dir is None else self._local_dir / f"{name}.lance"

    def _open(self, name: str) -> Any:
        """Open table ``name``; a damaged newest manifest is a DataCorrupt naming it, or,
        with ``open_last_good``, is moved aside until a version opens."""
        try:
            return self._db.open_table(name)
        except Exception as error:
            table_dir = self._table_dir(name)
            if table_dir is None:
                raise DataCorrupt(
                    f"the table {name} at {self.uri} cannot be opened: {damage.short_error(error)}"
                ) from None
            if not self.open_last_good:
                raise DataCorrupt(damage.describe(table_dir, error, "opened")) from None
            return self._open_older(name, table_dir, error)

    def _open_older(self, name: str, table_dir: Path, error: BaseException) -> Any:
        into = damage.quarantine_dir(table_dir)
        hint = table_dir / "_versions" / "latest_version_hint.json"
        if hint.exists():
            damage.move_aside(hint, table_dir, into)
        while len(manifests := damage.manifests_newest_first(table_dir)) > 1:
            moved = damage.move_aside(manifests[0], table_dir, into)
            log.warning(
                "--open-last-good: moved the unreadable manifest %s to %s", manifests[0], moved
            )
            try:
                table = self._db.open_table(name)
            except Exception as e:
                error = e
                continue
            log.warning(
                "--open-last-good: opened %s at version %d; later writes are lost",
                table_dir,
                table.version,
            )
            return table
        raise DataCorrupt(
            f"{damage.describe(table_dir, error, 'opened')} (no older version opens either)"
        )

    def _stream(
        self, table: Any, name: str, columns: list[str] | None = None, *, diagnose: bool = True
    ) -> Iterator[pa.RecordBatch]:
        """Every row of ``table``, a batch at a time: the whole table is never in memory at
        once (at 100k memories its token vectors alone are 1.4 GB, which the allocator
        kept after the load). A table that fails to read goes through ``_read_all``: a
        DataCorrupt naming the damage or, with ``open_last_good``, the rollback (which
        reads whole, before any row is handed out). ``columns``: only those (default all).
        ``diagnose`` False (a read while serving): a failure is raised as it is, never
        followed by a read of the whole table."""
        if self.open_last_good:
            data = self._read_all(table, name)
            if columns is not None:
                data = data.select(columns)
            yield from data.to_batches(max_chunksize=_SCAN_BATCH)
            return
        query = table.search()
        if columns is not None:
            query = query.select(columns)
        try:
            yield from query.limit(None).to_batches(_SCAN_BATCH)
        except Exception as error:
            if diagnose:
                self._read_all(table, name)  # a DataCorrupt naming the damage, if that is it
            raise error

    def _read_all(self, table: Any, name: str) -> pa.Table:
        """Every row of ``table``; unreadable fragments are a DataCorrupt naming them, or,
        with ``open_last_good``, roll the table back to the newest version that reads."""
        try:
            return table.to_arrow()
        except Exception as error:
            table_dir = self._table_dir(name)
            if table_dir is None:
                raise DataCorrupt(
                    f"the table {name} at {self.uri} cannot be read: {damage.short_error(error)}"
                ) from None
            if not self.open_last_good:
                raise DataCorrupt(damage.describe(table_dir, error, "read")) from None
            current = table.version
            for version in sorted((v["version"] for v in table.list_versions()), reverse=True):
                if version >= current:
                    continue
                table.checkout(version)
                try:
                    data = table.to_arrow()
                except Exception:
                    continue
                table.restore()  # commits the checked-out version's state as the newest
                log.warning(
                    "--open-last-good: %s rolled back to version %d (of %d), the newest "
                    "whose files all read; %d rows",
                    table_dir,
                    version,
                    current,
                    data.num_rows,
                )
                return data
            raise DataCorrupt(
                f"{damage.describe(table_dir, error, 'read')} (no older version reads either)"
            ) from None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="memoryd-writer", daemon=True)
        self._compactor = threading.Thread(
            target=self._compact_forever, name="memoryd-compactor", daemon=True
        )
        self._thread.start()
        self._compactor.start()
        if self._lease is not None and self.maintenance != "off":
            self._lease.start()

    def close(self) -> None:
        """Finish every queued write, then stop both threads: a compaction in progress is
        waited for ``COMPACTION_STOP_WAIT_SECONDS`` at most, then left to the process's
        exit (its rewrite is not committed; a later compaction does it again)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._compactor is not None:
            self._stopping = True
            self._compact_due.set()
            self._compactor.join(COMPACTION_STOP_WAIT_SECONDS)
            if self._compactor.is_alive():
                self.abandoned_compaction = True
                log.warning(
                    "stopping without the compaction in progress (over %.0fs so far): it is "
                    "abandoned, uncommitted; a later compaction redoes it",
                    COMPACTION_STOP_WAIT_SECONDS,
                )
            self._compactor = None
        if self._lease is not None:
            self._lease.stop()  # released: another daemon maintains from now on

    def pending(self) -> str:
        """What closing would wait for, in words ("" = nothing)."""
        parts = []
        deferred = list(self._deferred)  # (a copy in one step: the writer changes it)
        if (queued := self._queue.qsize() + sum(op is not None for op in deferred)) > 0:
            parts.append(f"{queued} queued writes")
        if self._compacting:
            parts.append("a compaction in progress")
        return ", ".join(parts)

    def scan(self, *, tokens: bool = True) -> Iterator[Row]:
        """Every stored row (for rebuilding the in-memory index at start), with the newest
        access count of each from the access log; vectors as float16 (what the index
        keeps). ``tokens`` False: the token-vector column is not read (every row's are
        None), for a start that reuses the token file."""
        access = self.read_access()
        columns = None if tokens else [n for n in self.schema.names if n != "token_vectors"]
        for batch in self._stream(self._table, self._table_name, columns):
            if tokens:
                self.token_bytes_read += batch.column("token_vectors").nbytes
            for memory, vector, tokens_ in from_arrow(batch, np.float16):
                entry = access.get(memory.id)
                if entry is not None:
                    last = memory.last_accessed_at
                    if entry[1] is not None and (last is None or entry[1] > last):
                        last = entry[1]
                    memory = replace(
                        memory,
                        access_count=max(memory.access_count, entry[0]),
                        last_accessed_at=last,
                    )
                yield memory, vector, tokens_

    def read_access(self) -> dict[str, tuple[int, datetime | None]]:
        """The access log folded: per id, the highest count and the latest access."""
        if self._access is None:
            return {}
        return access_from_arrow(self._read_all(self._access, self._access_name))

    def read_keys(self) -> list[KeyRecord]:
        """Every recorded idempotency key (see core.records.KeyRecord)."""
        if self._keys is None:
            return []
        return keys_from_arrow(self._keys.to_arrow())

    def count_rows(self) -> int:
        return int(self._table.count_rows())

    def cache_bytes_held(self) -> int:
        """Bytes LanceDB's index and metadata caches hold now (each is bounded by
        ``cache_bytes``, storage.cache_mib)."""
        return int(self._session.size_bytes)

    def read_tokens(self, memory_id: str) -> np.ndarray | None:
        """One memory's stored token vectors (a read of the table: for the rare write that
        needs them when the daemon's token file failed it, never for a Recall)."""
        quoted = memory_id.replace("'", "''")
        found = (
            self._table.search()
            .where(f"id = '{quoted}'")
            .select(["token_vectors"])
            .limit(1)
            .to_arrow()
        )
        if found.num_rows == 0:
            return None
        return _token_blobs(found.column("token_vectors").combine_chunks(), self.dim)[0]

    def read_token_rows(
        self, ids: Sequence[str]
    ) -> Iterator[tuple[str, int, str, np.ndarray | None]]:
        """The rows ``ids`` names (those still stored), each as (id, updated_at in
        microseconds since the epoch, content hash, token vectors): for a start that takes
        most rows' token vectors from its token file and reads only the others here
        (``Repository``), a filtered read of ``_TOKEN_READ_IDS`` ids at a time."""
        for at in range(0, len(ids), _TOKEN_READ_IDS):
            found = (
                self._table.search()
                .where(id_filter(ids[at : at + _TOKEN_READ_IDS]))
                .select(["id", "updated_at", "content_hash", "token_vectors"])
                .limit(None)
                .to_arrow()
                .combine_chunks()
            )
            if found.num_rows == 0:
                continue
            self.token_bytes_read += found.column("token_vectors").nbytes
            tokens = _token_blobs(found.column("token_vectors").chunk(0), self.dim)
            yield from zip(
                found.column("id").to_pylist(),
                _micros(found.column("updated_at").chunk(0)),
                found.column("content_hash").to_pylist(),
                tokens,
                strict=True,
            )

    def scan_token_rows(
        self, *, diagnose: bool = False
    ) -> Generator[tuple[str, int, str, np.ndarray | None], None, None]:
        """Every stored row as ``read_token_rows`` gives it (id, updated_at in microseconds,
        content hash, token vectors), a batch at a time: for writing the token file while
        serving, which needs no row built as a Memory (nor the access log read).
        ``diagnose``: as ``_stream``'s (the rewrite at start names the damage it meets)."""
        columns = ["id", "updated_at", "content_hash", "token_vectors"]
        with self.long_read():
            for batch in self._stream(self._table, self._table_name, columns, diagnose=diagnose):
                self.token_bytes_read += batch.column("token_vectors").nbytes
                yield from zip(
                    batch.column("id").to_pylist(),
                    _micros(batch.column("updated_at")),
                    batch.column("content_hash").to_pylist(),
                    _token_blobs(batch.column("token_vectors"), self.dim),
                    strict=True,
                )

    @contextlib.contextmanager
    def long_read(self) -> Iterator[None]:
        """A read of the whole table while serving (minutes at a million rows): while one
        runs, a local store's compactions keep every version (the files of the version it
        reads stay), and its versions go at the first cleanup after it."""
        with self._long_reads_lock:
            self._long_reads += 1
        try:
            yield
        finally:
            with self._long_reads_lock:
                self._long_reads -= 1

    # -- what the follower reads (storage.follow) -------------------------------------------

    def table_version(self) -> int:
        """The version of the memories' table this store read at start or wrote last."""
        return int(self._table.version)

    def identity(self) -> dict[str, Any]:
        """What tells the memories table at the version this store has apart from any other
        table or version, for the token file's map (storage.token_map): its location,
        embedding and schema, the version and its row count. Through LanceDB's own table
        only (opening it as a pylance dataset costs a local daemon ~60 MiB of RSS more,
        once), and never its list of versions: that reads every version's manifest (12 s
        for 3,000 versions, which a burst of Stores leaves until a compaction cleans them
        up) and waits behind a compaction's clean-up, so a stop saving the map waited out
        the compaction it had abandoned. A table re-created with the same version number
        is told apart by the random id it was created with (``META_CREATED``, in the
        schema's metadata; a table made before it had none)."""
        table = self._table
        # (the schema metadata's order varies from one opening to the next: sorted)
        meta = sorted((table.schema.metadata or {}).items())
        schema = table.schema.to_string(show_schema_metadata=False) + repr(meta)
        return {
            "uri": self.uri,
            "table": self._table_name,
            "model": self.model_name,
            "dim": self.dim,
            "schema": hashlib.sha256(schema.encode()).hexdigest()[:16],
            "version": int(table.version),
            "rows": int(table.count_rows()),
        }

    def datasets(self) -> dict[str, Any]:
        """The store's tables as pylance datasets (``lance.LanceDataset``, at the version
        this store has them), for reading others' commits: "memories", and "access" and
        "keys" once they exist (another daemon may make them later: ask again)."""
        # Small caches, as for LanceDB's own (see __init__): with Lance's defaults a
        # follower's memory grew with every version followed (measured over 1,500
        # single-row commits: +600 MB; with 8 MiB caches +30 MB).
        caches = self._caches()
        found = {"memories": self._table.to_lance(**caches)}
        existing = self._db.list_tables().tables
        for what, name in (("access", self._access_name), ("keys", self._keys_name)):
            if name in existing:
                found[what] = self._db.open_table(name).to_lance(**caches)
        return found

    def _caches(self) -> dict[str, int]:
        return {
            "metadata_cache_size_bytes": self._cache_bytes,
            "index_cache_size_bytes": self._cache_bytes,
        }

    def status(self) -> str:
        """ "ok", or why writes are refused now (e.g. no space left on device)."""
        return self.fault or STATUS_OK

    @property
    def unreachable(self) -> bool:
        """The object store did not answer the last write or probe: writes are refused at
        once until a probe finds it answering again."""
        return self._unreachable

    # -- writes ------------------------------------------------------------------------

    async def add(self, rows: list[Row]) -> None:
        await self._submit(_Op("add", rows=rows))

    async def update(self, rows: list[Row]) -> None:
        """Overwrite existing rows by id; rows deleted meanwhile stay deleted."""
        await self._submit(_Op("update", rows=rows))

    async def delete(self, ids: Sequence[str]) -> None:
        await self._submit(_Op("delete", ids=list(ids)))

    async def record_access(self, entries: Sequence[Access]) -> None:
        """Persist access counts (one append to the access log; the rows stay as they are)."""
        await self._submit(_Op("access", access=list(entries)))

    async def record_keys(self, records: Sequence[KeyRecord]) -> None:
        """Durably record idempotency keys (one append to the keys table)."""
        await self._submit(_Op("keys", keys=list(records)))

    def _submit(self, op: _Op) -> asyncio.Future[None]:
        if self._thread is None:
            raise RuntimeError("LanceStore.start() was not called")
        op.loop = asyncio.get_running_loop()
        op.future = op.loop.create_future()
        self._queue.put(op)
        return op.future

    def _run(self) -> None:
        while True:
            op: _Op | None
            if self._deferred:  # taken off the queue, not committed yet: first, in order
                op = self._deferred.popleft()
                if op is None:
                    return
            else:
                try:
                    # Wake up after a quiet second to compact while nobody waits on us.
                    op = self._queue.get(timeout=IDLE_COMPACT_SECONDS)
                except queue.Empty:
                    if self._unreachable:
                        self._probe_store()
                    elif self.fault is not None:
                        self._probe_space()
                    else:
                        if self._fold_requested and self._may_maintain():
                            self._fold_requested = False
                            self._fold_access()
                        self._maybe_compact(idle=True)
                        self._maybe_drop_caches()
                        now = time.monotonic()
                        if self._untrimmed or (
                            self._compacting and now - self._trimmed_at >= COMPACT_TRIM_SECONDS
                        ):
                            self._trim_heap()
                        elif self._settle_due(now):
                            self._settle_at = None
                            self._trim_heap()
                    continue
                if op is None:
                    return
            group = [op]
            size = op.size
            # Group commit: take what else is waiting, same kind, up to max_batch rows.
            while size < self.max_batch:
                if self._deferred:
                    nxt = self._deferred[0]
                    if nxt is None or nxt.kind != op.kind:
                        break
                    self._deferred.popleft()
                else:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None or nxt.kind != op.kind:
                        self._deferred.append(nxt)  # next (None: stop after this group)
                        break
                group.append(nxt)
                size += nxt.size
            if self._commit_group(op.kind, group):
                self._settle_at = time.monotonic() + SETTLE_TRIM_SECONDS
                self._maybe_compact()
                self._untrimmed += size
                if self._untrimmed >= TRIM_EVERY_ROWS:
                    self._trim_heap()

    def _commit_group(self, kind: str, group: list[_Op]) -> bool:
        """Commit one group of writes and answer each; whether it committed."""
        error: BaseException | None = None
        if self._unreachable and not self._probe_store():
            error = self._refused()  # at once, not after a timeout per group
        else:
            try:
                self._commit(kind, group)
            except _Unreachable:
                error = self._refused()
            except BaseException as e:
                error = self._failed(e, len(group))
            else:
                self._recovered()
        for g in group:
            assert g.loop is not None and g.future is not None
            post(g.loop, _resolve, g.future, error)
        return error is None

    def _hold_rewrites(self, group: list[_Op]) -> None:
        """Take ``_rewrite_lock`` for a group of deletes or updates (a compaction step in
        progress would fail on them: they wait for it to end). Meanwhile the Stores queued
        behind them commit (a step is about a second, but a large fragment's rewrite on an
        object store holds them a minute at 1M rows), unless a write waiting before them
        names one of their ids: a Store of a memory just forgotten (an Import) lands after
        the Forget, as it was sent."""
        if self._rewrite_lock.acquire(blocking=False):
            return
        # The ids of the writes that wait (these, and those taken off the queue before)
        blocked = {i for g in group for i in _op_ids(g)}
        staying: collections.deque[_Op | None] = collections.deque()
        passing: list[_Op] = []
        for op in self._deferred:  # taken before: in order, Stores among them may go too
            if not self._passes(op, blocked, passing):
                staying.append(op)
        self._deferred = staying
        while True:
            if passing:
                self._pass(passing)
                passing = []
                if self._rewrite_lock.acquire(blocking=False):
                    return
            elif self._rewrite_lock.acquire(timeout=PASS_POLL_SECONDS):
                return
            # what was queued since, in order, up to max_batch rows of Stores going ahead
            size = 0
            while size < self.max_batch and not (self._deferred and self._deferred[-1] is None):
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is not None and self._passes(nxt, blocked, passing):
                    size += nxt.size
                else:
                    self._deferred.append(nxt)  # (None: stop; nothing comes after it)

    def _passes(self, op: _Op | None, blocked: set[str], passing: list[_Op]) -> bool:
        """Whether ``op`` goes ahead of the writes that wait (appended to ``passing``): a
        Store naming none of the ids in ``blocked``; else its ids join ``blocked``."""
        if op is None:
            return False
        ids = _op_ids(op)
        if op.kind == "add" and blocked.isdisjoint(ids):
            passing.append(op)
            return True
        blocked.update(ids)
        return False

    def _pass(self, passing: list[_Op]) -> None:
        """Commit Stores going ahead of a held delete or update."""
        self.passed_stores += len(passing)
        if self._commit_group("add", passing):
            self._untrimmed += sum(op.size for op in passing)

    def _maybe_drop_caches(self) -> None:
        """Drop LanceDB's caches once a burst of writes (or a compaction, or a cleanup)
        is over: they hold what the burst's versions left (their manifests, transactions
        and files' metadata, ~18 entries per commit), read again at most once, by the next
        cleanup. LanceDB has no call to clear them, so the tables are opened again through
        a new session (on the writer thread, idle: no write and no compaction runs; a
        reader on another thread keeps its old table object, at the same version, until it
        returns). A local store only: a shared one's handles follow the others' commits."""
        if (
            self._lease is not None
            or self._shared
            or self._compacting
            or self._session.size_bytes <= CACHE_DROP_BYTES
            or self._drop_failed_at == self.commits
        ):
            return
        try:
            session, db = self._connect()
            table = db.open_table(self._table_name)
            access = None if self._access is None else db.open_table(self._access_name)
            keys = None if self._keys is None else db.open_table(self._keys_name)
        except Exception:  # keep the handles (and caches) there are
            log.exception("reopening the tables with fresh LanceDB caches failed")
            self._drop_failed_at = self.commits  # not again before the next commit
            return
        self._session, self._db, self._table = session, db, table
        self._access, self._keys = access, keys
        self.cache_drops += 1
        self._untrimmed += 1  # the caches' memory is free now: hand its pages back

    def _settle_due(self, now: float) -> bool:
        """Whether the last trim after a burst is due: ``SETTLE_TRIM_SECONDS`` after its
        last commit and after the end of any compaction (both set ``_settle_at``)."""
        return self._settle_at is not None and not self._compacting and now >= self._settle_at

    def _trim_heap(self) -> None:
        """Hand the pages the commits freed back to the system (``storage.heap``): on the
        Store path nothing else does (10k Stores left 26-61 MiB of them resident,
        bench/store_rss.py)."""
        self._untrimmed = 0
        self._trimmed_at = time.monotonic()
        heap.release_free_pages()
        self.heap_trims += 1

    def _failed(self, error: BaseException, ops: int) -> BaseException:
        """What the callers of a failed commit get: StorageFull for a full disk (logged
        once, as one line, when it starts), StoreUnavailable for an object store that does
        not answer, else the error itself (logged in full)."""
        if self._local_dir is None and store_unreachable(error):
            return self._unreachable_now(error)
        if not no_space(error):
            log.error("write of %d op(s) failed", ops, exc_info=error)
            return error
        if self.fault is None:
            log.warning(
                "no space left on device under %s: writes are refused until space is freed "
                "(acknowledged memories are kept; reads go on)",
                self.uri,
            )
        if self.fault is None:
            self._free_at_fault = self._free_bytes()
        # Callers see no path: the server's file layout is none of their business.
        self.fault = "no space left on device: the disk holding memoryd's data is full"
        return StorageFull(
            f"{self.fault}, so nothing was written; memories already acknowledged are kept. "
            "Free space on that disk and retry: memoryd resumes writing by itself"
        )

    def _recovered(self) -> None:
        self._unreachable = False
        self._probe_backoff = PROBE_FIRST_SECONDS
        if self.fault is not None:
            self.fault = None
            log.warning("writes succeed again under %s", self.uri)

    def _unreachable_now(self, error: BaseException) -> StoreUnavailable:
        cause = unreachable_cause(error)
        if not self._unreachable:
            log.warning(
                "the object store %s cannot be reached (%s): writes are refused until it "
                "answers (acknowledged memories are kept; reads go on from memory): %s",
                self.uri,
                cause,
                damage.short_error(error),
            )
        self._unreachable = True
        self._probe_backoff = PROBE_FIRST_SECONDS
        self._probe_at = time.monotonic() + self._probe_backoff
        # The store's URI names no secret (credentials come from the environment).
        self.fault = f"the object store {self.uri} cannot be reached ({cause})"
        return self._refused()

    def _refused(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"{self.fault}, so nothing was written; memories already acknowledged are kept "
            "and reads go on. memoryd retries the store by itself: retry the write shortly"
        )

    def _probe_store(self) -> bool:
        """While the object store is unreachable, when a probe is due (backing off from
        PROBE_FIRST_SECONDS to PROBE_MAX_SECONDS): does it answer again? Reading the
        newest manifest is the probe (what every commit starts with)."""
        if time.monotonic() < self._probe_at:
            return False
        try:
            if self._probe_db is None:  # one try a probe: the backoff is ours
                options = {**self.storage_options, **PROBE_OPTIONS}
                self._probe_db = lancedb.connect(self.uri, storage_options=options)
            self._probe_db.open_table(self._table_name)
        except Exception as e:
            if store_unreachable(e):
                self.fault = (
                    f"the object store {self.uri} cannot be reached ({unreachable_cause(e)})"
                )
            self._probe_backoff = min(self._probe_backoff * 2, PROBE_MAX_SECONDS)
            self._probe_at = time.monotonic() + self._probe_backoff
            return False
        self._recovered()
        return True

    def _free_bytes(self) -> int | None:
        """Free bytes on the store's disk (None for object stores, or when unknown)."""
        if self._local_dir is None:
            return None
        try:
            return shutil.disk_usage(self._local_dir).free
        except OSError:
            return None

    def _probe_space(self) -> None:
        """While writes fail for lack of space: has space been freed since?"""
        free = self._free_bytes()
        if free is None or self._free_at_fault is None:
            return  # the next write tells
        if free >= self._free_at_fault + SPACE_FREED_BYTES:
            self._recovered()

    def _commit(self, kind: str, group: list[_Op]) -> None:
        if kind == "access":  # another table: neither waits for nor counts toward compaction
            self._append_access([e for g in group for e in g.access])
            return
        if kind == "keys":
            self._append_keys([r for g in group for r in g.keys])
            return
        if kind == "add":
            self._commit_rows(kind, group)
        else:  # would make a compaction in progress fail: wait for it to end
            self._hold_rewrites(group)
            try:
                if self._unreachable:  # found so by a Store that went ahead meanwhile
                    raise _Unreachable
                self._commit_rows(kind, group)
                self._deleting_commits += 1
            finally:
                self._rewrite_lock.release()
        self.commits += 1
        self._commits_since_compact += 1
        self._last_write = time.time()

    def _commit_rows(self, kind: str, group: list[_Op]) -> None:
        # Held across the commit and its report: the follower lists the table's versions
        # only between local commits, so every local version it sees was reported.
        with self.commit_lock:
            self._write_rows(kind, group)

    def _write_rows(self, kind: str, group: list[_Op]) -> None:
        if kind == "delete":
            ids = [i for g in group for i in g.ids]
            if not ids:
                return
            version = self._table.delete(id_filter(ids)).version
        else:
            rows = [r for g in group for r in g.rows]
            if kind == "update":
                # One id updated twice in a group: the later state wins (merge_insert
                # refuses two source rows for one target).
                rows = list({r[0].id: r for r in rows}.values())
            data = to_arrow(self.schema, rows)
            if kind == "add":
                version = self._table.add(data).version
            else:
                version = (
                    self._table.merge_insert("id").when_matched_update_all().execute(data).version
                )
            self.rows_written += len(rows)
            ids = [r[0].id for r in rows]
        if self.on_commit is not None:
            self.on_commit(ids, version)

    def _append_access(self, entries: list[Access]) -> None:
        if not entries:
            return
        ids, counts, last = zip(*entries, strict=True)
        data = pa.Table.from_arrays(
            [
                pa.array(ids, pa.string()),
                pa.array(counts, pa.int64()),
                pa.array(last, ACCESS_SCHEMA.field("last_accessed_at").type),
            ],
            schema=ACCESS_SCHEMA,
        )
        if self._access is None:
            self._access = self._create(self._access_name, ACCESS_SCHEMA)
        try:
            self._access.add(data)
        except Exception as e:
            if self._lease is None or not _OVERWRITTEN.search(str(e)):
                raise
            # Another daemon folded the log (an overwrite) since this handle's version:
            # an append cannot rebase over that; onto the folded log it can.
            self._access.checkout_latest()
            self._access.add(data)
        self._access_rows += len(entries)
        self._access_commits += 1
        due = (
            self._access_rows >= self._access_fold_at or self._access_commits >= ACCESS_FOLD_COMMITS
        )
        if due and self._may_maintain():
            self._fold_access()

    def _append_keys(self, records: list[KeyRecord]) -> None:
        columns = list(
            zip(
                *(
                    (
                        r.agent_id,
                        r.key,
                        r.memory_id,
                        int(r.outcome),
                        r.content_hash,
                        r.scope,
                        r.score,
                        r.at,
                    )
                    for r in records
                ),
                strict=True,
            )
        )
        data = pa.Table.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, KEYS_SCHEMA, strict=True)],
            schema=KEYS_SCHEMA,
        )
        if self._keys is None:
            self._keys = self._create(self._keys_name, KEYS_SCHEMA)
        self._keys.add(data)
        self._keys_commits += 1
        # One fragment per append; a shared store's keys table is the lease holder's job.
        if self._keys_commits % KEYS_COMPACT_COMMITS == 0 and self._maintains_locally():
            try:
                self._drop_lapsed_keys(self._keys)
                self._keys.optimize(cleanup_older_than=self.keep_versions)
            except Exception:  # an optimisation: the records are all there either way
                log.exception("compacting the idempotency key table failed")

    def _drop_lapsed_keys(self, table: Any) -> None:
        """Delete the records of keyed Stores that created nothing made more than
        ``key_window`` ago (their keys lapsed: Repository.key_record), before a compaction
        of the keys table rewrites it without them."""
        if self.key_window is None:
            return
        cutoff = datetime.now(UTC) - self.key_window
        lapsed = (
            f"outcome != {int(StoreOutcome.CREATED)}"
            f" AND at < TIMESTAMP '{cutoff.strftime('%Y-%m-%d %H:%M:%S')}'"
        )
        # A delete that matches nothing still commits a version, which on a shared store
        # makes the keys table's cleanup due again keep_versions later (and so for ever).
        if table.count_rows(lapsed):
            table.delete(lapsed)

    def _fold_access(self) -> None:
        """Rewrite the access log as one entry per id (on the writer thread, so no append
        can slip in between the read and the overwrite)."""
        try:
            if self._access is None:  # made by another daemon since this one started
                self._access = self._open(self._access_name)
            if self._lease is not None:  # other daemons append too: fold what is there now
                self._access.checkout_latest()
            folded = _fold(self._access.to_arrow())
            self._access = self._db.create_table(self._access_name, folded, mode="overwrite")
            self._access.optimize(cleanup_older_than=self._older_than(self._access) or KEEP_ALL)
        except Exception:  # the log is still whole; fold again after the next appends
            log.exception("folding the access log failed")
            self._access_commits = 0
            return
        self._access_rows = folded.num_rows
        self._access_commits = 0
        self._access_fold_at = max(self.access_fold_rows, 2 * folded.num_rows)
        self.access_folds += 1

    def _maybe_compact(self, *, idle: bool = False) -> None:
        """Ask for a compaction (which drops old versions too) after ``compact_every``
        commits once the writer is idle, or after ``COMPACT_FORCE_FACTOR`` times that many
        under sustained writes (then a delete or update may wait for it, which beats
        thousands of fragments slowing every later commit); and, when idle, once old
        versions are due to go (``_versions_due``)."""
        due = self._commits_since_compact >= self.compact_every or self._retry_when_idle
        overdue = self._commits_since_compact >= self.compact_every * COMPACT_FORCE_FACTOR
        if self.fault is not None or self._compacting:
            return  # compaction needs room for a rewritten copy of the table
        if time.monotonic() < self._compact_retry_at:
            return  # the last one failed: not again so soon
        if not self._may_maintain():
            return
        if self._lease is not None:  # shared: judged from the table, not our own commits
            now = time.monotonic()
            if now >= self._shared_check_at:
                self._shared_check_at = now + SHARED_MAINTAIN_CHECK_SECONDS
                self._compacting = True
                self._compact_due.set()
            return
        if (
            not (due and idle)
            and not self._more_to_compact
            and not (overdue and self._queue.empty() and not self._deferred)
            and not (idle and self._versions_due())
        ):
            return
        self._commits_since_compact = 0
        self._retry_when_idle = False
        self._compacting = True
        self._compact_due.set()

    def _versions_due(self) -> bool:
        """Whether old versions are due to go: with nothing new to compact, once they are
        ``keep_versions`` old (a cleanup alone, cheap); with commits to compact (a rewrite
        of the small fragments), once ``cleanup_every`` has passed since the last one; and
        once a purge is due (``_purge_due``)."""
        if self._purge_due():
            return True  # a deleted row's text is never left on disk for good
        if self._long_reads:
            return False  # (long_read) they go at the first cleanup after it
        if (
            self._purge_ended > self._cleaned_upto
            and time.time() - self._purge_ended >= self.keep_versions.total_seconds()
        ):
            # the versions the last purge replaced go keep_versions after it, whatever was
            # committed since (a Store after it kept them until cleanup_every otherwise)
            return True
        if self._last_write <= self._cleaned_upto:
            return False  # only the newest version is left (LanceDB always keeps it)
        now = time.time()
        if self._commits_since_compact == 0:
            return now - self._last_write >= self.keep_versions.total_seconds()
        return now - self._last_cleanup >= self.cleanup_every

    def _purge_due(self) -> bool:
        """Whether deletes or updates were committed since the last purge began (or since
        the store was opened) and that was ``purge_every`` ago (or one is under way)."""
        return self._purging is not None or (
            self._deleting_commits > self._purged_upto
            and time.monotonic() - self._purged_at >= self.purge_every
        )

    def _optimize_memories(
        self, table: Any, older_than: timedelta | None, *, purge_found: bool = False
    ) -> bool:
        """Compact the memories' table (fragments under ``COMPACT_TARGET_ROWS`` merged, on
        one thread; fragments with deleted rows too, ``purge_every`` apart), then
        delete the versions replaced more than ``older_than`` ago (None: none; with the
        lease, exactly those replaced more than ``keep_versions`` ago). Whether it
        rewrote any fragment. ``purge_found``: begin a purge (deleted rows another daemon
        left, seen by the shared store's pass). The callers hold ``_rewrite_lock`` (this
        daemon's deletes and updates wait); its appends wait for the commit alone: Lance
        rebases a rewrite over the appends committed since its plan.

        Through pylance (LanceDB's Python API takes no compaction target): a second Lance
        runtime in the process, ~20 MiB of RSS at import and some 30 MiB more once it has
        run. Imported here, so a process that never compacts (reembed's source, a daemon
        with maintenance off or without the lease) does not pay for it."""
        from lance.optimize import Compaction

        ds = table.to_lance(**self._caches())
        options: CompactionOptions = {
            "target_rows_per_fragment": COMPACT_TARGET_ROWS,
            "num_threads": 1,
        }
        if self._purging is None and (purge_found or self._purge_due()):
            # the callers hold _rewrite_lock: no delete or update commits meanwhile
            dirty = {f.fragment_id for f in ds.get_fragments() if f.metadata.deletion_file}
            self._purging = (time.monotonic(), self._deleting_commits, dirty)
        purge = self._purging is not None
        scope = self._purging[2] if self._purging is not None else set()
        if purge:
            options["materialize_deletions_threshold"] = 0.0  # any deleted row

        def in_scope(task: Any) -> bool:
            return any(f.id in scope for f in task.fragments)

        self._more_to_compact = False  # set again below once this step has committed
        plan = Compaction.plan(ds, options)
        tasks = list(plan.tasks)
        if purge:  # the round's own fragments first
            tasks.sort(key=lambda t: not in_scope(t))
        rewrites: list[Any] = []
        rows = 0
        lone = False  # this step is one large rewrite run beside deletes and updates
        large = False  # ... or one holding them off after refusals (or on an object store)
        for task in tasks:  # one step: about COMPACT_STEP_ROWS rows, at least a task
            task_rows = sum(f.physical_rows for f in task.fragments)
            if rewrites and (rows >= COMPACT_STEP_ROWS or task_rows > LONE_TASK_ROWS):
                break  # (a large one goes alone in its step)
            large = task_rows > LONE_TASK_ROWS
            # (not on an object store: a refused rewrite's files, a copy of rows just
            # forgotten, could not be deleted at once and would stay 7 days)
            if large and self._local_dir is not None and self._lone_refusals < LONE_TASK_TRIES:
                lone = True
                self._rewrite_lock.release()  # held by the caller
                try:
                    rewrites.append(task.execute(ds))
                finally:
                    self._rewrite_lock.acquire()
                rows += task_rows
                break
            rewrites.append(task.execute(ds))
            rows += task_rows
            if large:
                break  # (held: alone in its step too)
        left = tasks[len(rewrites) :]
        more = any(map(in_scope, left)) if purge else bool(left)
        if rewrites:
            with self.commit_lock:
                ds = ds.checkout_version(ds.latest_version)
                try:
                    Compaction.commit(ds, rewrites, options)
                except OSError as e:
                    refused = _CONCURRENT_WRITERS.search(str(e)) is not None
                    if refused and self._local_dir is not None:
                        # Never to be committed (one holding this daemon's deletes off too:
                        # on a shared directory another daemon's Forget refuses it): a copy
                        # of rows just forgotten, gone now rather than 7 days in no version.
                        self._delete_new_files(ds, rewrites)
                    if not (lone and refused):
                        raise
                    self._lone_refused(rewrites[0], e)
                    self._more_to_compact = True  # the next step tries it again
                    return False
                table.checkout_latest()
            if large:  # committed, beside them or after the refusals holding them off
                self._lone_refusals = 0
        self._more_to_compact = more  # (a step that failed asks for no next one)
        if self._purging is not None and not more:
            self._purged_at, self._purged_upto, _ = self._purging
            self._purging = None
            self._purge_ended = time.time()
            self._purge_version = ds.latest_version
            self._sweep_at = self._purge_ended + self.keep_versions.total_seconds()
            self._sweep_owed = True  # (a long read may put its cleanup off to a later pass)
        if older_than is not None:
            latest = ds.checkout_version(ds.latest_version)
            if self._lease is not None:
                # Other daemons read it: exactly the versions replaced more than
                # keep_versions ago go (older_than only said that some are).
                stamps = version_stamps(latest)
                due = replaced_versions(stamps, self.keep_versions, time.time())
                if due:
                    latest.cleanup_old_versions(versions=due)
                gone = set(due)
                if all(n in gone for n, _ in stamps if n < self._purge_version):
                    # every version the last purge replaced (with the texts it purged)
                    self._swept_version = max(self._swept_version, self._purge_version)
            elif self._sweep_owed and not self._shared:
                # This daemon is the store's only writer (a local directory other daemons do
                # not follow: shared, they may have files written and not yet committed,
                # whose commit would then name files gone): files no version lists are those of
                # rewrites never committed (a crash, a full disk), which may hold copies of
                # rows forgotten since; Lance keeps them 7 days unless told. Appends write
                # their files under commit_lock, so none is deleted before its commit.
                with self.commit_lock:
                    latest.cleanup_old_versions(older_than, delete_unverified=True)
                self._sweep_owed = False
            else:
                latest.cleanup_old_versions(older_than)
        return bool(rewrites)

    @staticmethod
    def _delete_new_files(ds: Any, rewrites: list[Any]) -> None:
        """The files of rewrites whose commit Lance refused, on a local disk (the copy of
        a fragment each, 13 GB at 1M rows, and of the rows forgotten meanwhile)."""
        data = Path(ds.uri) / "data"
        for rewrite in rewrites:
            for fragment in rewrite.new_fragments:
                for f in fragment.files:
                    with contextlib.suppress(FileNotFoundError):
                        (data / f.path).unlink()

    def _lone_refused(self, rewrite: Any, error: Exception) -> None:
        """A large rewrite run beside deletes and updates whose commit Lance refused (one
        of them landed on its fragment; its files are deleted): the next step tries it
        again, and the next after ``LONE_TASK_TRIES`` in a row holds them off."""
        self._lone_refusals += 1
        self.lone_refusals += 1
        log.info(
            "a rewrite of %d rows beside deletes and updates was refused (%d in a row; "
            "the next one holds them off after %d): %s",
            sum(f.physical_rows for f in rewrite.original_fragments),
            self._lone_refusals,
            LONE_TASK_TRIES,
            str(error).split(",")[0],
        )

    def _compact_forever(self) -> None:
        while True:
            self._compact_due.wait()
            self._compact_due.clear()
            if self._stopping:
                return
            if self._lease is not None:
                self._maintain_shared()
                continue
            started = time.perf_counter()
            wall = time.time()
            try:
                # A long read (long_read) still needs its version's files: none deleted
                older_than = None if self._long_reads else self.keep_versions
                with self._rewrite_lock:
                    rewrote = self._optimize_memories(self._table, older_than)
                if older_than is not None:
                    self._last_cleanup = wall
                    self._cleaned_upto = wall - self.keep_versions.total_seconds()
                if rewrote:
                    # Lance dates a version by its own commit: those this compaction
                    # committed, or found younger than keep_versions, go at the next cleanup.
                    self._last_write = max(self._last_write, time.time())
                self.compactions += 1
                log.debug("compacted in %.2fs", time.perf_counter() - started)
                # A compaction reads and rewrites fragments: its buffers are free now.
                heap.release_free_pages()
                self._compact_backoff = 0.0
            except Exception as e:  # compaction is an optimisation; never fail writes over it
                postponed = _CONCURRENT_WRITERS.search(str(e)) is not None
                if not postponed:  # not again so soon (a full disk stays full a while)
                    self._compact_backoff = min(
                        max(2 * self._compact_backoff, COMPACT_RETRY_FIRST_SECONDS),
                        COMPACT_RETRY_MAX_SECONDS,
                    )
                    self._compact_retry_at = time.monotonic() + self._compact_backoff
                if no_space(e):
                    log.warning("background compaction skipped: no space left on device")
                elif postponed:
                    # Appends kept committing while it ran (a bulk import): Lance gave up
                    # rebasing the rewrite on them. Nothing is lost; it runs again once
                    # writes pause.
                    self._retry_when_idle = True
                    log.warning(
                        "background compaction postponed: Stores kept committing while it ran; "
                        "it runs again once writes pause"
                    )
                else:
                    log.exception("background compaction failed")
            finally:
                # the last trim after a burst counts from a compaction's end too
                self._settle_at = time.monotonic() + SETTLE_TRIM_SECONDS
                self._compacting = False

    # -- maintenance of a store several daemons share --------------------------------

    def _may_maintain(self) -> bool:
        """Whether this daemon compacts and cleans up now (see ``maintenance``)."""
        if self.maintenance == "off":
            return False
        return self._lease is None or self._lease.held()

    def maintains(self) -> bool:
        """Whether this daemon compacts and cleans up the store now."""
        return self._may_maintain()

    def _maintains_locally(self) -> bool:
        return self._lease is None and self.maintenance != "off"

    def _older_than(self, table: Any) -> timedelta | None:
        """Cleanup's ``older_than`` for ``table``: ``keep_versions`` for a local directory
        (this daemon is its only reader), else ``safe_older_than`` (None: nothing due)."""
        if self._lease is None:
            return self.keep_versions
        stamps = version_stamps(table.to_lance(**self._caches()))
        return safe_older_than(stamps, self.keep_versions, time.time())

    def _maintain_shared(self) -> None:
        """The lease holder's pass over a shared store: compact the memories' table once
        ``compact_every`` small fragments piled up (whoever wrote them), the keys table once
        ``KEYS_COMPACT_COMMITS`` did, and delete the versions of each that were replaced more
        than ``keep_versions`` ago (``replaced_versions``, ``safe_older_than``), the
        memories' also ``keep_versions`` after a purge. Appends of every daemon go on
        meanwhile (Lance rebases an append over a compaction and the reverse)."""
        try:
            existing = self._db.list_tables().tables
            for name, compact_at in (
                (self._table_name, self.compact_every),
                (self._keys_name, KEYS_COMPACT_COMMITS),
                (self._access_name, None),  # folded by the writer (it owns the appends)
            ):
                if name not in existing or not self._may_maintain():
                    continue
                table = self._db.open_table(name)  # the newest version, whoever wrote it
                deleted = False  # a fragment with deleted rows (any daemon's Forgets)
                if name == self._table_name:  # small by our compaction's measure
                    ds = table.to_lance(**self._caches())
                    # (whether any is due: the cleanup deletes exactly those, by number)
                    due = replaced_versions(version_stamps(ds), self.keep_versions, time.time())
                    older_than = self.keep_versions if due else None
                    frags = [f.metadata for f in ds.get_fragments()]
                    small = sum(f.physical_rows < COMPACT_TARGET_ROWS for f in frags)
                    deleted = any(f.deletion_file is not None for f in frags)
                else:
                    older_than = self._older_than(table)
                    # A dict at run time, typed as a class: read as one.
                    stats: dict[str, Any] = table.stats()  # type: ignore[assignment]
                    small = int(stats["fragment_stats"]["num_small_fragments"])
                if name == self._access_name:
                    # Every daemon appends to the access log; its holder folds it (on the
                    # writer thread, which owns this daemon's appends) when it grew.
                    self._fold_requested = int(stats["num_rows"]) >= self._access_fold_at
                # LanceDB cleans up only as part of optimize, which also compacts whatever
                # small fragments there are: so a cleanup alone runs when there is nothing
                # to compact, else with a compaction (due by count, or cleanup_every).
                last = self._optimized_at.get(name, 0.0)
                purge = deleted and time.monotonic() - self._purged_at >= self.purge_every
                if compact_at is not None and small >= compact_at:
                    why = f"{small} small fragments"
                elif name == self._table_name and (self._more_to_compact or self._purging):
                    why = "the rest of the last compaction"
                elif purge:
                    why = "deleted rows to purge"
                elif (
                    name == self._table_name
                    and older_than is not None
                    and self._purge_version > self._swept_version
                    and time.time() >= self._sweep_at
                ):
                    # their files hold the texts purged: not left for cleanup_every (and
                    # if some are not yet due, a clock ahead: looked for again in a while)
                    self._sweep_at = time.time() + SWEEP_RETRY_SECONDS
                    why = "the versions the last purge replaced"
                elif older_than is not None and small <= 1:
                    why = "old versions (nothing to compact)"
                elif older_than is not None and time.time() - last >= self.cleanup_every:
                    why = f"old versions ({self.cleanup_every:.0f} s since the last)"
                else:
                    continue
                if name == self._table_name:
                    with self._rewrite_lock:
                        rewrote = self._optimize_memories(table, older_than, purge_found=purge)
                else:
                    if name == self._keys_name:
                        self._drop_lapsed_keys(table)
                    table.optimize(cleanup_older_than=older_than or KEEP_ALL)
                    rewrote = small > 1
                self._optimized_at[name] = time.time()
                if rewrote:
                    self.compactions += 1
                if older_than is not None:
                    self.cleanups += 1
                log.debug("optimized %s: %s", name, why)
        except Exception as e:  # an optimisation: never fail writes over it
            if _CONCURRENT_WRITERS.search(str(e)):
                log.info("shared-store maintenance postponed: another commit conflicted with it")
            elif store_unreachable(e):
                log.info("shared-store maintenance skipped: %s", unreachable_cause(e))
            else:
                log.exception("shared-store maintenance failed")
        finally:
            self._compacting = False


def access_from_arrow(log_table: pa.Table) -> dict[str, tuple[int, datetime | None]]:
    """Access-log rows folded: per id, the highest count and the latest access."""
    folded = _fold(log_table)
    ids = folded.column("id").to_pylist()
    counts = folded.column("access_count").to_pylist()
    last = _datetimes(folded.column("last_accessed_at"))
    return {i: (c, t) for i, c, t in zip(ids, counts, last, strict=True)}


def keys_from_arrow(t: pa.Table) -> list[KeyRecord]:
    """Rows of the idempotency key table as records."""
    cols = [t.column(n).to_pylist() for n in KEYS_SCHEMA.names[:-1]]
    at = _datetimes(t.column("at"))
    return [
        KeyRecord(a, k, m, StoreOutcome(o), h, s, float(sc), when or datetime.now(UTC))
        for a, k, m, o, h, s, sc, when in zip(*cols, at, strict=True)
    ]


def _fold(log_table: pa.Table) -> pa.Table:
    """One row per id: its highest access count and its latest access."""
    grouped = log_table.group_by("id").aggregate(
        [("access_count", "max"), ("last_accessed_at", "max")]
    )
    return pa.Table.from_arrays(
        [
            grouped.column("id"),
            grouped.column("access_count_max"),
            grouped.column("last_accessed_at_max").cast(
                ACCESS_SCHEMA.field("last_accessed_at").type
            ),
        ],
        schema=ACCESS_SCHEMA,
    )


class _Unreachable(Exception):
    """The object store stopped answering while a write waited (see ``_commit``)."""


def _op_ids(op: _Op) -> list[str]:
    """The memory ids a write names (its rows' or the ids it deletes)."""
    return [r[0].id for r in op.rows] if op.rows else list(op.ids)


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
