"""Following the shared store: what other daemons commit, into this daemon's hot index.

Several daemons over one ``storage.uri`` (an object store) each hold every memory in a hot
index of their own and write through a writer of their own; Lance's commit protocol keeps
the table whole, but without this a daemon's index would only ever see its own writes. So
every ``storage.follow_interval`` seconds (and before a Store decides it is new:
``catch_up``) the follower asks for the memories table's newest version (one listing) and,
when there is one, diffs its fragments against those it has applied:

- a fragment it has not seen (an append, an update's rewritten rows, a compaction's
  output): first its ``id`` and ``updated_at`` columns, then the whole rows of only the ids
  whose state the index does not hold already. A compaction, which rewrites the same rows
  into new fragments, costs a read of two columns, not of the vectors;
- a fragment whose deletions changed, or that is gone: its ``id`` column, compared with the
  ids it held. An id that vanished and is in no new fragment was deleted. So was an id this
  daemon wrote since the last round (its fragments are all new to the follower) that is in
  no new fragment: a delete or a compaction came before the follower saw its fragment.

Each look is a listing per table (an object store's LIST request): the memories and the
key tables every round, the access log every ``ACCESS_LOOK_SECONDS``. So the interval
trades lag for requests: at 0.25 s a daemon makes about 8 a second.

The access log and the idempotency-key table are followed by their new fragments alone:
both only grow (folding and compaction rewrite the same facts), and their rows merge by
maximum and by key, so reading one twice is harmless.

Applying never undoes a local write: the writer tells (``LanceStore.on_commit``) which ids
each local commit touched and the version it made; a followed version older than that
leaves the id as the index has it (a local delete is never resurrected, a newer local
update never overwritten). Reads run on a worker thread; the index changes on the event
loop, like every other change to it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from memoryd.core import tracing
from memoryd.core.records import FollowLag, KeyRecord, Memory
from memoryd.storage.lance_store import (
    LanceStore,
    Row,
    _datetimes,
    access_from_arrow,
    from_arrow,
    id_filter,
    keys_from_arrow,
)

log = logging.getLogger(__name__)

APPLY_BATCH = 512  # followed rows put into the index between two yields to the event loop
ACCESS_LOOK_SECONDS = 5.0  # the access log is looked at this often (one listing a look)


class FollowTarget(Protocol):
    """What the follower changes: the repository's hot index (on the event loop)."""

    def get(self, memory_id: str) -> Memory | None: ...

    def put_followed(self, memory: Memory, vector: np.ndarray, tokens: np.ndarray | None) -> None:
        """Insert or overwrite with a row another daemon committed."""

    def remove(self, memory_id: str) -> Memory | None: ...

    def put_key(self, record: KeyRecord) -> None: ...

    def merge_access(self, memory_id: str, count: int, last: datetime | None) -> None: ...


@dataclass(slots=True)
class _Changes:
    """One round's reading: what to apply, and the state it brings the follower to."""

    version: int
    rows: list[Row] = field(default_factory=list)
    gone: set[str] = field(default_factory=set)
    shapes: dict[int, tuple[int, int]] = field(default_factory=dict)
    fragment_ids: dict[int, pa.Array] = field(default_factory=dict)  # new or changed fragments
    access: dict[str, tuple[int, datetime | None]] = field(default_factory=dict)
    keys: list[KeyRecord] = field(default_factory=list)
    log_files: dict[str, set[str]] = field(default_factory=dict)  # "access"/"keys": files seen
    log_versions: dict[str, int] = field(default_factory=dict)


