"""The in-memory hot index: every memory, partitioned by scope, with its vector.

Each scope is a partition holding a contiguous float32 matrix of its vectors plus the
columns the filters need (category, expiry). A search scans only the partitions of the
scopes the caller may see: the access predicate is the set of partitions, applied before
any ranking, so another agent's rows are never scored. Deletes swap the last row into the
hole so matrices stay dense.

Vector top-k is an exact scan of float16 vectors (``topk_dot_q8_f16``: int8 codes
first, then the float16 rows of the rows that could be in the top k) with the filters
as a mask. A partition of
``ann_threshold`` rows or more also gets an approximate index (``ann.PartitionAnn``),
built on a background thread; once it is ready, searches ask it for a short list of rows
the mask allows and re-score that exactly, and fall back to the scan when it comes back
short (or when the filters leave too few rows for a graph walk to pay). Results only ever
contain rows the mask allows.

Listing pages by keyset: each partition keeps its rows in creation order ((created_at,
id), ``_Order``), so a page is a bisection to the previous page's last key and a walk of
the next rows, merged across the caller's scopes, rather than a sort of every visible
memory per page.

Records are never changed in place (``records.Memory`` is frozen): a write, a derived
link or an access count swaps in a new record, so whoever holds an old one keeps it as it
was when read.

Not thread-safe: the daemon touches it from the event loop thread only (an approximate
index's builder thread reads a partition's matrix; ``ann`` explains why that is safe).
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import itertools
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from memoryd_native import (
    quantize_rows,
    ranks_desc,
    topk_dot_f16,
    topk_dot_q8_f16,
    topk_scores,
    widen_rows,
)

from memoryd.core.records import (
    Candidates,
    Category,
    KeyRecord,
    Listing,
    Memory,
    StoreOutcome,
    with_access,
)
from memoryd.storage.ann import AnnSettings, AnnStatus, PartitionAnn
from memoryd.storage.lexical import (
    TRIGRAM_WEIGHT,
    Analyzer,
    LexicalPartition,
    bm25_touched,
    idf,
)
from memoryd.storage.token_file import TokenFile
from memoryd.storage.token_map import hash_bits, micros

_NO_EXPIRY = math.inf
_QUANTIZE_CHUNK = 8192  # rows quantised at once after a bulk load (a float32 copy each)
# trim_idle_rows leaves smaller slack alone (its copy would free under ~1.2 MB)
TRIM_MIN_UNUSED = 1024
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

# A row's place in creation order: created_at in microseconds since the epoch (exact, as
# datetimes are), then the id.
OrderKey = tuple[int, str]


def order_key(created_at: datetime, memory_id: str) -> OrderKey:
    return (created_at - _EPOCH) // _MICROSECOND, memory_id


# A target linked from more memories than this keeps its sources in a set (O(1) add and
# drop) rather than a tuple (rebuilt on each)
_BACKLINKS_AS_TUPLE = 8


class _Order:
    """A partition's rows sorted by ``OrderKey``, for keyset paging. New memories mostly
    come last (an append); a delete only marks its key dead, and dead keys are dropped in
    one pass once they are a quarter of the list, so deleting many rows costs no quadratic
    shifting. While bulk loading, keys are appended and sorted once at the end."""

    __slots__ = ("dead", "keys", "stale")

    def __init__(self) -> None:
        self.keys: list[OrderKey] = []
        self.dead: set[OrderKey] = set()
        self.stale = False  # appended unsorted (bulk load): sort() before reading

    def add(self, key: OrderKey) -> None:
        if key in self.dead:  # deleted and back (an import keeps ids): still in place
            self.dead.discard(key)
        elif self.stale or not self.keys or key > self.keys[-1]:
            self.keys.append(key)
        else:
            bisect.insort(self.keys, key)

    def remove(self, key: OrderKey) -> None:
        self.dead.add(key)
        if len(self.dead) > 64 and 4 * len(self.dead) > len(self.keys):
            self.keys = [k for k in self.keys if k not in self.dead]
            self.dead.clear()

    def sort(self) -> None:
        self.keys.sort()
        self.stale = False

    def after(self, key: OrderKey | None, descending: bool) -> Iterator[OrderKey]:
        """The live keys past ``key`` (not including it), in the listing's direction."""
        keys, dead = self.keys, self.dead
        if descending:
            start = len(keys) if key is None else bisect.bisect_left(keys, key)
            it: Iterable[OrderKey] = (keys[i] for i in range(start - 1, -1, -1))
        else:
            start = 0 if key is None else bisect.bisect_right(keys, key)
            it = itertools.islice(keys, start, None)
        return (k for k in it if k not in dead)


