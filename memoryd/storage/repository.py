"""``core.protocols.MemoryStore`` over LanceDB (durable) and the hot index (reads).

The repository is the hot index (``HotIndex``, whose methods answer every read, the
``MemoryReader`` side) plus the one writer (the ``MemoryWriter`` side): each write goes to
LanceDB first, and only once the commit is on disk does the index change, so every read
sees exactly the acknowledged writes. Reads never touch LanceDB.

At start the token file (``<data_dir>/tokens.bin``) is reused when the map saved beside it
(at a clean shutdown, or while serving: ``checkpoint_tokens``) names this table and file
(``storage.token_map``): the table is then read without its token-vector column, and only
the rows changed since the map have theirs read from the table; otherwise it is written
afresh from the table. The start's log line says which, and why (``token_start``). With a
reused token file, the HNSW graphs saved with its map (``storage.ann_map``) are taken too,
and after a clean shutdown the BM25 postings it saved (``storage.term_map``) for the scopes
unchanged since (``graphs_start``, ``postings_start`` say whether).

Its background jobs (persisting access counts, maintaining the approximate indexes and,
with several daemons over one store, following the others' commits: ``storage.follow``)
are its own: ``start_jobs`` and ``shutdown``; what Stats and health need of the store it
says through ``status``, ``write_counters``, ``follow_lag`` and ``pending``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import functools
import gc
import itertools
import logging
import random
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.core import tracing
from memoryd.core.jobs import Job, Jobs
from memoryd.core.records import FollowLag, KeyRecord, Memory, StoreOutcome
from memoryd.storage import ann_map, heap, term_map, token_map
from memoryd.storage.ann import AnnSettings, Saving
from memoryd.storage.claims import KeyClaims
from memoryd.storage.follow import Follower
from memoryd.storage.hot_index import HotIndex, _Partition
from memoryd.storage.lance_store import STATUS_OK, LanceStore
from memoryd.storage.lexical import Analyzer, LexicalPartition
from memoryd.storage.term_map import TermMap
from memoryd.storage.token_file import HEADER_BYTES, TokenFile
from memoryd.storage.token_map import TokenMap, Unusable, row_state

log = logging.getLogger(__name__)

ACCESS_FLUSH_SECONDS = 60.0
ANN_MAINTAIN_SECONDS = 60.0
# A stop soon after a start waits this long for a saved graph still being read, to save it
# again (else the next start builds it: minutes at a million rows).
GRAPH_READ_WAIT_SECONDS = 30.0
TOKEN_UPKEEP_SECONDS = 30.0
# The token map saved while serving (checkpoint_tokens): at the first quiet upkeep this
# long after the last one, or this long after it whatever the writes.
CHECKPOINT_QUIET_SECONDS = 60.0
CHECKPOINT_SECONDS = 300.0
ROW_TRIM_SECONDS = 10.0  # a burst's unused rows go 10-20 s after its last Store
KEY_LAPSE_SECONDS = 300.0  # how often the records of lapsed idempotency keys are dropped
# Rows analysed afresh at a start that takes saved postings, to check them.
POSTINGS_SAMPLE = 64
# Postings copied at a time by a save while serving, and at most these bytes of their
# pairs (at a million rows in one agent, 955 postings of ~100 MB were copied in one step
# while Recalls waited: p99 252 ms beside the save)
POSTINGS_SLICE = 8192
POSTINGS_SLICE_BYTES = 1 << 20
# A start that reuses the token file: the records whose headers it checks, and of those the
# ones whose token vectors it compares with the table's when the table has moved on since
# the map was saved; it rewrites the file rather than read more than a quarter of the rows
# (or this many, if more) from the table.
RECORD_SAMPLE = 256
TOKENS_SAMPLE = 64
DELTA_MIN_ROWS = 2048
# A start that must write the token file afresh (no map vouches for it) over at least this
# many rows loads without the token-vector column and writes the file while serving (the
# token file's upkeep, at once): at a million rows the column is ~12 GB, and reading and
# writing it held SERVING back by minutes. Until it is written, Recalls rank without the
# late-interaction rerank (as for a memory stored without token vectors). Below it, the
# file is written before SERVING, as it takes seconds.
OWED_TOKENS_MIN_ROWS = 50_000
OWED_RETRY_FIRST_SECONDS = 60.0  # after a failed write of it, doubling up to the max
OWED_RETRY_MAX_SECONDS = 900.0


@dataclass(frozen=True, slots=True)
class _Places:
    """Where each of a token map's places is at this start (``_adopt_tokens``): its row in
    its scope's partition (-1: the row is not as the map has it, or gone) and that scope
    (``scopes[scope[i]]``; -1 likewise). The map was written a partition at a time, so a
    saved partition's places were one scope's; a row may have moved to another scope
    since with its id, time and text (an Import after a Forget), and its row number is
    then one of that other scope's rows."""

    row: np.ndarray  # int64
    scope: np.ndarray  # int32
    scopes: list[str]

    def of(self, start: int, end: int) -> tuple[str | None, np.ndarray]:
        """The scope that holds most of places [start, end)'s rows now, and each place's row
        in it (-1: not taken, or in another scope now); (None, all -1) if none is taken."""
        codes = self.scope[start:end]
        held = codes[codes >= 0]
        if not len(held):
            return None, np.full(end - start, -1, dtype=np.int64)
        code = int(np.bincount(held).argmax())
        return self.scopes[code], np.where(codes == code, self.row[start:end], -1)


_NONE = _Places(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), [])


@dataclass(frozen=True, slots=True)
class TokenStart:
    """How the start got its token file: reused (the map of the last clean shutdown vouched
    for it; the token-vector column was not read) or written afresh, and why."""

    reused: bool
    why: str

    def __str__(self) -> str:
        return f"token file {'reused' if self.reused else 'rewritten'} ({self.why})"


@dataclass(frozen=True, slots=True)
class _GraphToSave:
    """A scope's graph as a save found it on the loop (``_graphs_now``): where its
    partition starts in the token map, its rows, and the graph (``PartitionAnn.saved``)."""

    start: int
    rows: int
    saving: Saving
    scope: str