class Follower:
    def __init__(self, store: LanceStore, target: FollowTarget):
        self._store = store
        self._target = target
        self._datasets: dict[str, Any] = {}
        # Memories table: the version applied, each fragment's (rows, deleted rows) and ids.
        self.applied_version = 0
        self.latest_version = 0
        self._shapes: dict[int, tuple[int, int]] = {}
        self._ids: dict[int, pa.Array] = {}
        # Access log and key table: the version and the data files already read.
        self._log_versions: dict[str, int] = {}
        self._log_files: dict[str, set[str]] = {"access": set(), "keys": set()}
        self._access_looked = float("-inf")
        # id -> version of this daemon's latest commit touching it, until applied past it.
        self._written: dict[str, int] = {}
        self._written_lock = threading.Lock()
        self._lock = asyncio.Lock()
        self._rounds_started = 0
        self._rounds_done = 0
        self._last_success: float | None = None
        self._failing = False
        self.failing_since: float | None = None  # monotonic start of the first failed round
        store.on_commit = self._committed

    # -- start -------------------------------------------------------------------------

    def baseline(self, version: int) -> None:
        """Take the memories table at ``version`` (at most the one the index was loaded
        from: the first round reads from there, a row read twice is no harm) with its
        fragments and their ids. Blocks: call it off the event loop, before the writer
        starts."""
        self._datasets = self._store.datasets()
        ds = self._datasets["memories"] = self._datasets["memories"].checkout_version(version)
        fragments = ds.get_fragments()
        self._shapes = {f.fragment_id: _shape(f) for f in fragments}
        self._ids = _ids_by_fragment(ds, fragments) if fragments else {}
        self.applied_version = self.latest_version = int(ds.version)
        self._last_success = time.monotonic()

    def _committed(self, ids: list[str], version: int) -> None:
        """A local commit (on the writer thread): remember which version to be newer than."""
        with self._written_lock:
            for memory_id in ids:
                self._written[memory_id] = max(version, self._written.get(memory_id, 0))

    # -- rounds --------------------------------------------------------------------------

    async def follow(self) -> None:
        """Apply what was committed up to now (at least: a round that starts after this
        call). Concurrent calls share rounds; one with nothing new costs one listing."""
        wanted = self._rounds_started + 1
        async with self._lock:
            if self._rounds_done >= wanted:
                return
            self._rounds_started += 1
            number = self._rounds_started
            started = time.perf_counter()
            try:
                changes = await asyncio.to_thread(self._read)
            except Exception as e:
                if not self._failing:
                    log.warning("following the shared store failed (retrying): %s", e)
                    self._failing = True
                    self.failing_since = time.monotonic() - (time.perf_counter() - started)
                return
            finally:
                self._rounds_done = number
            if changes is not None:
                # A root span per round that brought something (an empty look makes none).
                with tracing.span(
                    "follow",
                    versions=changes.version - self.applied_version,
                    rows=len(changes.rows),
                    gone=len(changes.gone),
                    read_ms=round((time.perf_counter() - started) * 1000, 3),
                ):
                    await self._apply(changes)
            if self._failing:
                log.warning("following the shared store works again")
                self._failing = False
                self.failing_since = None
            self._last_success = time.monotonic()

    def failing_for(self) -> float:
        """Seconds since the first of the rounds that have failed in a row, counted from
        that round's start (0.0: the last round succeeded)."""
        since = self.failing_since
        return 0.0 if since is None else time.monotonic() - since

    def lag(self) -> FollowLag:
        since = None if self._last_success is None else time.monotonic() - self._last_success
        return FollowLag(self.applied_version, self.latest_version, since)

    # -- reading (worker thread) ----------------------------------------------------------

    def _read(self) -> _Changes | None:
        if len(self._datasets) < 3:  # the access or key table is made by its first write
            opened = self._store.datasets()
            for what, ds in opened.items():
                self._datasets.setdefault(what, ds)
        changes: _Changes | None = None
        ds = self._datasets["memories"]
        with self._store.commit_lock:  # no local commit half reported (see _read_memories)
            latest = int(ds.latest_version)
        self.latest_version = max(self.latest_version, latest)
        if latest != self.applied_version:
            ds = self._datasets["memories"] = ds.checkout_version(latest)
            changes = self._read_memories(ds, latest)
        for what in ("access", "keys"):
            log_ds = self._datasets.get(what)
            if log_ds is None:
                continue
            if what == "access":  # it changes with each daemon's flush (once a minute)
                if time.monotonic() - self._access_looked < ACCESS_LOOK_SECONDS:
                    continue
                self._access_looked = time.monotonic()
            log_latest = int(log_ds.latest_version)
            if log_latest == self._log_versions.get(what):
                continue
            log_ds = self._datasets[what] = log_ds.checkout_version(log_latest)
            changes = changes or _Changes(self.applied_version)
            self._read_log(what, log_ds, changes)
            changes.log_versions[what] = log_latest
        return changes

    def _read_memories(self, ds: Any, version: int) -> _Changes:
        changes = _Changes(version)
        fragments = ds.get_fragments()
        changes.shapes = {f.fragment_id: _shape(f) for f in fragments}
        new = [f for f in fragments if f.fragment_id not in self._shapes]
        changed = [
            f
            for f in fragments
            if f.fragment_id in self._shapes and self._shapes[f.fragment_id] != _shape(f)
        ]
        arrived: set[str] = set()
        if new:
            head = ds.scanner(
                columns=["id", "updated_at", "content_hash"], fragments=new, with_row_address=True
            ).to_table()
            changes.fragment_ids.update(_split_by_fragment(head))
            ids = head.column("id").to_pylist()
            arrived = set(ids)
            stamps = _datetimes(head.column("updated_at"))
            hashes = head.column("content_hash").to_pylist()
            wanted = [
                i for i, at, h in zip(ids, stamps, hashes, strict=True) if not self._holds(i, at, h)
            ]
            if wanted:
                where = None if len(wanted) == len(ids) else id_filter(wanted)
                for batch in ds.scanner(fragments=new, filter=where).to_batches():
                    changes.rows.extend(from_arrow(batch))
        if changed:
            now = ds.scanner(columns=["id"], fragments=changed, with_row_address=True).to_table()
            current = _split_by_fragment(now)
            for f in changed:
                kept = current.get(f.fragment_id, pa.array([], pa.string()))
                changes.fragment_ids[f.fragment_id] = kept
                before = self._ids.get(f.fragment_id)
                if before is not None:
                    changes.gone |= set(before.to_pylist()) - set(kept.to_pylist())
        for fragment_id in self._shapes.keys() - changes.shapes.keys():
            before = self._ids.get(fragment_id)
            if before is not None:
                changes.gone |= set(before.to_pylist())
        # This daemon's own writes since the last round (all reported: the version was
        # listed under the store's commit lock): their fragments are new to the follower,
        # or gone already (a delete, a compaction) before it ever saw them.
        with self._written_lock:
            changes.gone |= {i for i, v in self._written.items() if v <= version}
        changes.gone -= arrived  # present: updated (moved to a new fragment) or kept
        return changes

    def _holds(self, memory_id: str, updated_at: datetime | None, digest: str) -> bool:
        """Whether the index holds this state of the memory already (a compaction's copy,
        or this daemon's own write). A read of the index off the loop: a stale answer
        only costs reading a row again."""
        memory = self._target.get(memory_id)
        return (
            memory is not None and memory.updated_at == updated_at and memory.content_hash == digest
        )

    def _read_log(self, what: str, ds: Any, changes: _Changes) -> None:
        fragments = ds.get_fragments()
        files = {f.fragment_id: _data_file(f) for f in fragments}
        new = [f for f in fragments if files[f.fragment_id] not in self._log_files[what]]
        changes.log_files[what] = set(files.values())
        if not new:
            return
        table = ds.scanner(fragments=new).to_table()
        if what == "access":
            for memory_id, (count, last) in access_from_arrow(table).items():
                known = changes.access.get(memory_id)
                if known is None or count > known[0]:
                    changes.access[memory_id] = (count, last)
        else:
            changes.keys.extend(keys_from_arrow(table))

    # -- applying (event loop) ------------------------------------------------------------

    async def _apply(self, changes: _Changes) -> None:
        """Apply a round, letting other tasks run every APPLY_BATCH rows (another daemon's
        bulk import must not stall this one's reads for seconds)."""
        version = changes.version
        with self._written_lock:
            written = dict(self._written)

        def newer_here(memory_id: str) -> bool:
            return written.get(memory_id, 0) > version

        target = self._target
        for n, (memory, vector, tokens) in enumerate(changes.rows, 1):
            if not newer_here(memory.id):
                target.put_followed(memory, vector, tokens)
            if n % APPLY_BATCH == 0:
                await asyncio.sleep(0)
                with self._written_lock:  # local writes made meanwhile
                    written = dict(self._written)
        for memory_id in changes.gone:
            if not newer_here(memory_id):
                target.remove(memory_id)
        for record in changes.keys:
            target.put_key(record)
        for memory_id, (count, last) in changes.access.items():
            target.merge_access(memory_id, count, last)
        self._log_files.update(changes.log_files)
        self._log_versions.update(changes.log_versions)
        if version != self.applied_version:
            for fragment_id in self._shapes.keys() - changes.shapes.keys():
                self._ids.pop(fragment_id, None)
            self._shapes = changes.shapes
            self._ids.update(changes.fragment_ids)
            self.applied_version = version
            with self._written_lock:
                for memory_id in [i for i, v in self._written.items() if v <= version]:
                    del self._written[memory_id]


def _shape(fragment: Any) -> tuple[int, int]:
    meta = fragment.metadata
    return int(meta.physical_rows), int(meta.num_deletions)


def _data_file(fragment: Any) -> str:
    files = fragment.metadata.files
    return str(files[0].path) if files else f"#{fragment.fragment_id}"


def _split_by_fragment(table: pa.Table) -> dict[int, pa.Array]:
    """The ``id`` column of a scan with row addresses, per fragment (the address's high
    32 bits)."""
    ids = table.column("id").combine_chunks()
    owner = table.column("_rowaddr").to_numpy() >> np.uint64(32)
    return {
        int(fragment_id): ids.filter(pa.array(owner == fragment_id))
        for fragment_id in np.unique(owner)
    }


def _ids_by_fragment(ds: Any, fragments: Iterable[Any]) -> dict[int, pa.Array]:
    table = ds.scanner(columns=["id"], fragments=list(fragments), with_row_address=True).to_table()
    return _split_by_fragment(table)