class _Partition:
    def __init__(self, dim: int):
        self.dim = dim
        # float16: half of float32's bytes; the scans widen them exactly (topk_dot_f16),
        # and a cosine moves by about 1e-4, far below what ranking notices
        self.vectors = np.zeros((16, dim), dtype=np.float16)
        self.expires = np.full(16, _NO_EXPIRY, dtype=np.float64)
        self.category = np.zeros(16, dtype=np.int8)
        self.created = np.zeros(16, dtype=np.float64)  # created_at, seconds since the epoch
        self.hidden = np.zeros(16, dtype=np.uint8)  # superseded: kept, never recalled
        # int8 codes of the vectors (quantize_rows): the exact scan reads these first
        self.codes = np.zeros((16, dim), dtype=np.int8)
        self.scales = np.zeros(16, dtype=np.float32)
        self.l1 = np.zeros(16, dtype=np.float32)
        # Where the row's token vectors are in the index's TokenFile (count -1: none)
        self.tok_off = np.zeros(16, dtype=np.int64)
        self.tok_n = np.full(16, -1, dtype=np.int32)
        # The row's state as the token map keeps it (``token_map.row_state``): updated_at
        # in microseconds, 64 bits of the content hash. A save while serving copies these
        # (one Python call a row for a million rows held the GIL for seconds: Recall p99
        # 212 ms), and a start compares them with the saved map's.
        self.updated_us = np.zeros(16, dtype=np.int64)
        self.hashes = np.zeros(16, dtype=np.uint64)
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.by_hash: dict[str, str] = {}
        self.lexical = LexicalPartition()
        self.ann: PartitionAnn | None = None  # told of every vector write and move
        self.codes_stale = False  # set while bulk loading: codes are made in one pass after
        self.record_bytes = 0  # texts and summaries of its memories
        self.rows_seen = 0  # its rows at the last look of trim_idle_rows
        self.order = _Order()  # its rows in creation order (listing)
        # Counts the changes a query's lexical leg depends on (rows, terms, what the mask
        # reads), so one worked out while the query's embedding ran is known still true.
        self.version = 0
        # The last filter mask without a category filter, reused while nothing changed and
        # no row's expiry falls between the time it was made and the query's time.
        self._mask: np.ndarray | None = None
        self._mask_from = 0.0
        self._mask_until = 0.0

    def __len__(self) -> int:
        return len(self.ids)

    def _grow(self) -> None:
        # By a quarter, not doubling: at 100k rows doubling leaves up to half the arrays
        # unused (~1 KB a row); copying a little more often costs far less than that.
        old = self.vectors.shape[0]
        self._resize(max(old + 16, old + old // 4))

    def trim(self, room: int = 64) -> None:
        """Shrink the row arrays to the rows held plus ``1/room`` of them (after a bulk
        load; or once Stores pause, ``HotIndex.trim_idle_rows``)."""
        n = len(self.ids)
        cap = max(16, n + n // room)
        if cap < self.vectors.shape[0]:
            self._resize(cap)

    def unused_rows(self) -> int:
        return self.vectors.shape[0] - len(self.ids)

    def _resize(self, cap: int) -> None:
        keep = min(cap, len(self.ids))
        self.version += 1
        for name in (
            "vectors",
            "expires",
            "category",
            "created",
            "hidden",
            "codes",
            "scales",
            "l1",
            "tok_off",
            "tok_n",
            "updated_us",
            "hashes",
        ):
            old = getattr(self, name)
            new = np.empty((cap, *old.shape[1:]), dtype=old.dtype)
            new[:keep] = old[:keep]
            setattr(self, name, new)

    def put(
        self,
        memory: Memory,
        vector: np.ndarray,
        terms: list[str] | None,
        old_created: datetime | None = None,
    ) -> int:
        """Insert or overwrite; ``terms`` None keeps the row's indexed terms (text unchanged);
        ``old_created``: the overwritten record's created_at. Returns the row."""
        self._mask = None
        self.version += 1
        memory_id = memory.id
        row = self.row_of.get(memory_id)
        if row is None:
            row = len(self.ids)
            if row == self.vectors.shape[0]:
                self._grow()
            self.ids.append(memory_id)
            self.row_of[memory_id] = row
            self.hidden[row] = 0  # a grown array's new rows are uninitialised
            self.vectors[row] = vector
            if not self.codes_stale or self.ann is not None:
                self._wrote_vector(row)
            self.order.add(order_key(memory.created_at, memory_id))
        else:
            if old_created is not None and old_created != memory.created_at:
                self.order.remove(order_key(old_created, memory_id))
                self.order.add(order_key(memory.created_at, memory_id))
            if not np.array_equal(self.vectors[row], np.asarray(vector, dtype=np.float16)):
                # Metadata-only updates keep the vector, and so the row's approximate-index
                # label.
                self._write_vector(row, vector)
        expires = memory.expires_at
        self.expires[row] = _NO_EXPIRY if expires is None else expires.timestamp()
        self.category[row] = memory.category
        self.created[row] = memory.created_at.timestamp()
        self.updated_us[row] = micros(memory.updated_at)
        self.hashes[row] = hash_bits(memory.content_hash)
        if terms is not None:
            self.lexical.set(row, terms, memory.language)
        if memory.content_hash:
            self.by_hash[memory.content_hash] = memory_id
        return row

    def _write_vector(self, row: int, vector: np.ndarray) -> None:
        self.vectors[row] = vector
        self._wrote_vector(row)

    def _wrote_vector(self, row: int) -> None:
        """After a row's vector changed: its int8 code (unless made in bulk later), its
        approximate index."""
        if not self.codes_stale:
            codes, scales, l1 = quantize_rows(self.vectors[row : row + 1])
            self.codes[row], self.scales[row], self.l1[row] = codes[0], scales[0], l1[0]
        if self.ann is not None:
            self.ann.wrote(row)

    def remove(self, memory: Memory) -> None:
        row = self.row_of.pop(memory.id)
        self._mask = None
        self.version += 1
        self.order.remove(order_key(memory.created_at, memory.id))
        self.lexical.move_last_into(row)
        last = len(self.ids) - 1
        if self.ann is not None:
            self.ann.moved(row, last)
        if row != last:
            moved = self.ids[last]
            self.ids[row] = moved
            self.row_of[moved] = row
            self.vectors[row] = self.vectors[last]
            self.expires[row] = self.expires[last]
            self.category[row] = self.category[last]
            self.created[row] = self.created[last]
            self.hidden[row] = self.hidden[last]
            self.codes[row] = self.codes[last]
            self.scales[row] = self.scales[last]
            self.l1[row] = self.l1[last]
            self.tok_off[row] = self.tok_off[last]
            self.tok_n[row] = self.tok_n[last]
            self.updated_us[row] = self.updated_us[last]
            self.hashes[row] = self.hashes[last]
        self.ids.pop()
        if self.by_hash.get(memory.content_hash) == memory.id:
            del self.by_hash[memory.content_hash]

    def set_hidden(self, row: int, hidden: bool) -> None:
        self.hidden[row] = 1 if hidden else 0
        self._mask = None
        self.version += 1

    def mask(self, now_ts: float, categories: frozenset[Category]) -> np.ndarray:
        """uint8 per row: not expired at ``now_ts``, not superseded, in ``categories``
        (when given). Callers must not write to it: without categories it is cached."""
        n = len(self.ids)
        cached = self._mask
        if (
            not categories
            and cached is not None
            and self._mask_from <= now_ts < self._mask_until
            and cached.shape[0] == n
        ):
            return cached
        expires = self.expires[:n]
        alive = expires > now_ts
        keep = alive & (self.hidden[:n] == 0)
        allowed = _category_table(categories)
        if allowed is not None:
            keep &= allowed[self.category[:n].view(np.uint8)]
            return keep.astype(np.uint8)
        out = keep.astype(np.uint8)
        # Valid until the next expiry after now_ts (inf when nothing alive expires).
        self._mask = out
        self._mask_from = now_ts
        self._mask_until = float(expires[alive].min()) if alive.any() else math.inf
        return out

    def nbytes(self) -> int:
        columns = (
            self.vectors,
            self.expires,
            self.category,
            self.created,
            self.hidden,
            self.codes,
            self.scales,
            self.l1,
            self.tok_off,
            self.tok_n,
            self.updated_us,
            self.hashes,
        )
        return sum(c.nbytes for c in columns) + (self.ann.nbytes() if self.ann else 0)


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.float32))


@dataclass(frozen=True, slots=True, eq=False)
class LexicalLeg:
    """``HotIndex.lexical_leg``'s answer (read-only arrays shared with the index)."""

    key: tuple[object, ...]  # the arguments it was worked out for
    held: tuple[_Partition | None, ...]  # the partition of each scope (sorted) then
    versions: tuple[int, ...]  # and its version then (-1: none)
    parts: list[_Partition]  # the non-empty ones, in scope order
    masks: list[np.ndarray]
    lex_parts: list[tuple[np.ndarray, np.ndarray]]
    touched: list[tuple[np.ndarray, np.ndarray]]
    query_language: str

    def holds(self, index: HotIndex, key: tuple[object, ...]) -> bool:
        """Whether it is what ``index.lexical_leg`` would answer now for ``key``
        (``_leg_key`` of the arguments)."""
        if key != self.key:
            return False
        parts = index._parts
        names: tuple[str, ...] = self.key[1]  # type: ignore[assignment]
        for name, part, version in zip(names, self.held, self.versions, strict=True):
            now_part = parts.get(name)
            if now_part is not part or (part is not None and part.version != version):
                return False
        return True


def _leg_key(
    query_text: str,
    scopes: Iterable[str],
    pool: int,
    now: datetime,
    categories: frozenset[Category],
    lexical: bool,
    created_after: datetime | None,
    created_before: datetime | None,
) -> tuple[object, ...]:
    """A lexical leg's arguments as ``LexicalLeg.key`` keeps them (scopes sorted)."""
    return (
        query_text,
        tuple(sorted(set(scopes))),
        pool,
        now.timestamp(),
        categories,
        lexical,
        created_after.timestamp() if created_after else -math.inf,
        created_before.timestamp() if created_before else math.inf,
    )


class HotIndex:
    def __init__(
        self,
        dim: int,
        analyzer: Analyzer | None = None,
        *,
        ann_threshold: int = AnnSettings.threshold,
        ann_ef_search: int = AnnSettings.ef_search,
        ann_build_threads: int = 1,
        token_path: Path | None = None,
    ):
        """``ann_threshold``: rows in one scope from which it gets an approximate index
        (0: exact scans only); ``ann_ef_search``, ``ann_build_threads``: see AnnSettings.
        ``token_path``: the file the token vectors go to (``token_file``; truncated now);
        None: an anonymous temporary file."""
        self.dim = dim
        self.analyzer = analyzer or Analyzer()
        self.ann_settings = AnnSettings(
            threshold=ann_threshold, ef_search=ann_ef_search, build_threads=ann_build_threads
        )
        self._ann_build_lock = threading.Lock()  # one build at a time: two cores are shared
        # Called on a builder's thread when a graph is built or read: set by the owner of
        # the event loop to hand it over there at once (else at the scope's next search or
        # the next maintain_ann)
        self.ann_done: Callable[[], None] | None = None
        self._closed = False
        self._bulk = False
        self._defer_texts = False  # bulk_load(defer_texts=True): rows put without terms
        self._pending_refresh: set[str] = set()  # bulk loading: links derived at the end
        self._parts: dict[str, _Partition] = {}
        self._memories: dict[str, Memory] = {}
        self._idempotency: dict[tuple[str, str], str] = {}
        self._keys: dict[tuple[str, str], KeyRecord] = {}  # keyed Stores that created nothing
        # The records that lapse (drop_keys_before), in the order they were put: nearly the
        # order of their times (another daemon's, followed, may come a little late).
        self._key_times: deque[tuple[datetime, tuple[str, str]]] = deque()
        self.keys_lapse = True  # False (no store.idempotency_days): no queue, it would only grow
        # int8 token vectors (late interaction), on disk: rows keep their offsets
        self._token_file = TokenFile(dim, token_path)
        # Compact the token file within the write that makes it due; the repository
        # turns this off and compacts on a thread from a job instead.
        self._compact_inline = True
        self._text_bytes = 0
        self.changes = 0  # rows put or removed so far (what a token map must catch up with)
        # Links are stored one way (the newer memory names the older); the other direction
        # is derived here, so linking or superseding costs no extra write.
        # Tuples, not sets: a set is 216 B even empty, and a store of near-duplicates links
        # most of its memories (~1.5 sets a memory, 40 MiB at 100k in store_rss.py's
        # corpus); a target many memories link to gets a set past _BACKLINKS_AS_TUPLE.
        self._forward: dict[str, tuple[str, ...]] = {}
        self._backlinks: dict[str, tuple[str, ...] | set[str]] = {}
        self._supersedes: dict[str, str] = {}  # new id -> the id it replaced
        self._superseded_by: dict[str, str] = {}  # replaced id -> the new id

    def __len__(self) -> int:
        return len(self._memories)

    @contextlib.contextmanager
    def bulk_load(self, *, defer_texts: bool = False) -> Iterator[None]:
        """Put many rows (the load at start-up): their int8 codes are made in one pass per
        scope at the end rather than one call per row (~3 s of a 100k-row load), and each
        memory's links are derived once at the end rather than again for every memory that
        links to it. Nothing may read the index until the block ends.
        ``defer_texts``: the texts put are not analysed as they come; within the block the
        caller may give a partition its saved postings (``LexicalPartition.adopt``), and
        the block's end analyses the rows of every partition still without them."""
        self._bulk = True
        self._defer_texts = defer_texts
        for part in self._parts.values():
            part.codes_stale = True
            part.order.stale = True
        loaded = False
        try:
            yield
            loaded = True
        finally:
            self._bulk = False
            deferred, self._defer_texts = self._defer_texts, False
            if deferred and loaded:  # (a failed load fails the start: no analysis then)
                self._index_texts()
            pending, self._pending_refresh = self._pending_refresh, set()
            for memory_id in pending:
                self._refresh(memory_id)
            for part in self._parts.values():
                part.version += 1  # (its postings may have been given or analysed)
                if part.order.stale:
                    part.order.sort()
                if part.codes_stale:
                    for at in range(0, len(part), _QUANTIZE_CHUNK):
                        end = min(len(part), at + _QUANTIZE_CHUNK)
                        codes, scales, l1 = quantize_rows(part.vectors[at:end])
                        part.codes[at:end], part.scales[at:end], part.l1[at:end] = (
                            codes,
                            scales,
                            l1,
                        )
                    part.codes_stale = False
                part.trim()

    def put(self, memory: Memory, vector: np.ndarray, tokens: np.ndarray | None = None) -> Memory:
        """Insert or overwrite (same id; the scope never changes); returns the record as
        readers now see it (language filled in, links derived)."""
        old = self._memories.get(memory.id)
        self.changes += 1
        same_text = old is not None and old.text == memory.text
        if not memory.language:  # stored before languages were: detected on load
            language = (
                old.language if same_text and old is not None else self.analyzer.detect(memory.text)
            )
            memory = replace(memory, language=language)
        terms = (
            None  # the row's terms stand: same text in the same language
            if (same_text and old is not None and old.language == memory.language)
            or self._defer_texts
            else self.analyzer.terms(memory.text, memory.language)
        )
        if old is not None:
            self._text_bytes -= len(old.text) + len(old.summary)
            old_part = self._parts[old.scope]
            old_part.record_bytes -= len(old.text) + len(old.summary)
            if old_part.by_hash.get(old.content_hash) == old.id:
                del old_part.by_hash[old.content_hash]
        part = self._parts.get(memory.scope)
        if part is None:
            part = self._parts[memory.scope] = _Partition(self.dim)
            part.codes_stale = part.order.stale = self._bulk
        row = part.put(memory, vector, terms, old.created_at if old is not None else None)
        if old is not None:
            self._drop_tokens(part, row)
        if tokens is not None:
            part.tok_off[row] = self._token_file.append(memory.id, tokens)
            part.tok_n[row] = tokens.shape[0]
        else:
            part.tok_n[row] = -1
        self._memories[memory.id] = memory
        size = len(memory.text) + len(memory.summary)
        self._text_bytes += size
        part.record_bytes += size
        if old is not None:
            self._maybe_compact_tokens()
        if memory.idempotency_key:
            self._idempotency[(memory.agent_id, memory.idempotency_key)] = memory.id
        affected = self._unlink(memory.id)
        if memory.related_ids or memory.supersedes:
            affected |= self._link(memory)
        if old is None:  # memories that link to it (e.g. read back first) now see it
            backlinks = self._backlinks.get(memory.id)
            if backlinks:
                affected.update(backlinks)
        if self._bulk:  # once per memory at the end, not once per memory linking to it
            # A new memory that links nowhere and that nothing links to or supersedes has
            # nothing to derive (most of a load): its row is shown, its record as read.
            if (
                affected
                or old is not None
                or memory.related_ids
                or memory.superseded_by
                or memory.id in self._superseded_by
            ):
                affected.add(memory.id)
                self._pending_refresh |= affected
            return memory
        affected.add(memory.id)
        for memory_id in affected:
            self._refresh(memory_id)
        return self._memories[memory.id]

    def _index_texts(self) -> None:
        """Analyse the texts of the rows the postings lack (the end of a deferred load)."""
        terms, memories = self.analyzer.terms, self._memories
        for part in self._parts.values():
            lexical = part.lexical
            for row in range(len(lexical), len(part)):
                memory = memories[part.ids[row]]
                lexical.set(row, terms(memory.text, memory.language), memory.language)
            part.version += 1

    def _drop_tokens(self, part: _Partition, row: int) -> None:
        count = int(part.tok_n[row])
        if count >= 0:
            self._token_file.dropped(count)
            part.tok_n[row] = -1

    def _maybe_compact_tokens(self) -> None:
        if self._compact_inline and self._token_file.should_compact():
            self.compact_tokens()

    def compact_tokens(self) -> None:
        """Rewrite the token file with only the records rows point at (dropping the dead
        bytes overwrites and deletes left). A record that reads as damaged is left out
        (its row then has none)."""
        old = self._token_file
        path = None if old.path is None else old.path.with_name(old.path.name + ".compact")
        new = TokenFile(self.dim, path)
        try:
            for part in self._parts.values():
                for row in np.flatnonzero(part.tok_n[: len(part)] >= 0).tolist():
                    memory_id = part.ids[row]
                    tokens = old.read(memory_id, int(part.tok_off[row]), int(part.tok_n[row]))
                    if tokens is None:
                        part.tok_n[row] = -1
                    else:
                        part.tok_off[row] = new.append(memory_id, tokens)
        except BaseException:
            new.close()
            raise
        damaged = old.damaged
        old.replace_with(new)
        old.damaged = damaged  # rows that lost their records: for the repair to restore

    def _link(self, memory: Memory) -> set[str]:
        if not memory.related_ids and not memory.supersedes:  # most memories
            return set()
        forward = set(memory.related_ids) - {memory.id}
        if forward:  # most memories link nowhere: no empty one each
            self._forward[memory.id] = tuple(forward)
        for target in forward:
            self._add_backlink(target, memory.id)
        affected = set(forward)
        if memory.supersedes:
            self._supersedes[memory.id] = memory.supersedes
            self._superseded_by[memory.supersedes] = memory.id
            affected.add(memory.supersedes)
        return affected

    def _unlink(self, memory_id: str) -> set[str]:
        if memory_id not in self._forward and memory_id not in self._supersedes:  # most
            return set()
        forward = self._forward.pop(memory_id, ())
        for target in forward:
            self._drop_backlink(target, memory_id)
        affected = set(forward)
        replaced = self._supersedes.pop(memory_id, "")
        if replaced and self._superseded_by.get(replaced) == memory_id:
            del self._superseded_by[replaced]
            affected.add(replaced)
        return affected

    def _add_backlink(self, target: str, source: str) -> None:
        sources = self._backlinks.get(target)
        if sources is None:
            self._backlinks[target] = (source,)
        elif isinstance(sources, set):
            sources.add(source)
        elif source not in sources:
            grown = (*sources, source)
            self._backlinks[target] = grown if len(grown) <= _BACKLINKS_AS_TUPLE else set(grown)

    def _drop_backlink(self, target: str, source: str) -> None:
        sources = self._backlinks.get(target)
        if sources is None:
            return
        if isinstance(sources, set):
            sources.discard(source)
            left: tuple[str, ...] | set[str] = sources
        else:
            left = tuple(s for s in sources if s != source)
            self._backlinks[target] = left
        if not left:
            del self._backlinks[target]

    def _refresh(self, memory_id: str) -> None:
        """Recompute a memory's derived fields: both-way links, superseded_by, hidden."""
        memory = self._memories.get(memory_id)
        if memory is None:
            return
        links = {*self._forward.get(memory_id, ()), *self._backlinks.get(memory_id, ())}
        # Links and supersession hold within a scope only: a link across scopes (which no
        # write makes any more, but an older import could have stored) would show one
        # agent an id of another's memory, or hide it from its owner.
        related = tuple(sorted(i for i in links if self._same_scope(i, memory.scope)))
        newer = self._superseded_by.get(memory_id, "")
        superseded_by = newer if self._same_scope(newer, memory.scope) else ""
        if related != memory.related_ids or superseded_by != memory.superseded_by:
            # A new record: whoever holds the old one keeps what they read.
            memory = replace(memory, related_ids=related, superseded_by=superseded_by)
            self._memories[memory_id] = memory
        part = self._parts[memory.scope]
        part.set_hidden(part.row_of[memory_id], bool(superseded_by))

    def _same_scope(self, memory_id: str, scope: str) -> bool:
        other = self._memories.get(memory_id)
        return other is not None and other.scope == scope

    def remove(self, memory_id: str) -> Memory | None:
        memory = self._memories.pop(memory_id, None)
        if memory is None:
            return None
        self.changes += 1
        self._text_bytes -= len(memory.text) + len(memory.summary)
        part = self._parts[memory.scope]
        part.record_bytes -= len(memory.text) + len(memory.summary)
        self._drop_tokens(part, part.row_of[memory_id])
        part.remove(memory)
        if not part:
            if part.ann is not None:
                part.ann.close()
            del self._parts[memory.scope]
        if memory.idempotency_key:
            self._idempotency.pop((memory.agent_id, memory.idempotency_key), None)
        affected = self._unlink(memory_id)
        affected.update(self._backlinks.pop(memory_id, ()))
        for other in affected:
            self._refresh(other)
        return memory

    def get(self, memory_id: str) -> Memory | None:
        return self._memories.get(memory_id)

    def count_access(self, ids: Sequence[str], now: datetime) -> list[str]:
        """Count a recall of each memory (a new record each); returns the ids found."""
        found = []
        for memory_id in ids:
            memory = self._memories.get(memory_id)
            if memory is not None:
                self._memories[memory_id] = with_access(memory, memory.access_count + 1, now)
                found.append(memory_id)
        return found

    def merge_access(self, memory_id: str, count: int, last: datetime | None) -> None:
        """Take another daemon's access count and last access where they are higher."""
        memory = self._memories.get(memory_id)
        if memory is None:
            return
        mine = memory.last_accessed_at
        newest = mine if last is None or (mine is not None and mine >= last) else last
        highest = max(count, memory.access_count)
        if highest != memory.access_count or newest != mine:
            self._memories[memory_id] = with_access(memory, highest, newest)

    def key_record(self, agent_id: str, key: str) -> KeyRecord | None:
        return self._keys.get((agent_id, key))

    def put_key(self, record: KeyRecord) -> None:
        name = (record.agent_id, record.key)
        held = self._keys.get(name)
        self._keys[name] = record
        if record.outcome == StoreOutcome.CREATED or not self.keys_lapse:
            return
        # The same record read again (the follower reads this daemon's own appends, and
        # every fragment a compaction of the keys table rewrote): queued once already.
        if held is not None and held.outcome != StoreOutcome.CREATED and held.at == record.at:
            return
        self._key_times.append((record.at, name))

    def drop_keys_before(self, before: datetime) -> int:
        """Forget the records of keyed Stores that created nothing (DUPLICATE, MERGED)
        made before ``before``; returns how many. (A CREATED record, kept for a memory in
        a scope its writer may only write, lasts as long as that memory's key does.)"""
        dropped = 0
        times, keys = self._key_times, self._keys
        while times and times[0][0] < before:
            at, name = times.popleft()
            record = keys.get(name)
            # (not one put again since, with a later answer)
            if record is not None and record.outcome != StoreOutcome.CREATED and record.at <= at:
                del keys[name]
                dropped += 1
        return dropped

    def vector_of(self, memory_id: str) -> np.ndarray | None:
        memory = self._memories.get(memory_id)
        if memory is None:
            return None
        part = self._parts[memory.scope]
        return part.vectors[part.row_of[memory_id]].astype(np.float32)

    def _token_record(self, memory_id: str) -> tuple[str, int, int] | None:
        """``(memory_id, offset, count)`` of the memory's record in the token file, as
        ``TokenFile.read`` takes them; None if the memory is unknown or has none."""
        memory = self._memories.get(memory_id)
        if memory is None:
            return None
        part = self._parts[memory.scope]
        row = part.row_of[memory_id]
        count = int(part.tok_n[row])
        return None if count < 0 else (memory_id, int(part.tok_off[row]), count)

    def tokens_of(self, memory_id: str) -> np.ndarray | None:
        """The memory's token vectors, read from the token file (a view of fresh bytes:
        read-only); None without any, or when the file no longer holds them (damaged)."""
        record = self._token_record(memory_id)
        return None if record is None else self._token_file.read(*record)

    def tokens_of_many(self, memory_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """The memories' token vectors back to back, as ``maxsim`` takes them: ``(tokens
        int8 [t, dim], starts int64 [n + 1])``, memory i's at rows starts[i]:starts[i + 1];
        None if any of them has none (``tokens_of`` would answer None for it)."""
        records = [self._token_record(memory_id) for memory_id in memory_ids]
        found = [r for r in records if r is not None]
        # The others are read even when the answer is None, as one tokens_of each would:
        # a damaged record among them marks the file damaged, and its repair follows.
        read = self._token_file.read_many(found)
        return read if len(found) == len(records) else None

    def has_tokens(self, memory_id: str) -> bool:
        """Whether the memory was stored with token vectors (whether or not they read)."""
        memory = self._memories.get(memory_id)
        if memory is None:
            return False
        part = self._parts[memory.scope]
        return bool(part.tok_n[part.row_of[memory_id]] >= 0)

    @property
    def tokens_damaged(self) -> bool:
        """A read found the token file not holding what a row points at."""
        return self._token_file.damaged

    def find_by_hash(self, scope: str, content_hash: str) -> Memory | None:
        part = self._parts.get(scope)
        memory_id = part.by_hash.get(content_hash) if part else None
        return self._memories.get(memory_id) if memory_id else None

    def find_by_idempotency_key(self, agent_id: str, key: str) -> Memory | None:
        memory_id = self._idempotency.get((agent_id, key))
        return self._memories.get(memory_id) if memory_id else None

    def search(
        self,
        query: np.ndarray,
        scopes: Iterable[str],
        k: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
    ) -> list[tuple[Memory, float]]:
        if k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32)
        now_ts = now.timestamp()
        found: list[tuple[float, str]] = []
        for scope in sorted(set(scopes)):
            part = self._parts.get(scope)
            if part is None or not part:
                continue
            idx, scores = self._vector_topk(part, q, part.mask(now_ts, categories), k)
            found.extend((float(s), part.ids[int(i)]) for i, s in zip(idx, scores, strict=True))
        found.sort(key=lambda t: (-t[0], t[1]))
        return [(self._memories[i], s) for s, i in found[:k]]

    def lexical_leg(
        self,
        query_text: str,
        scopes: Iterable[str],
        pool: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        lexical: bool = True,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> LexicalLeg:
        """What ``candidates`` works out from the query's text alone (its analysis, each
        partition's filter mask and best ``pool`` by BM25), to be handed to it as
        ``prepared``: a Recall does this while its query's embedding runs. It holds as
        long as none of the partitions searched changes."""
        key = _leg_key(
            query_text, scopes, pool, now, categories, lexical, created_after, created_before
        )
        now_ts = now.timestamp()
        names: tuple[str, ...] = key[1]  # type: ignore[assignment]
        held = tuple(self._parts.get(s) for s in names)
        parts = [p for p in held if p is not None and p]
        weights: dict[str, float] = {}
        query_language, query_counts = self.analyzer.query_terms(query_text, _main_languages(parts))
        if lexical and parts:
            n_docs = sum(len(p) for p in parts)
            avgdl = sum(p.lexical.total_len for p in parts) / n_docs
            for term, count in query_counts.items():
                df = sum(p.lexical.df(term) for p in parts)
                if df:
                    weights[term] = (
                        idf(df, n_docs) * count * (TRIGRAM_WEIGHT if term.startswith("#") else 1.0)
                    )
        else:
            avgdl = 0.0
        masks: list[np.ndarray] = []
        lex_parts: list[tuple[np.ndarray, np.ndarray]] = []  # per partition: rows, scores
        touched: list[tuple[np.ndarray, np.ndarray]] = []  # rows with a query term, scores
        after = created_after.timestamp() if created_after else -math.inf
        before = created_before.timestamp() if created_before else math.inf
        for part in parts:
            mask = part.mask(now_ts, categories)
            if created_after or created_before:
                created = part.created[: len(part)]
                mask = mask & ((created >= after) & (created < before)).astype(np.uint8)
            masks.append(mask)
            if weights:
                rows, scores = bm25_touched(part.lexical, weights, avgdl)
                idx, sc = topk_scores(scores, mask[rows], pool)
                lex_parts.append((rows[idx], sc))
                touched.append((rows, scores))
            else:
                lex_parts.append(_EMPTY)
                touched.append(_EMPTY)
        return LexicalLeg(
            key=key,
            held=held,
            versions=tuple(-1 if p is None else p.version for p in held),
            parts=parts,
            masks=masks,
            lex_parts=lex_parts,
            touched=touched,
            query_language=query_language,
        )

    def candidates(
        self,
        query: np.ndarray,
        query_text: str,
        scopes: Iterable[str],
        pool: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        lexical: bool = True,
        vector: bool = True,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        prepared: object = None,
    ) -> Candidates:
        """Hybrid candidates: the union of the best ``pool`` by cosine and the best
        ``pool`` by BM25 over the scopes, each re-scored exactly on both legs; only
        memories created in [created_after, created_before) when those are given.
        ``prepared``: this query's ``lexical_leg``, used if it still holds (else it is
        worked out again)."""
        q = np.ascontiguousarray(query, dtype=np.float32)
        leg = prepared if isinstance(prepared, LexicalLeg) else None
        if leg is None or not leg.holds(
            self,
            _leg_key(
                query_text, scopes, pool, now, categories, lexical, created_after, created_before
            ),
        ):
            leg = self.lexical_leg(
                query_text,
                scopes,
                pool,
                now=now,
                categories=categories,
                lexical=lexical,
                created_after=created_after,
                created_before=created_before,
            )
        parts, query_language = leg.parts, leg.query_language
        touched = leg.touched
        vec_parts: list[tuple[np.ndarray, np.ndarray]] = [
            self._vector_topk(part, q, mask, pool) if vector else _EMPTY
            for part, mask in zip(parts, leg.masks, strict=True)
        ]
        lex_parts = leg.lex_parts
        if len(parts) == 1:
            return self._one_part(
                parts[0], vec_parts[0], lex_parts[0], touched[0], q, query_language, vector
            )
        # The union of the best ``pool`` of each leg, vector hits first, each leg best
        # first with ties by (partition, row); as (partition, row) pairs.
        vec_pi, vec_rows = _best(vec_parts, pool)
        lex_pi, lex_rows = _best(lex_parts, pool)
        seen = set(zip(vec_pi.tolist(), vec_rows.tolist(), strict=True))
        extra = [
            i
            for i, key in enumerate(zip(lex_pi.tolist(), lex_rows.tolist(), strict=True))
            if key not in seen
        ]
        cand_pi = np.concatenate([vec_pi, lex_pi[extra]])
        cand_rows = np.concatenate([vec_rows, lex_rows[extra]])
        n = cand_rows.size
        vectors = np.empty((n, self.dim), dtype=np.float32)
        created = np.empty(n, dtype=np.float64)
        lex = np.zeros(n, dtype=np.float32)
        memories = [
            self._memories[parts[pi].ids[row]]
            for pi, row in zip(cand_pi.tolist(), cand_rows.tolist(), strict=True)
        ]
        for pi, part in enumerate(parts):
            at = np.flatnonzero(cand_pi == pi) if len(parts) > 1 else np.arange(n)
            if at.size == 0:
                continue
            rows = cand_rows[at]
            vectors[at] = widen_rows(part.vectors, rows)
            created[at] = part.created[rows]
            lex[at] = _bm25_of(touched[pi], rows)
        vec = vectors @ q if n else np.zeros(0, dtype=np.float32)
        return Candidates(
            memories=memories,
            vector_scores=vec.astype(np.float32),
            lexical_scores=lex,
            vector_rank=_ranks(vec, np.full(n, vector, dtype=bool)),
            lexical_rank=_ranks(lex, lex > 0),
            vectors=vectors,
            created=created,
            query_language=query_language,
        )

    def _one_part(
        self,
        part: _Partition,
        vec_hits: tuple[np.ndarray, np.ndarray],
        lex_hits: tuple[np.ndarray, np.ndarray],
        touched: tuple[np.ndarray, np.ndarray],
        q: np.ndarray,
        query_language: str,
        vector: bool,
    ) -> Candidates:
        """``candidates``' assembly when one partition is searched (a Recall of one agent
        without shared scopes): the same answer without merging partitions, in a few
        array operations (the general path's ~30 cost ~0.2 ms a Recall)."""
        vec_rows = vec_hits[0].astype(np.int64, copy=False)
        lex_rows = lex_hits[0].astype(np.int64, copy=False)
        if lex_rows.size:
            seen = set(vec_rows.tolist())
            extra = [r for r in lex_rows.tolist() if r not in seen]
            rows = np.concatenate([vec_rows, np.array(extra, dtype=np.int64)])
        else:
            rows = vec_rows
        n = rows.size
        ids, memories = part.ids, self._memories
        vectors = widen_rows(part.vectors, rows)
        lex = _bm25_of(touched, rows)
        vec = (vectors @ q).astype(np.float32) if n else np.zeros(0, dtype=np.float32)
        return Candidates(
            memories=[memories[ids[r]] for r in rows.tolist()],
            vector_scores=vec,
            lexical_scores=lex,
            vector_rank=_ranks(vec, np.full(n, vector, dtype=bool)),
            lexical_rank=_ranks(lex, lex > 0),
            vectors=vectors,
            created=part.created[rows],
            query_language=query_language,
        )

    def visible(
        self,
        scopes: Iterable[str],
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
    ) -> list[Memory]:
        out = []
        for scope in set(scopes):
            part = self._parts.get(scope)
            if part is None:
                continue
            for memory_id in part.ids:
                m = self._memories[memory_id]
                if m.is_expired(now) or (categories and m.category not in categories):
                    continue
                out.append(m)
        out.sort(key=lambda m: (m.created_at, m.id), reverse=True)
        return out

    def page(
        self,
        scopes: Iterable[str],
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        oldest_first: bool = False,
        categories: frozenset[Category] = frozenset(),
    ) -> Listing:
        now_ts = now.timestamp()
        start = None if after is None else order_key(*after)
        allowed = _category_table(categories)
        total = 0
        runs: list[Iterator[OrderKey]] = []
        for scope in sorted(set(scopes)):
            part = self._parts.get(scope)
            if part is None or not part:
                continue
            n = len(part)
            keep = part.expires[:n] > now_ts
            if allowed is not None:
                keep &= allowed[part.category[:n].view(np.uint8)]
            total += int(keep.sum())
            runs.append(_listed(part, keep, start, not oldest_first, limit + 1))
        merged = list(itertools.islice(heapq.merge(*runs, reverse=not oldest_first), limit + 1))
        memories = [self._memories[memory_id] for _, memory_id in merged[:limit]]
        return Listing(memories, len(merged) > limit, total)

    def count_visible(
        self, scopes: Iterable[str], *, now: datetime
    ) -> tuple[dict[str, int], dict[Category, int]]:
        now_ts = now.timestamp()
        by_scope: dict[str, int] = {}
        by_category = np.zeros(256, dtype=np.int64)
        for scope in set(scopes):
            part = self._parts.get(scope)
            if part is None or not part:
                continue
            n = len(part)
            alive = part.expires[:n] > now_ts
            count = int(alive.sum())
            if count:
                by_scope[scope] = count
                by_category += np.bincount(part.category[:n][alive].view(np.uint8), minlength=256)
        return by_scope, {c: int(by_category[int(c)]) for c in Category if by_category[int(c)]}

    def count_expired(self, scopes: Iterable[str], *, now: datetime) -> int:
        now_ts = now.timestamp()
        total = 0
        for scope in set(scopes):
            part = self._parts.get(scope)
            if part is not None:
                total += int((part.expires[: len(part)] <= now_ts).sum())
        return total

    def expired_ids(self, *, now: datetime, scopes: Iterable[str] | None = None) -> list[str]:
        now_ts = now.timestamp()
        out: list[str] = []
        if scopes is None:
            parts: Iterable[_Partition] = self._parts.values()
        else:
            parts = [p for s in set(scopes) if (p := self._parts.get(s)) is not None]
        for part in parts:
            rows = np.nonzero(part.expires[: len(part)] <= now_ts)[0]
            out.extend(part.ids[int(r)] for r in rows)
        return out

    def _vector_topk(
        self, part: _Partition, q: np.ndarray, mask: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best rows by dot product among those ``mask`` allows, best first."""
        n = len(part)
        ann = self._ann_of(part)
        if ann is not None:
            hit = ann.search(part.vectors, n, q, mask, k, keep=mask is part._mask)
            if hit is not None:
                return hit
        if part.codes_stale:
            return topk_dot_f16(part.vectors[:n], q, mask, k)
        # The same answer as topk_dot_f16, reading the int8 codes first and the float16
        # rows only of the few that could be in the top k.
        return topk_dot_q8_f16(
            part.vectors[:n], part.codes[:n], part.scales[:n], part.l1[:n], q, mask, k
        )

    def _ann_of(self, part: _Partition) -> PartitionAnn | None:
        """The partition's approximate index after housekeeping: attach one when it has
        grown past the threshold, drop it when it has shrunk well below (hysteresis, so a
        scope hovering at the threshold does not rebuild over and over), hand over a
        finished build and start a due one."""
        threshold = self.ann_settings.threshold
        n = len(part)
        if part.ann is None:
            if self._closed or not self.ann_settings.enabled or n < threshold:
                return None
            part.ann = PartitionAnn(self.ann_settings, self._ann_build_lock, self._ann_finished)
        elif n < threshold * 3 // 4:
            part.ann.close()
            part.ann = None
            return None
        if not self._closed:
            part.ann.maintain(part.vectors, n)
        return part.ann

    def adopt_graph(
        self,
        scope: str,
        row_of_label: np.ndarray,
        read: Callable[[threading.Event], Any],
        on_disk: Any = None,
    ) -> bool:
        """Give the scope's partition a saved approximate index (``PartitionAnn.adopt``)
        rather than a build; False (nothing done) if it is not one to have a graph."""
        part = self._parts.get(scope)
        if (
            part is None
            or part.ann is not None
            or self._closed
            or not self.ann_settings.enabled
            or len(part) < self.ann_settings.threshold
        ):
            return False
        ann = PartitionAnn(self.ann_settings, self._ann_build_lock, self._ann_finished)
        ann.adopt(row_of_label, part.vectors.shape[0], read, on_disk)
        part.ann = ann
        return True

    def _ann_finished(self) -> None:
        done = self.ann_done
        if done is not None:
            done()

    def maintain_ann(self) -> None:
        """Start due approximate-index builds and install finished ones now, rather than on
        the next search of each scope (e.g. right after loading, or from a periodic task)."""
        for part in self._parts.values():
            self._ann_of(part)

    def wait_for_ann(self, timeout: float | None = None) -> bool:
        """Block until the builds in flight end, then install them; False on timeout.
        For tools and tests: it blocks, so never call it on the event loop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for part in self._parts.values():
            if part.ann is not None:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not part.ann.wait(left):
                    return False
        self.maintain_ann()
        return True

    def ann_status(self) -> list[AnnStatus]:
        """One entry per partition that has (or is building) an approximate index."""
        return [
            part.ann.status(scope, len(part))
            for scope, part in sorted(self._parts.items())
            if part.ann is not None
        ]

    def close(self) -> None:
        """Cancel approximate-index builds in flight and start no more (graphs already
        serving keep serving). Call on shutdown: a build otherwise runs to its end (on a
        daemon thread, so it never holds up the exit itself)."""
        self._closed = True
        for part in self._parts.values():
            if part.ann is not None:
                part.ann.close()
        self._token_file.close()

    def trim_idle_rows(self) -> int:
        """Shrink the row arrays of the partitions that took no new row since the last call
        and have more than an eighth of their rows (and at least ``TRIM_MIN_UNUSED``) unused,
        to their rows plus 1/32; returns the rows' worth of room given back. The arrays
        grow by a quarter, so a burst of Stores leaves up to a fifth of them unused (100k
        Stores: arrays for 124,575 rows, ~0.3 KB per memory); a load trims them, and this,
        called now and then, trims them once the Stores pause (one copy of the rows, as a
        growth costs; a trickle of Stores after it grows them again only after 1/32 more)."""
        freed = 0
        for part in self._parts.values():
            n = len(part)
            idle = n == part.rows_seen
            part.rows_seen = n
            unused = part.unused_rows()
            if idle and unused > max(TRIM_MIN_UNUSED, n // 8):
                part.trim(room=32)
                freed += unused - part.unused_rows()
        return freed

    def scope_sizes(self) -> dict[str, int]:
        return {scope: len(part) for scope, part in self._parts.items()}

    def scopes(self) -> list[str]:
        return sorted(self._parts)

    def row_count(self, scopes: Iterable[str] | None = None) -> int:
        """Rows held for ``scopes`` (default all; expired and superseded ones included)."""
        if scopes is None:
            return len(self._memories)
        return sum(len(p) for s in set(scopes) if (p := self._parts.get(s)) is not None)

    def index_bytes(self, scopes: Iterable[str] | None = None) -> int:
        """Memory held for ``scopes`` (default all): vectors and columns exactly; records
        approximately (text and summary plus a fixed overhead). Token vectors are in the
        token file, not held (10 bytes per row say where)."""
        if scopes is None:
            parts = sum(p.nbytes() for p in self._parts.values())
            return parts + self._text_bytes + 400 * len(self)
        chosen = [p for s in set(scopes) if (p := self._parts.get(s)) is not None]
        return sum(p.nbytes() + p.record_bytes + 400 * len(p) for p in chosen)


def _listed(
    part: _Partition, keep: np.ndarray, start: OrderKey | None, descending: bool, limit: int
) -> Iterator[OrderKey]:
    """The first ``limit`` keys past ``start`` whose rows ``keep`` allows, lazily."""
    row_of = part.row_of
    keys = (k for k in part.order.after(start, descending) if keep[row_of[k[1]]])
    return itertools.islice(keys, limit)


def _category_table(categories: frozenset[Category]) -> np.ndarray | None:
    """A lookup by category number (np.isin sorts, ~10x slower); None: every category."""
    if not categories:
        return None
    allowed = np.zeros(256, dtype=np.bool_)
    allowed[[int(c) for c in categories]] = True
    return allowed


def _best(per_part: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of several partitions' hits (rows, scores; each best first, ties by
    row), as (partition index, row) arrays: by score desc, then partition, then row."""
    if not per_part:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pis = np.concatenate([np.full(r.size, i, np.int64) for i, (r, _) in enumerate(per_part)])
    rows = np.concatenate([r for r, _ in per_part]).astype(np.int64)
    scores = np.concatenate([s for _, s in per_part]).astype(np.float32)
    order = np.lexsort((rows, pis, -scores))[:k]
    return pis[order], rows[order]


def _bm25_of(touched: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """The BM25 score of each of ``rows``: its score among the query's touched rows
    (``touched``: rows ascending, their scores), or 0."""
    t_rows, t_scores = touched
    lex = np.zeros(rows.size, dtype=np.float32)
    if t_rows.size and rows.size:
        pos = np.minimum(np.searchsorted(t_rows, rows), t_rows.size - 1)
        found = t_rows[pos] == rows
        lex[found] = t_scores[pos[found]]
    return lex


def _ranks(scores: np.ndarray, present: np.ndarray) -> np.ndarray:
    """0-based rank by score desc (ties by position) where present, else -1."""
    return ranks_desc(np.ascontiguousarray(scores, dtype=np.float32), present)


def _main_languages(parts: list[_Partition]) -> list[str]:
    """The languages of at least a tenth of the searched rows (at most three), most
    common first: a query is also analysed in these."""
    counts: Counter[str] = Counter()
    for part in parts:
        counts.update(part.lexical.language_counts)
    total = sum(counts.values())
    return [code for code, n in counts.most_common(3) if code and n * 10 >= total]