class Repository(HotIndex):
    """The hot index (every read, inherited as it is) plus the one writer.

    ``put``, ``remove`` and ``bulk_load`` are the index's own mutators, called here after
    the disk commit and nowhere else: core sees this class only as a ``MemoryStore`` (or a
    ``MemoryReader``), which has none of them. Like qdrant's segment, one object serves
    both sides while the protocols keep them apart.
    """

    def __init__(
        self,
        durable: LanceStore,
        analyzer: Analyzer | None = None,
        max_tokens: int = 64,
        *,
        ann_threshold: int = AnnSettings.threshold,
        ann_ef_search: int = AnnSettings.ef_search,
        ann_build_threads: int = 1,
        access_flush_seconds: float = ACCESS_FLUSH_SECONDS,
        ann_maintain_seconds: float = ANN_MAINTAIN_SECONDS,
        follow_interval: float = 0.0,
        claims: KeyClaims | None = None,
        token_path: Path | None = None,
        token_upkeep_seconds: float = TOKEN_UPKEEP_SECONDS,
        row_trim_seconds: float = ROW_TRIM_SECONDS,
        key_window: timedelta | None = None,
    ):
        """``follow_interval``: seconds between looks for other daemons' commits to the
        store (storage.follow_interval); 0 = this daemon is the store's only writer.
        ``claims``: where keyed Stores claim their key across daemons (None: one daemon).
        ``token_path``: the local file the token vectors are kept in while serving
        (``<data_dir>/tokens.bin``, reused after a clean shutdown, see ``token_map``; None:
        a temporary file, never reused). ``key_window``: how long a keyed Store that
        created nothing replays its answer (store.idempotency_days; None: as long as the
        store lives)."""
        super().__init__(
            durable.dim,
            analyzer,
            ann_threshold=ann_threshold,
            ann_ef_search=ann_ef_search,
            ann_build_threads=ann_build_threads,
            token_path=None,  # until open(): the file at token_path is reused or rewritten
        )
        self._token_path = token_path
        self.token_start: TokenStart | None = None  # set by open()
        # open() left the token file to be written while serving (OWED_TOKENS_MIN_ROWS):
        # until the upkeep has written it, no map is saved (it would vouch for rows with
        # none), and Recalls rank without the rerank
        self.tokens_owed = False
        self._owed_retry_at = 0.0  # (monotonic) after a failed write of it, none before this
        self._owed_backoff = 0.0
        self.postings_start = ""  # set by open(): whether the saved postings were taken
        self.graphs_start = ""  # set by open(): whether saved graphs were taken ("": none saved)
        self._graph_files: set[str] = set()  # open(): the saved graphs' files taken
        self._graph_number = 0  # the next graph file's number, at least (ann_map.write)
        self._durable = durable
        self._compact_inline = False  # maintain_tokens compacts, on a thread
        # The token map and graphs on disk: what they describe (_stamp: rows changed, the
        # file's generation, the graphs), when the last were saved while serving, the
        # writing of them in progress, and the rows changed at the last upkeep
        # (checkpoint_tokens).
        self._checkpointed: tuple[int, int, tuple[tuple[str, object], ...]] | None = None
        self._checkpoint_at = float("-inf")
        self._checkpoint_task: asyncio.Future[bool] | None = None
        self._seen_changes = -1
        self.max_tokens = max_tokens  # token vectors kept per memory (late interaction)
        self._touched: set[str] = set()
        self._claims = claims
        self._upkeep = Job("token file upkeep", token_upkeep_seconds, self.maintain_tokens)
        jobs = [
            Job("persist access counts", access_flush_seconds, self.flush_access_counts),
            Job("approximate-index maintenance", ann_maintain_seconds, self._maintain_ann),
            self._upkeep,
            Job("trim the row arrays", row_trim_seconds, self.trim_rows),
        ]
        self.key_window = key_window
        self.keys_lapse = key_window is not None
        if key_window is not None:
            jobs.append(
                Job("drop lapsed idempotency keys", KEY_LAPSE_SECONDS, self.drop_lapsed_keys)
            )
        self._follower = Follower(durable, self) if follow_interval > 0 else None
        if self._follower is not None:
            jobs.append(Job("follow the shared store", follow_interval, self._follower.follow))
        self._jobs = Jobs(jobs)

    # -- lifecycle -------------------------------------------------------------------

    def open(self) -> float:
        """Load every stored memory into the hot index, start the writer and the due
        approximate-index builds; returns seconds. Blocks: run it off the event loop."""
        start = time.perf_counter()
        # Other daemons may commit while this one loads: follow from before the load.
        version = self._durable.table_version()
        with _no_cyclic_gc():
            self._load_rows()
        for record in self._durable.read_keys():
            self.put_key(record)
        self._drop_lapsed()
        if self._follower is not None:
            self._follower.baseline(version)
        self._durable.start()
        self.maintain_ann()  # big scopes start their HNSW build now
        _release_freed_memory()
        took = time.perf_counter() - start
        log.info(
            "loaded %d memories into the hot index in %.2fs; %s; saved postings %s",
            len(self),
            took,
            self.token_start,
            self.postings_start,
        )
        return took

    def _load_rows(self) -> None:
        # A function of its own: the last row's vector and token vectors are views of the
        # scan's last batch, which a loop variable left in open() would keep alive.
        self._graph_files = set()
        try:
            self._load_rows_and_graphs()
        finally:
            if self._token_path is not None:  # those taken stay, for a start after a crash
                where = ann_map.graphs_path(self._token_path)
                keep = {where.name, *self._graph_files} if self._graph_files else ()
                ann_map.remove(where, keep)  # never raises
                taken = self.token_start is not None and self.token_start.reused
                if not (taken and self.postings_start.startswith("taken")):
                    with contextlib.suppress(OSError):
                        term_map.remove(term_map.terms_path(self._token_path))
        if self.graphs_start:
            log.info("saved approximate indexes: %s", self.graphs_start)

    def _load_rows_and_graphs(self) -> None:
        saved, why = self._saved_tokens()
        postings, self.postings_start = self._saved_postings(saved)
        if saved is not None:
            with self.bulk_load(defer_texts=postings is not None):
                for memory, vector, _ in self._durable.scan(tokens=False):
                    self.put(memory, vector, None)
                why, places, read = self._adopt_tokens(saved)
                if not why and postings is not None:
                    self.postings_start = self._adopt_postings(postings, places)
                elif postings is not None:
                    self.postings_start = "not taken: the token file is not reused"
            if not why:
                version = saved.header["table"]["version"]
                exact = read == (0, 0) and self._durable.table_version() == version
                if exact:
                    how = f"its map matches table version {version}"
                else:
                    how = (
                        f"its map of table version {version}: {len(saved.ids) - read[0]} "
                        f"rows' records taken, {read[1]} rows read from the table"
                    )
                self.token_start = TokenStart(True, how)
                self.graphs_start = self._take_graphs(saved, places)
                if exact:  # what is on disk is current: nothing to save until it changes
                    self._checkpointed = self._stamp()
                return
            log.warning("the token file does not match the table after all (%s): rewriting", why)
            if self._may_owe(len(self._memories)):
                self._owe_tokens()
            else:
                self._rewrite_tokens()
        elif self._may_owe(self._durable.count_rows()):
            with self.bulk_load():
                for memory, vector, _ in self._durable.scan(tokens=False):
                    self.put(memory, vector, None)
            self._owe_tokens()
        else:
            self._use_token_file(TokenFile(self.dim, self._token_path))
            with self.bulk_load():
                for memory, vector, tokens in self._durable.scan():
                    self.put(memory, vector, tokens)
        if self.tokens_owed:
            why += "; written while serving"
        self.token_start = TokenStart(False, why)

    def _may_owe(self, rows: int) -> bool:
        """Whether a start that must write the token file over ``rows`` rows writes it
        while serving: from ``OWED_TOKENS_MIN_ROWS`` on, unless the store is opened at its
        last good version (``open_last_good``: its load reads every column anyway, and no
        read while serving may roll the table back)."""
        return rows >= OWED_TOKENS_MIN_ROWS and not self._durable.open_last_good

    def _owe_tokens(self) -> None:
        """Leave the token file to be written while serving (``write_owed_tokens``, the
        upkeep's first run, at once): every row loaded without its record, an empty file
        (whatever map was beside it deleted)."""
        self._forget_token_records()
        self._use_token_file(TokenFile(self.dim, self._token_path))
        self.tokens_owed = True
        at_once = dataclasses.replace(self._upkeep, first_after=0.0)
        self._jobs.jobs = [at_once if job is self._upkeep else job for job in self._jobs.jobs]

    def _saved_tokens(self) -> tuple[TokenMap | None, str]:
        """The map saved last (at a clean shutdown, or while serving: ``checkpoint_tokens``),
        with the token file opened as the map has it (what was appended after it cut off),
        if the map vouches for the file and names this table; else None and why not. A map
        not taken is deleted here; one taken stays, describing the file's first bytes,
        which nothing writes to again (``TokenFile``)."""
        if self._token_path is None:
            return None, "a temporary file"
        where = token_map.map_path(self._token_path)
        taken = False
        try:
            saved = token_map.read(where)
            problem = token_map.table_mismatch(
                saved.header.get("table", {}), self._durable.identity()
            )
            if not problem:
                try:
                    now = self._token_path.stat()
                except FileNotFoundError:
                    return None, "the token file is missing"
                problem = token_map.file_mismatch(saved.header.get("file", {}), now)
            if problem:
                return None, problem
            file = saved.header["file"]
            self._use_token_file(
                TokenFile(
                    self.dim,
                    self._token_path,
                    keep=int(file["size"]),
                    mtime_ns=int(file["mtime_ns"]),
                )
            )
            taken = True
            return saved, ""
        except Unusable as e:
            return None, str(e)
        except Exception as e:  # an optimisation: never fail the start over it
            log.warning("the token file's map could not be checked", exc_info=True)
            return None, f"the map could not be checked: {e}"
        finally:
            if not taken:
                token_map.remove(where)

    def _saved_postings(self, saved: TokenMap | None) -> tuple[TermMap | None, str]:
        """The postings saved with ``saved`` (``term_map``), if they were saved with it and
        analysed as this daemon analyses; else None and why not. The file stays only if
        they are taken (``_load_rows``)."""
        if self._token_path is None:
            return None, "not kept: a temporary token file"
        where = term_map.terms_path(self._token_path)
        try:
            if saved is None:
                return None, "not taken: the token file is not reused"
            postings = term_map.read(where)
            if postings.header.get("map") != saved.digest:
                return None, "not taken: saved with another token map"
            if postings.header.get("analysis") != self.analyzer.fingerprint:
                return None, "not taken: the texts were analysed another way"
            if int(postings.part_rows.sum()) != len(saved.ids):
                return None, "not taken: they hold another number of rows than the token map"
            return postings, ""
        except Unusable as e:
            return None, f"not taken: {e}"
        except Exception as e:  # an optimisation: never fail the start over it
            log.warning("the saved postings could not be checked", exc_info=True)
            return None, f"not taken: they could not be checked: {e}"

    def _adopt_postings(self, postings: TermMap, places: _Places) -> str:
        """Give each partition its saved postings (inside a deferred bulk load, after
        ``_adopt_tokens`` found where each of the map's rows is now, ``places``); a
        partition that does not fit is left to the load's end to analyse. Then a sample of
        rows is analysed afresh: if any differs from what was taken, everything taken is
        dropped and analysed. Says how it went."""
        taken: list[_Partition] = []
        took = 0
        try:
            took = self._take_postings(postings, places, taken)
            wrong = self._check_postings(taken)
        except Exception as e:  # an optimisation: never fail the start over it
            log.warning("the saved postings could not be taken", exc_info=True)
            wrong = f"they could not be taken: {e}"
        if wrong:
            for part in self._parts.values():
                part.lexical = LexicalPartition()  # all analysed at the load's end
            log.warning("saved postings dropped: %s", wrong)
            return f"dropped: {wrong}"
        return f"taken for {took} of {len(self._memories)} rows"

    def _take_postings(self, postings: TermMap, places: _Places, taken: list[_Partition]) -> int:
        """Give each saved partition's postings to the partition of the scope that holds
        most of its rows now (the pairs of rows changed, gone or moved to another scope
        since dropped, the rows written or changed since analysed here); returns the rows
        whose terms were taken."""
        memories, parts = self._memories, self._parts
        terms = self.analyzer.terms
        base = took = 0
        for index, (rows, words, counts, pairs) in enumerate(postings.partitions()):
            start, base = base, base + rows
            if base > len(places.row):
                break
            if index in postings.skipped:  # saved without them: analysed at the load's end
                continue
            scope, at = places.of(start, base)  # each saved row's row here (-1: not taken)
            live = np.flatnonzero(at >= 0)
            if scope is None:
                continue
            part = parts[scope]
            if len(part.lexical):
                continue
            try:
                languages = [memories[i].language for i in part.ids]
                part.lexical.adopt(at, words, counts, pairs, languages)
            except ValueError:
                log.warning("the saved postings of scope %s do not fit: analysing it", scope)
                continue
            if len(live) < len(part):  # its rows written or changed since: analysed here
                have = np.zeros(len(part), dtype=bool)
                have[at[live]] = True
                for row in np.flatnonzero(~have).tolist():
                    memory = memories[part.ids[row]]
                    part.lexical.set(row, terms(memory.text, memory.language), memory.language)
            taken.append(part)
            took += len(live)
        return took

    def _check_postings(self, taken: list[_Partition]) -> str:
        """Analyse a sample of the rows given saved postings; why they differ ("": none)."""
        ends = list(itertools.accumulate(len(part) for part in taken))
        total = ends[-1] if ends else 0
        for at in sorted(random.sample(range(total), min(total, POSTINGS_SAMPLE))):
            k = bisect.bisect_right(ends, at)
            part, row = taken[k], at - (ends[k - 1] if k else 0)
            memory = self._memories[part.ids[row]]
            want = Counter(self.analyzer.terms(memory.text, memory.language))
            if part.lexical.row_terms(row) != want or part.lexical.doc_language[row] != (
                memory.language
            ):
                return f"memory {memory.id}'s saved terms are not its text's"
        return ""

    def _take_graphs(self, saved: TokenMap, places: _Places) -> str:
        """Give the large scopes the approximate indexes saved with ``saved`` (``ann_map``;
        after ``_adopt_tokens`` found where each of its places' rows is now, ``places``):
        each is read on a thread while the daemon serves, its labels of rows changed or
        gone since dead, the rows written since its tail. Says how it went ("": none were
        saved)."""
        assert self._token_path is not None
        try:
            header, graphs = ann_map.read(ann_map.graphs_path(self._token_path))
            if not graphs:
                return ""
            s = self.ann_settings
            want = ann_map.describe(self.dim, s.m, s.ef_construction)
            problem = token_map.mismatch({k: header.get(k) for k in want}, want, "this daemon")
            if header.get("map") != saved.digest:
                return "none taken: saved with another token map"
            if problem:
                return f"none taken: {problem.replace('the map', 'the saved graphs')}"
        except Unusable as e:
            return "" if not ann_map.graphs_path(self._token_path).exists() else f"none taken: {e}"
        except Exception as e:  # an optimisation: never fail the start over it
            log.warning("the saved approximate indexes could not be checked", exc_info=True)
            return f"none taken: they could not be checked: {e}"
        taken = 0
        for graph in graphs:
            try:
                if self._take_graph(places, graph):
                    taken += 1
                    self._graph_files.add(graph.file.name)
            except Exception:  # that scope builds its graph, as without a saved one
                log.warning("the saved graph %s could not be taken", graph.file.name, exc_info=True)
        return f"{taken} of {len(graphs)} taken" + (", read while serving" if taken else "")

    def _take_graph(self, places: _Places, graph: ann_map.SavedGraph) -> bool:
        """One saved graph: its partition was the map's places [start, start + rows) then;
        a label stays live if its place's row is still as the map has it, in the scope
        that holds most of them now (``places``)."""
        end = graph.start + graph.rows
        if graph.start < 0 or graph.rows <= 0 or end > len(places.row):
            return False
        label_places = graph.places
        live = np.flatnonzero(label_places >= 0)
        at = label_places[live]
        if len(at) and (at.min() < graph.start or at.max() >= end or len(np.unique(at)) != len(at)):
            raise Unusable("its labels are not distinct rows of its scope")
        scope, rows = places.of(graph.start, end)
        if scope is None:
            return False
        row_of_label = np.full(len(label_places), -1, dtype=np.int64)
        row_of_label[live] = rows[at - graph.start]
        held = row_of_label[row_of_label >= 0]
        if len(np.unique(held)) != len(held):  # (places name distinct ids: cannot happen)
            raise Unusable("two of its labels would be one row")
        f = ann_map.open_graph(graph)
        read = functools.partial(ann_map.load, f, graph, self.dim)  # (the cancel event)
        on_disk = ann_map.OnDisk(graph.file.name, graph.size, graph.sha256)
        if not self.adopt_graph(scope, row_of_label, read, on_disk):
            f.close()
            return False
        return True

    def _use_token_file(self, new: TokenFile) -> None:
        self._token_file.close()
        self._token_file = new

    def _adopt_tokens(self, saved: TokenMap) -> tuple[str, _Places, tuple[int, int]]:
        """Point every row (loaded without token vectors) at its record in the reused file
        where the map has the row in the state the table has it now (its updated_at and
        content hash); read the other rows' token vectors from the table and append them (a
        map saved while serving, then rows written, changed or deleted before a crash).
        "" if done, else why not (and no row points anywhere: the caller rewrites the file).
        Also where each place's row is now (``_Places``), and (the map's rows not taken,
        the rows read from the table)."""
        n = len(saved.ids)
        memories = self._memories
        at_of = dict(zip(saved.ids, range(n), strict=True))
        if len(at_of) != n:
            return "the map names a row twice", _NONE, (0, 0)
        file = self._token_file
        counts, offsets = saved.counts, saved.offsets
        has = counts >= 0
        # Sizes are < 2**48 (counts int32, dim < 2**16): no sum below can wrap in int64,
        # as offsets + sizes can for an offset near 2**63.
        sizes = HEADER_BYTES + counts.astype(np.int64) * file.dim  # record_bytes, per row
        outside = np.flatnonzero(has & ((offsets < 0) | (offsets > file.size - sizes)))
        if len(outside):
            why = f"memory {saved.ids[outside[0]]}'s record lies outside the token file"
            return why, _NONE, (0, 0)
        # Every row now, partition after partition (its row and scope code), and its place
        # in the map (-1: none); taken where the map has it in the state the table has it.
        scopes, parts = list(self._parts), list(self._parts.values())
        lengths = [len(part) for part in parts]
        ids: list[str] = []
        for part in parts:
            ids.extend(part.ids)
        at = np.fromiter(map(at_of.get, ids, itertools.repeat(-1)), np.int64, len(ids))
        del at_of
        row = np.concatenate([np.arange(k, dtype=np.int64) for k in lengths] or [at[:0]])
        code = np.repeat(np.arange(len(parts), dtype=np.int32), lengths)
        updated = _column(parts, "updated_us", np.int64)
        if saved.wide:
            hashes = _column(parts, "hashes", np.uint64)
        else:  # a map of format 1: the CRC-32 of the content hash
            state = (
                row_state(m.updated_at, m.content_hash, wide=False)[1]
                for m in map(memories.__getitem__, ids)
            )
            hashes = np.fromiter(state, np.uint64, len(ids))
        known = np.flatnonzero(at >= 0)
        same = (updated[known] == saved.updated[at[known]]) & (
            hashes[known] == saved.hashes[at[known]].astype(np.uint64)
        )
        now = known[same]  # rows (in ``ids``) taken
        taken = np.zeros(n, dtype=bool)
        taken[at[now]] = True
        kept = len(now)
        missing = len(memories) - kept
        if missing > max(DELTA_MIN_ROWS, len(memories) // 4):
            why = f"the map holds {kept} of the table's {len(memories)} rows as they are now"
            return why, _NONE, (0, 0)
        if why := self._check_records(saved, taken):
            return why, _NONE, (0, 0)
        rows_at = np.full(n, -1, dtype=np.int64)
        scope_at = np.full(n, -1, dtype=np.int32)
        rows_at[at[now]] = row[now]
        scope_at[at[now]] = code[now]
        # Codes numbered in the order the map first names each scope: a saved partition
        # whose rows two scopes now hold equally goes to the one that held them first
        # (``_Places.of`` gives a tie to the lowest code), not to whichever this start's
        # scan met first (that scope's own saved postings were then left unused).
        held = scope_at >= 0
        codes, first = np.unique(scope_at[held], return_index=True)
        order = codes[np.argsort(first, kind="stable")]
        renumber = np.zeros(len(parts), dtype=np.int32)
        renumber[order] = np.arange(len(order), dtype=np.int32)
        scope_at[held] = renumber[scope_at[held]]
        scopes = [scopes[c] for c in order.tolist()]
        ends = np.cumsum(lengths)
        bounds = np.searchsorted(now, np.concatenate(([0], ends)))
        for k, part in enumerate(parts):
            mine = now[bounds[k] : bounds[k + 1]]
            if len(mine):
                part.tok_off[row[mine]] = offsets[at[mine]]
                part.tok_n[row[mine]] = counts[at[mine]]
        file.live = int(sizes[has & taken].sum())
        read = 0
        if missing:
            left = np.ones(len(ids), dtype=bool)
            left[now] = False
            read = self._read_missing(list(itertools.compress(ids, left.tolist())))
        return "", _Places(rows_at, scope_at, scopes), (n - kept, read)

    def _check_records(self, saved: TokenMap, taken: np.ndarray) -> str:
        """Check a sample of what the map says before taking it: the records' headers in the
        file, and, when the table has moved on since the map was saved, the token vectors
        themselves against the table's ("": they agree)."""
        file = self._token_file
        chosen = np.flatnonzero(taken & (saved.counts >= 0))
        if not len(chosen):
            return ""
        rng = np.random.default_rng()
        sample = np.sort(rng.choice(chosen, min(len(chosen), RECORD_SAMPLE), replace=False))
        for at in sample.tolist():
            memory_id = saved.ids[at]
            if not file.holds(memory_id, int(saved.offsets[at]), int(saved.counts[at])):
                return f"memory {memory_id}'s record is not in the token file where the map says"
        if self._durable.table_version() == saved.header["table"]["version"]:
            return ""
        compared = rng.choice(sample, min(len(sample), TOKENS_SAMPLE), replace=False)
        want = {saved.ids[at]: at for at in compared.tolist()}
        for memory_id, updated_us, content_hash, tokens in self._durable.read_token_rows(
            list(want)
        ):
            at = want[memory_id]
            if saved.wide and (updated_us, token_map.hash_bits(content_hash)) != (
                int(saved.updated[at]),
                int(saved.hashes[at]),
            ):
                continue  # changed since the load (another daemon): it is not taken anyway
            held = file.read(memory_id, int(saved.offsets[at]), int(saved.counts[at]))
            if tokens is None or held is None or not np.array_equal(held, tokens):
                return f"memory {memory_id}'s token vectors in the table are not the file's"
        return ""

    def _read_missing(self, missing: list[str]) -> int:
        """Read from the table the token vectors of the rows the map did not give
        (``missing``), append them to the file and point the rows at them; returns how many
        rows were read. A row another daemon changed since the load keeps none until its
        change is followed."""
        memories = self._memories
        file = self._token_file
        read = 0
        for memory_id, updated_us, content_hash, tokens in self._durable.read_token_rows(missing):
            memory = memories.get(memory_id)
            read += 1
            if tokens is None or memory is None:
                continue
            if row_state(memory.updated_at, memory.content_hash) != (
                updated_us,
                token_map.hash_bits(content_hash),
            ):
                continue
            part = self._parts[memory.scope]
            row = part.row_of[memory_id]
            part.tok_off[row] = file.append(memory_id, tokens)
            part.tok_n[row] = tokens.shape[0]
        return read

    def _forget_token_records(self) -> None:
        for part in self._parts.values():
            part.tok_n[: len(part)] = -1

    def _rewrite_tokens(self) -> None:
        """Write the token file afresh for an index already loaded (the map did not match
        after all): each row's record as the table has it now, for the rows still in the
        state loaded (a row another daemon changed in between gets its record when
        followed)."""
        self._forget_token_records()
        self._use_token_file(TokenFile(self.dim, self._token_path))
        found = _write_tokens(self._durable, self._token_file, diagnose=True)
        parts = list(self._parts.values())
        offsets, counts, _ = found.places(parts, by_place=False)  # (the others have none)
        self._token_file.live = self._live_bytes(counts)
        _point_rows(parts, offsets, counts)

    @property
    def abandoned_compaction(self) -> bool:
        """The stop left a compaction running (its rewrite uncommitted): the process must
        end without waiting for it, as Lance's threads would at the interpreter's exit."""
        return self._durable.abandoned_compaction

    def start_jobs(self) -> None:
        """Start the background jobs (on the event loop), and have a graph built or read
        on a thread handed over on the loop as soon as it is done."""
        loop = asyncio.get_running_loop()

        def ann_done() -> None:  # on the builder's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                loop.call_soon_threadsafe(self.maintain_ann)

        self.ann_done = ann_done
        self._jobs.start()

    async def shutdown(self) -> None:
        """Stop the jobs, persist the last access counts, finish the queued writes."""
        await self._jobs.stop()
        if self._checkpoint_task is not None:  # a map being written: never two at once
            with contextlib.suppress(Exception):
                await self._checkpoint_task
        try:
            await self.flush_access_counts()
        except Exception:
            log.exception("could not persist access counts at shutdown")
        pending = self._durable.pending()
        if pending:
            log.info("stopping: waiting for the store (%s)", pending)
        await asyncio.to_thread(self._durable.close)  # every queued write committed
        if self._follower is not None and not self._durable.unreachable:
            # The others' last commits too: the map then names the version the index holds.
            try:
                await self._follower.follow()
            except Exception:
                log.exception("the last look at the shared store failed")
        rows = self._token_rows()  # on the loop, like every read of the index
        postings = self._saved_postings_now(rows)  # never raises
        graphs = self._graphs_now(rows)
        await asyncio.to_thread(self._finish, rows, postings, graphs)

    def close(self) -> None:
        """Finish the queued writes and stop the store's threads, save the token file's
        map (the next start reuses the file), close the index. Blocks."""
        self._durable.close()
        rows = self._token_rows()
        self._finish(rows, self._saved_postings_now(rows), self._graphs_now(rows))

    def _finish(
        self,
        rows: TokenMap | None,
        postings: TermMap | None,
        graphs: list[_GraphToSave] | None = None,
    ) -> None:
        try:
            if rows is not None:
                digest = self._save_token_map(rows, postings)
                if digest and graphs is not None:
                    self._save_graphs(graphs, digest)
            elif self._token_path is not None and self.tokens_damaged:
                token_map.remove(token_map.map_path(self._token_path))  # one saved while serving
        finally:
            super().close()

    def _graphs_now(self, rows: object) -> list[_GraphToSave]:
        """Every approximate index a start could serve again (a scope at the threshold or
        above, its graph serving or a saved one being read), where its partition starts
        in ``rows`` (the partitions in the same order), to be saved with the token map.
        Never raises (a stop saves the token map whatever happens here)."""
        if rows is None:
            return []
        out: list[_GraphToSave] = []
        try:
            start = 0
            for scope, part in self._parts.items():
                n = len(part)
                saving = part.ann.saved() if part.ann is not None else None
                if saving is not None and n >= self.ann_settings.threshold:
                    out.append(_GraphToSave(start, n, saving, scope))
                start += n
        except Exception:
            log.exception("could not gather the approximate indexes: the next start builds them")
            return []
        return out

    def _save_graphs(self, graphs: list[_GraphToSave], digest: str) -> None:
        """Save ``graphs`` with the token map ``digest`` names (``ann_map``): the ones not
        on disk yet written (a graph built since the last save; 0.7 KB a row), the others
        named again with their labels' places in this map; none: the graphs saved before
        deleted (they name an older map). On a thread."""
        assert self._token_path is not None
        where = ann_map.graphs_path(self._token_path)
        if not graphs:
            # (numbers past those deleted: a graph in memory may still name one, as a scope
            # just below the threshold keeps its graph and its file's name)
            with contextlib.suppress(OSError):
                self._graph_number = max(self._graph_number, ann_map.next_number(where))
            ann_map.remove(where)  # never raises
            return
        started = time.perf_counter()
        try:
            saves = []
            for graph in graphs:
                rows = graph.saving.row_of_label
                places = np.where(rows >= 0, graph.start + rows, -1)
                saves.append(
                    ann_map.ToSave(
                        graph.start, graph.rows, places, graph.saving.index, graph.saving.on_disk
                    )
                )
            s = self.ann_settings
            size, files, self._graph_number = ann_map.write(
                where,
                digest,
                ann_map.describe(self.dim, s.m, s.ef_construction),
                saves,
                GRAPH_READ_WAIT_SECONDS,
                self._graph_number,
            )
        except Exception:
            log.exception("could not save the approximate indexes: the next start builds them")
            return
        for graph, on_disk in zip(graphs, files, strict=True):
            if on_disk is not None:
                graph.saving.holder.on_disk = on_disk
        kept = [g for g, f in zip(saves, files, strict=True) if f is not None]
        if kept:
            log.info(
                "saved %d approximate index(es) of %d rows (%d MB) in %.1fs: the next start "
                "reads them",
                len(kept),
                sum(len(g.places) for g in kept),
                size >> 20,
                time.perf_counter() - started,
            )

    def _saved_postings_now(self, rows: TokenMap | None) -> TermMap | None:
        """Every partition's postings, in the order ``rows`` lists them (to be saved with
        the token map; none without one)."""
        if rows is None:
            return None
        try:
            return term_map.gather([part.lexical for part in self._parts.values()])
        except Exception:
            log.exception("could not gather the postings: the next start analyses every text")
            return None

    def _token_rows(self) -> TokenMap | None:
        """Where every row's token vectors are in the token file, and each row's state, for
        the file's map; taken on the loop, as every read of the index (arrays copied: ~20 ms
        at a million rows). None: no map can vouch for the file (a temporary one, one never
        opened, or a damaged one)."""
        if (
            self._token_path is None
            or self.token_start is None
            or self.tokens_damaged
            or self.tokens_owed
        ):
            return None
        parts = list(self._parts.values())
        ids: list[str] = []
        for part in parts:
            ids.extend(part.ids)
        counts = _column(parts, "tok_n", np.int32)
        return TokenMap(
            ids,
            np.where(counts >= 0, _column(parts, "tok_off", np.int64), 0),
            counts,
            _column(parts, "updated_us", np.int64),
            _column(parts, "hashes", np.uint64),
        )

    async def checkpoint_tokens(self, *, force: bool = False) -> bool:
        """Save the token file's map while serving (a job, after the token file's upkeep),
        so that a start after a crash or a kill -9 reuses the file too, reading from the
        table only the rows written or changed since (``_adopt_tokens``), instead of the
        whole token-vector column (at a million memories, 13 GB read and 11 GB written).
        Due once rows have changed since the map on disk was saved (or the start left none
        that matches), at the first upkeep that finds no row changed since the last one and
        ``CHECKPOINT_QUIET_SECONDS`` after the last map, or ``CHECKPOINT_SECONDS`` after it
        whatever the writes. The rows are gathered on the loop, the map made and written on
        a thread. ``force``: now, if anything changed. True if it saved one."""
        stamp = self._stamp()
        quiet, self._seen_changes = self.changes == self._seen_changes, self.changes
        if stamp == self._checkpointed or self._checkpoint_task is not None:
            return False
        since = time.monotonic() - self._checkpoint_at
        if not force and since < (CHECKPOINT_QUIET_SECONDS if quiet else CHECKPOINT_SECONDS):
            return False
        rows = self._token_rows()
        if rows is None:
            return False
        graphs = self._graphs_now(rows)
        size = self._token_file.size
        started = time.perf_counter()
        postings = await self._postings_meanwhile()
        encoded = await _encoded_meanwhile(rows.ids)
        self._checkpoint_task = asyncio.ensure_future(
            asyncio.to_thread(self._write_checkpoint, rows, size, graphs, postings, encoded)
        )
        try:
            saved = await asyncio.shield(self._checkpoint_task)
        finally:
            if self._checkpoint_task.done():
                self._checkpoint_task = None
        if not saved:  # logged; tried again as if saved (not every upkeep)
            self._checkpoint_at = time.monotonic()
            return False
        # What was saved: the graphs as the snapshot found them, now with their files.
        self._checkpointed = (*stamp[:2], _graphs_key(graphs))
        self._checkpoint_at = time.monotonic()
        log.info(
            "saved the token file's map while serving (%d rows) in %.1fs: a start after a "
            "crash reuses the file",
            len(rows.ids),
            time.perf_counter() - started,
        )
        return True

    async def _postings_meanwhile(self) -> term_map.Gathering | None:
        """Every partition's postings copied on the loop a slice at a time (the loop
        serves in between: at 10,000 agents x 100, 5M postings), as they were when the token
        map's rows were taken (now: called right after, the loop not let go in between); a
        partition that changed before or while its postings were copied is saved without
        them (a start after a crash analyses that scope). None if the copy failed."""
        gathering = term_map.Gathering()
        try:
            parts = [
                (part.lexical, part.lexical.version, len(part)) for part in self._parts.values()
            ]
            for lexical, version, rows in parts:
                if lexical.version != version:
                    gathering.skip(rows)
                    continue
                for _ in gathering.add(lexical, POSTINGS_SLICE, POSTINGS_SLICE_BYTES):
                    await asyncio.sleep(0)
                    if lexical.version != version:
                        break
                if lexical.version != version:
                    gathering.drop_last(rows)
            for _ in gathering.join(POSTINGS_SLICE_BYTES):  # its own copies: no checks
                await asyncio.sleep(0)
            return gathering
        except Exception:
            log.exception("could not gather the postings while serving")
            return None

    def _stamp(self) -> tuple[int, int, tuple[tuple[str, object], ...]]:
        """What the token map and graphs on disk must describe to be current: the rows
        changed so far, the token file's generation, the large scopes' graphs."""
        graphs = []
        for scope, part in self._parts.items():
            graph = part.ann.current() if part.ann is not None else None
            if graph is not None and len(part) >= self.ann_settings.threshold:
                graphs.append((scope, _graph_id(graph)))
        return self.changes, self._token_file.generation, tuple(graphs)

    def _write_checkpoint(
        self,
        rows: TokenMap,
        size: int,
        graphs: list[_GraphToSave],
        postings: term_map.Gathering | None,
        encoded: tuple[list[bytes], np.ndarray] | None = None,
    ) -> bool:
        """On a thread: sync the file and write ``rows``, the map of its first ``size``
        bytes (replacing the one before), then the postings and graphs with it (the graphs
        not on disk yet written)."""
        assert self._token_path is not None
        try:
            stat = self._token_file.sync()
            if stat.st_size < size:
                raise ValueError(f"the token file is {stat.st_size} bytes, not {size} or more")
            identity = token_map.file_identity(stat)
            rows.header = {"table": self._durable.identity(), "file": {**identity, "size": size}}
            digest = token_map.write(token_map.map_path(self._token_path), rows, encoded)
        except Exception:
            log.exception("could not save the token file's map while serving")
            return False
        if postings is not None:
            self._save_postings(postings.result(), digest)
        else:  # those on disk name the map before
            with contextlib.suppress(OSError):
                term_map.remove(term_map.terms_path(self._token_path))
        self._save_graphs(graphs, digest)
        return True

    def _save_token_map(self, rows: TokenMap, postings: TermMap | None = None) -> str:
        """Write the token file's map (after the store's last commit); on any failure none,
        and the next start rewrites the file. Then ``postings`` beside it, naming it.
        Returns the map's SHA-256 ("": none saved)."""
        assert self._token_path is not None
        where = token_map.map_path(self._token_path)
        try:
            table = self._durable.identity()
            if self._follower is not None and self._follower.applied_version != table["version"]:
                # Other daemons wrote since the last look (or it failed): the index holds an
                # older version than the table's, and any start from here reads it anew.
                log.info(
                    "no map for the token file: the index holds table version %d of %d",
                    self._follower.applied_version,
                    table["version"],
                )
                return ""
            stat = self._token_file.sync()
            if stat.st_size != self._token_file.size:
                raise ValueError(
                    f"the token file is {stat.st_size} bytes, not {self._token_file.size}"
                )
            rows.header = {"table": table, "file": token_map.file_identity(stat)}
            digest = token_map.write(where, rows)
        except Exception:
            log.exception("could not save the token file's map: the next start rewrites the file")
            with contextlib.suppress(OSError):
                token_map.remove(where)
            return ""
        log.info(
            "saved the token file's map (%d rows, table version %d): the next start reuses it",
            len(rows.ids),
            table["version"],
        )
        if postings is not None:
            self._save_postings(postings, digest)
        return digest

    def _save_postings(self, postings: TermMap, digest: str) -> None:
        assert self._token_path is not None
        where = term_map.terms_path(self._token_path)
        try:
            postings.header = {"map": digest, "analysis": self.analyzer.fingerprint}
            term_map.write(where, postings)
        except Exception:
            log.exception("could not save the postings: the next start analyses every text")
            with contextlib.suppress(OSError):
                term_map.remove(where)
            return
        if postings.skipped:
            log.info(
                "saved the postings (%d terms), %d partition(s) without theirs (changed while "
                "copied: a start analyses them)",
                len(postings.terms),
                len(postings.skipped),
            )
        else:
            log.info(
                "saved the postings (%d terms): the next start takes them", len(postings.terms)
            )

    async def _maintain_ann(self) -> None:
        self.maintain_ann()  # installs finished builds, starts due ones (never blocks)

    async def trim_rows(self) -> None:
        """Give back the row arrays' room that a burst of Stores left unused, once it ends
        (``HotIndex.trim_idle_rows``), and the heap pages the old arrays' smaller columns
        leave free."""
        if self.trim_idle_rows():
            await asyncio.to_thread(heap.release_free_pages)

    async def maintain_tokens(self) -> None:
        """The token file's upkeep (a job): rebuild it if a read found it damaged, else
        compact it once its dead bytes outweigh the live ones; then save its map if due
        (``checkpoint_tokens``). One task does all three: none runs during another."""
        if self.tokens_owed:
            if time.monotonic() < self._owed_retry_at:
                return  # the last try failed: not again so soon (a full disk stays full)
            try:
                await self.write_owed_tokens()
            except Exception:
                self._owed_backoff = min(
                    max(2 * self._owed_backoff, OWED_RETRY_FIRST_SECONDS), OWED_RETRY_MAX_SECONDS
                )
                self._owed_retry_at = time.monotonic() + self._owed_backoff
                raise
        elif not await self.repair_tokens() and self._token_file.should_compact():
            await self.compact_tokens_async()
        await self.checkpoint_tokens()

    async def write_owed_tokens(self) -> None:
        """Write the token file open() left to be written while serving: the table's token
        vectors read on a thread into a new file, every row then pointed at its record
        there (a row written, changed or followed meanwhile keeps the one it has). Its map
        is then due at once (none was saved since the start)."""
        started = time.perf_counter()
        log.info("writing the token file while serving (%d rows)", len(self._memories))
        installed = await self._rebuild_tokens("write")
        self.tokens_owed = False
        log.info(
            "wrote the token file while serving in %.1fs (%.2fs of it on the event loop): "
            "Recalls rerank again",
            time.perf_counter() - started,
            installed,
        )

    async def compact_tokens_async(self) -> None:
        """``compact_tokens`` with the copying on a thread: the loop keeps serving (and
        writing to the old file) meanwhile; rows written since the copy began are copied
        on the loop at the end."""
        old = self._token_file
        path = None if old.path is None else old.path.with_name(old.path.name + ".compact")
        snapshot = [
            (part.ids[row], int(part.tok_off[row]), int(part.tok_n[row]))
            for part in self._parts.values()
            for row in np.flatnonzero(part.tok_n[: len(part)] >= 0).tolist()
        ]
        new = TokenFile(self.dim, path)
        filling = _Filling(new)
        try:
            copy = functools.partial(_copy_tokens, old, new, snapshot)
            found = await asyncio.to_thread(filling.run, copy)
            self._install_tokens(new, found, by_place=True)
        except BaseException:
            filling.abandon()
            raise

    async def repair_tokens(self) -> bool:
        """Rebuild the token file from the store once a read found it damaged (say,
        truncated under the daemon); True if it did. The store is read on a thread into
        a new file; rows written meanwhile keep what they point at, when it still reads."""
        if not self.tokens_damaged:
            return False
        log.warning("rebuilding the token file from the store")
        await self._rebuild_tokens("rebuild")
        return True

    async def _rebuild_tokens(self, suffix: str) -> float:
        """The table's token vectors read on a thread into a new file, then installed on
        the loop (``_install_tokens``: rows changed meanwhile keep what they point at, when
        it still reads); returns the install's seconds. Cancelled (a stop), the thread
        stops at its next row."""
        old = self._token_file
        path = None if old.path is None else old.path.with_name(f"{old.path.name}.{suffix}")
        new = TokenFile(self.dim, path)
        filling = _Filling(new)
        try:
            write = functools.partial(_write_tokens, self._durable, new)
            found = await asyncio.to_thread(filling.run, write)
            started = time.perf_counter()
            self._install_tokens(new, found, by_place=False)
        except BaseException:
            filling.abandon()
            raise
        return time.perf_counter() - started

    def _install_tokens(self, new: TokenFile, found: _Found, by_place: bool) -> None:
        """Point every row at ``new``, filled on a thread as ``found`` says: that record
        where the row is still as it was copied (``_Found.places``), else the row's own
        record copied now from the old file, else none. Array work over all the rows at
        once: at a million rows in 10,000 scopes the loop waits a fraction of a second,
        where a Python step per row (or per scope) took seconds."""
        old = self._token_file
        parts = list(self._parts.values())
        # Every row's place in ``new`` worked out in arrays of their own: the index changes
        # only once ``new`` is installed (an append or the rename failing leaves every row
        # pointing into the file it reads from; helper-58's review).
        offsets, counts, taken = found.places(parts, by_place)
        ends = np.cumsum([len(part) for part in parts])
        for i in np.flatnonzero(~taken & (counts >= 0)).tolist():
            # written or changed meanwhile: its own record, copied from the old file
            k = int(np.searchsorted(ends, i, side="right"))
            memory_id = parts[k].ids[i - (int(ends[k - 1]) if k else 0)]
            tokens = old.read(memory_id, int(offsets[i]), int(counts[i]))
            if tokens is None:
                counts[i] = -1
            else:
                offsets[i] = new.append(memory_id, tokens)
        new.live = self._live_bytes(counts)
        damaged = old.damaged
        old.replace_with(new)
        _point_rows(parts, offsets, counts)
        if by_place:  # a compaction that met damage leaves it for the repair
            old.damaged = damaged

    def _live_bytes(self, counts: np.ndarray) -> int:
        """The bytes of the records of rows with ``counts`` token vectors (-1: none)."""
        held = counts[counts >= 0].astype(np.int64)
        return int(held.sum()) * self.dim + HEADER_BYTES * len(held)

    # -- what Stats, health and metrics need ------------------------------------------

    def status(self) -> str:
        """ "ok", or why writes are refused now (e.g. no space left on device)."""
        return self._durable.status()

    def writable(self) -> bool:
        return self.status() == STATUS_OK

    def pending(self) -> str:
        """What closing would wait for, in words ("" = nothing)."""
        return self._durable.pending()

    def write_counters(self) -> dict[str, int]:
        d = self._durable
        return {
            "commits": d.commits,
            "rows_written": d.rows_written,
            "compactions": d.compactions,
            "cleanups": d.cleanups,
            "cache_drops": d.cache_drops,
            "maintainer": int(d.maintains()),
        }

    def follow_lag(self) -> FollowLag:
        """How far the index trails the shared store (following off: nothing seen)."""
        if self._follower is None:
            version = self._durable.table_version()
            return FollowLag(version, version, None)
        return self._follower.lag()

    def follow_failing_for(self) -> float:
        """Seconds the rounds following the shared store have failed in a row (0.0: the
        last one succeeded, or following is off)."""
        return 0.0 if self._follower is None else self._follower.failing_for()

    # -- following other daemons (storage.follow) ---------------------------------------

    async def claim_key(self, agent_id: str, key: str, memory_id: str) -> str:
        """The memory id ``key`` names across daemons: ``memory_id``, unless a Store on
        another daemon claimed the key first (then that one's)."""
        if self._claims is None:
            return memory_id
        return await asyncio.to_thread(self._claims.claim, agent_id, key, memory_id)

    async def catch_up(self) -> None:
        """Apply what other daemons committed up to now (nothing to do without them; nor
        while the object store is unreachable: the write that asks is refused at once then,
        and must not first wait out a listing's timeouts)."""
        if self._follower is not None and not self._durable.unreachable:
            await self._follower.follow()

    def put_followed(self, memory: Memory, vector: np.ndarray, tokens: np.ndarray | None) -> None:
        """A row another daemon committed (or a copy of one already held: skipped)."""
        current = self.get(memory.id)
        if current is not None:
            if (
                current.updated_at == memory.updated_at
                and current.content_hash == memory.content_hash
            ):
                return
            memory = _keep_access(memory, current)
        self.put(memory, vector, tokens)

    # -- writes: disk, then the index ------------------------------------------------

    async def add(
        self, memory: Memory, vector: np.ndarray, tokens: np.ndarray | None = None
    ) -> Memory:
        tokens = quantize_tokens(tokens, self.max_tokens)
        if not memory.language:
            memory = dataclasses.replace(memory, language=self.analyzer.detect(memory.text))
        with tracing.span("commit", op="add", rows=1):
            await self._durable.add([(memory, vector, tokens)])
        return self.put(memory, vector, tokens)

    async def replace(
        self, memory: Memory, vector: np.ndarray | None, tokens: np.ndarray | None = None
    ) -> Memory:
        if vector is None:  # text unchanged: keep the vector and token vectors
            vector = self.vector_of(memory.id)
            if vector is None:
                raise KeyError(memory.id)
            tokens = await self.tokens_to_copy(memory.id)
        else:  # a new text: its language again (a copied record may carry the old one)
            memory = dataclasses.replace(memory, language=self.analyzer.detect(memory.text))
        if (current := self.get(memory.id)) is not None:
            memory = _keep_access(memory, current)
        tokens = quantize_tokens(tokens, self.max_tokens)
        with tracing.span("commit", op="update", rows=1):
            await self._durable.update([(memory, vector, tokens)])
        # A delete that committed while this update waited wins: never resurrect.
        if (current := self.get(memory.id)) is None:
            return memory
        return self.put(_keep_access(memory, current), vector, tokens)

    async def tokens_to_copy(self, memory_id: str) -> np.ndarray | None:
        tokens = self.tokens_of(memory_id)
        # The token file failed the row, or holds no row's yet (written while serving):
        # what the table holds, never None in their place (the write would erase them).
        if tokens is None and (self.has_tokens(memory_id) or self.tokens_owed):
            tokens = await asyncio.to_thread(self._durable.read_tokens, memory_id)
        return tokens

    async def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        with tracing.span("commit", op="delete", rows=len(ids)):
            await self._durable.delete(ids)
        for memory_id in ids:
            self.remove(memory_id)

    def key_record(self, agent_id: str, key: str) -> KeyRecord | None:
        """The recorded answer of a keyed Store that created nothing, while it is in
        force: one made more than ``key_window`` ago has lapsed (the Store is judged
        afresh), whether or not its record was dropped yet."""
        record = super().key_record(agent_id, key)
        return None if record is None or self._lapsed(record) else record

    def put_key(self, record: KeyRecord) -> None:
        """Hold a key's record unless it lapsed already: one read again by the follower
        (its first round reads the keys table whole; a compaction's rewritten fragments
        are read again; a daemon with a longer window keeps them in the table) must not
        come back after opening or the job dropped it."""
        if self._lapsed(record):
            return
        super().put_key(record)

    def _lapsed(self, record: KeyRecord) -> bool:
        return (
            self.key_window is not None
            and record.outcome != StoreOutcome.CREATED
            and record.at < datetime.now(UTC) - self.key_window
        )

    async def drop_lapsed_keys(self) -> int:
        """Forget the records of idempotency keys that lapsed (the job; the durable table
        drops them at its compactions, LanceStore.key_window)."""
        return self._drop_lapsed()

    def _drop_lapsed(self) -> int:
        if self.key_window is None:
            return 0
        dropped = self.drop_keys_before(datetime.now(UTC) - self.key_window)
        if dropped:
            log.debug("dropped %d lapsed idempotency key records", dropped)
        return dropped

    async def record_key(self, record: KeyRecord) -> None:
        with tracing.span("commit", op="record_key", rows=1):
            await self._durable.record_keys([record])
        self.put_key(record)

    def touch(self, ids: Sequence[str], now: datetime) -> None:
        self._touched.update(self.count_access(ids, now))

    async def flush_access_counts(self) -> int:
        """Persist the access counts changed since the last flush (one append to the
        access log, not a rewrite of the memories' rows)."""
        ids, self._touched = self._touched, set()
        entries = []
        for memory_id in ids:
            memory = self.get(memory_id)
            if memory is not None:
                entries.append((memory_id, memory.access_count, memory.last_accessed_at))
        if entries:
            try:
                await self._durable.record_access(entries)
            except BaseException:
                self._touched |= ids  # kept for the next flush (say, once space is freed)
                raise
        return len(entries)


def _graph_id(graph: Any) -> object:
    """A graph as ``_stamp`` tells it apart: the file holding it, else the object."""
    return graph.on_disk if graph.on_disk is not None else id(graph)


def _graphs_key(graphs: list[_GraphToSave]) -> tuple[tuple[str, object], ...]:
    return tuple((g.scope, _graph_id(g.saving.holder)) for g in graphs)


async def _encoded_meanwhile(ids: list[str]) -> tuple[list[bytes], np.ndarray]:
    """``token_map.encode_strings(ids)`` on the loop a piece at a time, the loop serving in
    between (on the save's thread, ~0.15 s of work holding the GIL at a million ids: every
    request beside it waited for the GIL at each turn)."""
    pieces: list[bytes] = []
    lengths = []
    for piece, n in token_map.encode_pieces(ids):
        pieces.append(piece)
        lengths.append(n)
        await asyncio.sleep(0)
    return pieces, np.concatenate(lengths) if lengths else np.zeros(0, np.int64)


def _column(parts: list[_Partition], name: str, dtype: type) -> np.ndarray:
    """The partitions' row array ``name``, their rows held one after the other."""
    if not parts:
        return np.zeros(0, dtype)
    return np.concatenate([getattr(part, name)[: len(part)] for part in parts])


def _keep_access(memory: Memory, current: Memory) -> Memory:
    """``memory`` with at least ``current``'s access count and last access: the counts are
    the store's (``touch``), so an overwrite made from an older read (an update that
    waited for the embedder while recalls counted) never loses them."""
    last = current.last_accessed_at
    if last is None or (memory.last_accessed_at is not None and memory.last_accessed_at > last):
        last = memory.last_accessed_at
    count = max(memory.access_count, current.access_count)
    if count == memory.access_count and last == memory.last_accessed_at:
        return memory
    return dataclasses.replace(memory, access_count=count, last_accessed_at=last)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic GC paused (the load at start: it makes millions of long-lived objects and
    no garbage cycles, and a full collection every few thousand new objects walked them
    all again: 3.4 s of a 100k load's ~30 s on a busy machine, bench/RESULTS.md). The
    daemon collects and freezes the heap right after (``server.freeze_heap``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _release_freed_memory() -> None:
    """Hand the memory the load freed back to the system (glibc keeps freed pages of its
    arenas: at 100k memories the scan's batches left ~1.8 KB a memory of VmRSS behind,
    bench/load_rss.py). Elsewhere (musl, macOS) there is nothing to call."""
    gc.collect()  # the scan's last batches, held by reference cycles
    heap.release_free_pages()


class _Found:
    """The records a thread wrote to a new token file (``_copy_tokens``, ``_write_tokens``):
    per id, the record's offset and count, and which state of its row it was made from:
    the row's updated_at and content hash (``token_map.row_state``, a file written from
    the table), or the offset and count of the record it was copied from (a compaction).
    Compact arrays: at a million rows, a tuple per row held ~330 MB."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self._offsets = array("q")
        self._counts = array("q")
        self._a = array("q")
        self._b = array("Q")
        self.offsets = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)

    def add(self, memory_id: str, offset: int, count: int, a: int, b: int) -> None:
        self.index[memory_id] = len(self._offsets)
        self._offsets.append(offset)
        self._counts.append(count)
        self._a.append(a)
        self._b.append(b)

    def done(self) -> _Found:
        self.offsets = np.frombuffer(self._offsets, dtype=np.int64)
        self.counts = np.frombuffer(self._counts, dtype=np.int64)
        return self

    def places(
        self, parts: list[_Partition], by_place: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every row of ``parts``, one partition after the other: its record's offset and
        count (new arrays), here where the record here is the row's as it is now (its
        updated_at and content hash the same; ``by_place``: the record it was copied from
        the one it points at), else where it points now; and whether here."""
        n = sum(len(part) for part in parts)
        ids = itertools.chain.from_iterable(part.ids for part in parts)
        at = np.fromiter(map(self.index.get, ids, itertools.repeat(-1)), np.int64, n)
        offsets = _column(parts, "tok_off", np.int64)
        counts = _column(parts, "tok_n", np.int32)
        if by_place:  # (a row with none never matches: 2**64 - 1)
            a_now, b_now = offsets, counts.astype(np.int64).astype(np.uint64)
        else:
            a_now, b_now = (
                _column(parts, "updated_us", np.int64),
                _column(parts, "hashes", np.uint64),
            )
        hit = np.flatnonzero(at >= 0)
        j = at[hit]
        a = np.frombuffer(self._a, dtype=np.int64)
        b = np.frombuffer(self._b, dtype=np.uint64)
        taken = np.zeros(n, dtype=bool)
        taken[hit] = (a[j] == a_now[hit]) & (b[j] == b_now[hit])
        rows = np.flatnonzero(taken)
        offsets[rows] = self.offsets[at[rows]]
        counts[rows] = self.counts[at[rows]]
        return offsets, counts, taken


def _point_rows(parts: list[_Partition], offsets: np.ndarray, counts: np.ndarray) -> None:
    """Each row of ``parts`` (one partition after the other) at its record: ``offsets``,
    ``counts`` (``_Found.places``)."""
    start = 0
    for part in parts:
        n = len(part)
        part.tok_off[:n] = offsets[start : start + n]
        part.tok_n[:n] = counts[start : start + n]
        start += n


class _Filling:
    """A new token file filled on a thread (``run``) for the loop to install. Not installed
    (the filling failed or was cancelled, or the install failed: ``abandon``), it is closed
    and removed by whichever side holds it last: never by the loop while the thread may
    still write to it (its descriptor's number may be another file's by then)."""

    def __init__(self, new: TokenFile):
        self.new = new
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._returned = False
        self._abandoned = False

    def run(self, fill: Callable[[threading.Event], _Found]) -> _Found:
        """On the thread: ``fill(stop)``, handing the file over to the loop if it still
        wants it."""
        with self._lock:
            if self._abandoned:  # given up before the thread began: the loop removed it
                raise _Stopped
            self._started = True
        try:
            found = fill(self.stop)
        except BaseException:
            _discard(self.new)
            raise
        with self._lock:
            if not self._abandoned:
                self._returned = True
                return found
        _discard(self.new)
        raise _Stopped

    def abandon(self) -> None:
        """On the loop: the file will not be installed; the thread stops at its next row."""
        with self._lock:
            self._abandoned = True
            self.stop.set()
            # the thread is done with it, or never began (a stop cancelled the call before
            # the executor ran it: nothing else would close and remove the file)
            mine = self._returned or not self._started
        if mine:
            _discard(self.new)


def _discard(new: TokenFile) -> None:
    new.close()
    if new.path is not None:
        with contextlib.suppress(OSError):
            new.path.unlink(missing_ok=True)


def _copy_tokens(
    old: TokenFile,
    new: TokenFile,
    snapshot: list[tuple[str, int, int]],
    stop: threading.Event | None = None,
) -> _Found:
    """The snapshot's records copied from ``old`` into ``new`` (runs on a thread: only
    reads of records the loop no longer writes, and appends to a file nobody else has).
    Raises ``_Stopped`` once ``stop`` is set."""
    found = _Found()
    for memory_id, offset, count in snapshot:
        if stop is not None and stop.is_set():
            raise _Stopped
        tokens = old.read(memory_id, offset, count)
        if tokens is not None:
            found.add(memory_id, new.append(memory_id, tokens), count, offset, count)
    return found.done()


class _Stopped(Exception):
    """The token file's writing was cancelled (the daemon stops)."""


def _write_tokens(
    durable: LanceStore,
    new: TokenFile,
    stop: threading.Event | None = None,
    *,
    diagnose: bool = False,
) -> _Found:
    """Every stored row's token vectors appended to ``new`` (runs on a thread; ``new`` is
    nobody else's yet), each with the row's state (``token_map.row_state``). Raises
    ``_Stopped`` once ``stop`` is set. ``diagnose``: a failed read says what is damaged
    (at start; ``LanceStore.scan_token_rows``)."""
    found = _Found()
    hash_bits = token_map.hash_bits
    with contextlib.closing(durable.scan_token_rows(diagnose=diagnose)) as rows:
        for memory_id, updated_us, content_hash, tokens in rows:
            if stop is not None and stop.is_set():
                raise _Stopped
            if tokens is not None:
                offset = new.append(memory_id, tokens)
                found.add(memory_id, offset, tokens.shape[0], updated_us, hash_bits(content_hash))
    return found.done()


def quantize_tokens(tokens: np.ndarray | None, max_tokens: int) -> np.ndarray | None:
    """Unit-length token vectors as int8 (x 127), at most ``max_tokens`` rows: a quarter of
    float32's memory; the cosine error is about 0.005, far below what reranking notices."""
    if tokens is None or tokens.dtype == np.int8:
        return tokens
    clipped = np.clip(np.asarray(tokens[:max_tokens], dtype=np.float32), -1.0, 1.0)
    return np.ascontiguousarray(np.rint(clipped * 127.0), dtype=np.int8)
