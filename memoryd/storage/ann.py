"""Approximate vector search for scope partitions too large to scan exactly.

A partition of at least ``AnnSettings.threshold`` rows gets a faiss HNSW graph over 8-bit
scalar-quantised copies of its vectors (about 530 B/row at 384-d, two thirds of the
float16 matrix the partition already holds). A search asks the graph for ``max(4k, 64)`` labels,
restricted inside the graph walk to the rows the caller's predicate allows (expiry,
superseded, category: the partition's mask), adds the rows the graph does not hold (the
*tail*), and re-scores that short list with ``topk_dot_f16`` over the stored vectors.
So scores and tie order are the exact kernel's; what the graph can change is only which
rows make the short list. If fewer than k rows survive, the caller runs the exact scan.

Labels. The partition moves rows (deletes swap the last row into the hole), so the graph
is keyed by stable labels: label p is row p of the snapshot the build read. ``_Labels``
keeps label -> row and row -> label in step with every write, move and delete on the loop
thread. A row whose vector changes loses its label (it joins the tail) and the old label
is dead; dead labels stay in the graph as waypoints but are never returned (the search
bitmap maps them to "not allowed"). When tail plus dead labels exceed
``rebuild_fraction`` of the rows, a new graph is built in the background and swapped in.

Threads. Everything here runs on the event loop thread except ``_build``, which runs on a
daemon thread, one build at a time per hot index (``build_lock``) so one of the two cores
stays with the loop and the embedder. The builder reads rows [0, m) of the matrix the
partition held at the snapshot *without copying it* (a copy of 300k x 384 floats would
stall the loop and double the memory; it widens one chunk of rows at a time). The loop
keeps writing that matrix meanwhile;
every row position below m it writes kills label p (``_Labels.reading``), so whatever the
builder read at a written position, that label is never returned. Only rows untouched
since the snapshot keep their labels, and for those the builder read what the loop still
holds. The finished graph is handed over on the loop thread (``maintain`` polls the
future; the builder's thread asks the loop's owner to call it as soon as it is done,
``on_done``) and is never modified again, only searched, from the loop thread.

faiss is imported on first use: daemons whose partitions stay small never load it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from memoryd_native import topk_dot_f16

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
F16 = npt.NDArray[np.float16]  # the partition's vectors
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

_TRAIN_ROWS = 10_000  # rows sampled to fit the 8-bit quantiser's per-dimension ranges
_ADD_CHUNK = 4_096  # rows per faiss add: the granularity at which a build can be cancelled
_RETRY_AFTER_S = 600.0  # after a failed build, answer exactly this long before trying again
# A filtered graph walk still steps through the rows the filter excludes: with few rows
# eligible it slows down and misses more, while the exact scan scores eligible rows only.
# Below this share of eligible rows the exact scan answers (measured at 1/4: recall@10
# 0.99-1.0 after the re-score, latency as unfiltered).
_MIN_ELIGIBLE_SHARE = 0.25


@dataclass(frozen=True)
class AnnSettings:
    """How large partitions are searched approximately.

    threshold: rows in one partition from which it gets a graph (dropped again below
        three quarters of it). 0 disables approximate search.
    ef_search: HNSW candidate list per search (raised to the fetch size when smaller).
    build_threads: faiss threads for a build (the loop and the embedder share the cores).
    m, ef_construction: HNSW graph degree and build-time candidate list.
    rebuild_fraction: rebuild once tail rows plus dead labels exceed this share of rows.
    """

    threshold: int = 200_000
    # Measured on real sentence embeddings (bench/RESULTS.md, "HNSW recall on real
    # embeddings"): at M 16, efConstruction 64, ef 128 a graph of 100k LoCoMo turns and
    # synthetic memories found 0.75 of the exact top 10 for LoCoMo's questions, and none
    # of it for some; M 32, efConstruction 200, ef 512 found 0.999.
    ef_search: int = 512
    build_threads: int = 1
    m: int = 32
    ef_construction: int = 200
    rebuild_fraction: float = 0.1

    def __post_init__(self) -> None:
        checks = (
            ("threshold", self.threshold >= 0, ">= 0"),
            ("ef_search", self.ef_search >= 1, ">= 1"),
            ("build_threads", self.build_threads >= 1, ">= 1"),
            ("m", 4 <= self.m <= 128, "in [4, 128]"),
            ("ef_construction", self.ef_construction >= 1, ">= 1"),
            ("rebuild_fraction", 0.0 < self.rebuild_fraction <= 1.0, "in (0, 1]"),
        )
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"ann {name} is {getattr(self, name)!r}; it must be {rule}")

    @property
    def enabled(self) -> bool:
        return self.threshold > 0


@dataclass(frozen=True)
class AnnStatus:
    """One partition's approximate index, for Stats and logs."""

    scope: str
    rows: int  # rows in the partition
    indexed: int  # rows the serving graph returns (live labels); 0 while none is ready
    tail: int  # rows searched exactly beside the graph (added or changed since its build)
    dead: int  # labels in the graph that no longer stand for a row
    building: bool
    nbytes: int  # graph(s) and label maps, including a build in progress
    searches: int  # searches the graph answered
    fallbacks: int  # searches where the graph came back short and the exact scan answered


class _Labels:
    """label <-> row maps of one graph (serving or being built), kept on the loop thread."""

    def __init__(self, size: int, capacity: int, *, reading: bool):
        self.row_of_label = np.arange(size, dtype=np.int64)  # -1: dead
        self.label_of_row = np.full(max(capacity, size, 16), -1, dtype=np.int64)  # -1: tail
        self.label_of_row[:size] = self.row_of_label
        self.live = size
        # Positions the builder may still read: a write below this kills that position's label.
        self.reading = size if reading else 0
        self.version = 0  # moves with every change of the maps (a search's cached view)

    @classmethod
    def of_rows(cls, row_of_label: I64, capacity: int) -> _Labels:
        """The maps of a saved graph (``ann_map``): label i stands for row
        ``row_of_label[i]`` (distinct rows; -1: dead)."""
        labels = cls(0, capacity, reading=False)
        labels.row_of_label = row_of_label.astype(np.int64)
        live = np.flatnonzero(row_of_label >= 0)
        labels.label_of_row[row_of_label[live]] = live
        labels.live = len(live)
        return labels

    @property
    def size(self) -> int:
        return len(self.row_of_label)

    def nbytes(self) -> int:
        return self.row_of_label.nbytes + self.label_of_row.nbytes

    def _kill(self, label: int) -> None:
        if label < 0:
            return
        row = int(self.row_of_label[label])
        if row >= 0:
            self.label_of_row[row] = -1
            self.row_of_label[label] = -1
            self.live -= 1

    def wrote(self, row: int) -> None:
        """The vector at ``row`` was (re)written: whatever label the row had is stale."""
        self.version += 1
        if row >= len(self.label_of_row):
            grown = np.full(max(2 * len(self.label_of_row), row + 1), -1, dtype=np.int64)
            grown[: len(self.label_of_row)] = self.label_of_row
            self.label_of_row = grown
        self._kill(int(self.label_of_row[row]))
        if row < self.reading:
            self._kill(row)

    def moved(self, hole: int, last: int) -> None:
        """The row at ``hole`` was deleted and the row at ``last`` moved into it."""
        self.version += 1
        self._kill(int(self.label_of_row[hole]))
        if hole == last:
            return
        label = int(self.label_of_row[last])
        self.label_of_row[hole] = label
        self.label_of_row[last] = -1
        if label >= 0:
            self.row_of_label[label] = hole
        if hole < self.reading:
            self._kill(hole)


@dataclass(frozen=True)
class _View:
    """What a search derives from the partition's mask and the graph's labels, each an
    O(rows) pass (at 1M rows in one scope ~3 ms of numpy, and a masked scan of every row
    to re-score the short list, all per Recall before it was kept): kept while the graph,
    its labels, the row count and the mask object (the partition's cached one: a new
    object after every write or expiry) stay the same."""

    graph: _Graph
    version: int
    n: int
    mask: U8
    eligible: int  # rows the mask allows
    bitmap: U8  # allowed labels, one bit each (dead labels read 0): the walk's filter
    selector: Any  # faiss.IDSelectorBitmap over ``bitmap`` (which it does not own)
    tail: I64  # allowed rows the graph does not hold, ascending

    @staticmethod
    def of(graph: _Graph, n: int, mask: U8, eligible: int) -> _View:
        import faiss

        labels = graph.labels
        allowed = np.zeros(n + 1, dtype=np.uint8)  # the extra 0 is what dead labels (-1) read
        allowed[:n] = mask[:n]
        bitmap = np.packbits(allowed[labels.row_of_label], bitorder="little")
        selector = faiss.IDSelectorBitmap(len(bitmap), faiss.swig_ptr(bitmap))
        tail = np.flatnonzero(allowed[:n] & (labels.label_of_row[:n] < 0))
        return _View(graph, labels.version, n, mask, eligible, bitmap, selector, tail)


@dataclass
class _Graph:
    index: Any  # faiss.IndexHNSWSQ; immutable once handed over
    labels: _Labels
    nbytes: int
    on_disk: Any = None  # the saved file that holds it (``ann_map``), once there is one


@dataclass(frozen=True)
class Saving:
    """A partition's graph as a save finds it on the loop (``PartitionAnn.saved``): each
    label's row then (-1: dead), the file that already holds it (None: not saved yet), and
    a call for its faiss index (from a thread, waiting up to its argument's seconds for a
    saved graph still being read; None if that read failed or did not end in time)."""

    row_of_label: I64
    on_disk: Any
    index: Callable[[float], Any]
    holder: Any  # what to tell once it is saved: ``holder.on_disk = ...``


class _Build:
    def __init__(self, labels: _Labels, *, saved: bool = False, on_disk: Any = None):
        self.labels = labels
        self.saved = saved  # a saved graph being read (``adopt``), not a build
        self.on_disk = on_disk  # the file being read (``adopt``)
        self.future: concurrent.futures.Future[_Graph] = concurrent.futures.Future()
        self.cancel = threading.Event()
        self.nbytes = 0  # written by the builder thread, read by the loop (an int swap)
        self.started = time.perf_counter()


_READS = threading.Lock()  # saved graphs are read one at a time: the loop keeps its core


class _Cancelled(Exception):
    pass


class PartitionAnn:
    """The approximate index of one partition: the serving graph and a build in flight."""

    def __init__(
        self,
        settings: AnnSettings,
        build_lock: threading.Lock,
        on_done: Callable[[], None] | None = None,
    ):
        """``on_done``: called on the builder's thread when a build or a read ends, so
        that the loop can hand the graph over at once (``maintain``)."""
        self.settings = settings
        self._build_lock = build_lock
        self._on_done = on_done
        self.serving: _Graph | None = None
        self.building: _Build | None = None
        self._retry_at = 0.0
        self.searches = 0
        self.fallbacks = 0
        self._view: _View | None = None

    # --- keeping labels in step with the partition (loop thread) --------------------------

    def wrote(self, row: int) -> None:
        for labels in self._label_maps():
            labels.wrote(row)

    def moved(self, hole: int, last: int) -> None:
        for labels in self._label_maps():
            labels.moved(hole, last)

    def _label_maps(self) -> list[_Labels]:
        maps = [self.serving.labels] if self.serving is not None else []
        if self.building is not None:
            maps.append(self.building.labels)
        return maps

    # --- building and hand-over --------------------------------------------------------------

    def maintain(self, matrix: F16, n: int) -> None:
        """Install a finished build; start one if there is no graph or it has gone stale."""
        build = self.building
        if build is not None and build.future.done():
            self.building = None
            try:
                graph = build.future.result()
            except Exception as e:
                if build.saved:  # built now instead
                    log.warning(
                        "the saved approximate index of %d rows could not be taken (%s): "
                        "building it",
                        build.labels.size,
                        e,
                    )
                else:
                    log.exception(
                        "building the approximate index of %d rows failed", build.labels.size
                    )
                    self._retry_at = time.monotonic() + _RETRY_AFTER_S
            else:
                graph.labels.reading = 0
                self.serving = graph
                self._view = None  # it holds the graph replaced
                log.info(
                    "approximate index of %d rows %s in %.1fs (%d MB); %d changed meanwhile",
                    graph.labels.size,
                    "read as it was saved" if build.saved else "ready",
                    time.perf_counter() - build.started,
                    graph.nbytes >> 20,
                    graph.labels.size - graph.labels.live,
                )
        if self.building is None and n > 0 and self._due(n):
            self._start(matrix, n)

    def _due(self, n: int) -> bool:
        if time.monotonic() < self._retry_at:
            return False
        graph = self.serving
        if graph is None:
            return True
        stale = (n - graph.labels.live) + (graph.labels.size - graph.labels.live)
        return stale > self.settings.rebuild_fraction * n

    def _start(self, matrix: F16, n: int) -> None:
        build = _Build(_Labels(n, matrix.shape[0], reading=True))
        self.building = build
        self._tell_when_done(build)
        thread = threading.Thread(
            target=self._run,
            args=(build, matrix, n),
            name="memoryd-ann-build",
            daemon=True,  # a build never holds up the daemon's exit
        )
        thread.start()

    def _run(self, build: _Build, matrix: F16, n: int) -> None:
        try:
            with self._build_lock:
                graph = _build(matrix, n, self.settings, build)
        except BaseException as exc:  # handed to the loop thread, which logs it
            build.future.set_exception(exc)
        else:
            build.future.set_result(graph)

    def adopt(
        self,
        row_of_label: I64,
        capacity: int,
        read: Callable[[threading.Event], Any],
        on_disk: Any = None,
    ) -> None:
        """Serve a saved graph (``ann_map``) instead of building one: label i stands for
        row ``row_of_label[i]`` (distinct rows below ``capacity``; -1: dead), and ``read``
        returns its faiss index (given the event ``close`` sets), on a thread, one read
        at a time, while the loop keeps the labels in step with the partition as during a
        build; if it fails, a build starts. ``on_disk``: the saved file it is read from
        (a later save names it again instead of writing the graph anew)."""
        assert self.serving is None and self.building is None
        labels = _Labels.of_rows(row_of_label, capacity)
        build = _Build(labels, saved=True, on_disk=on_disk)
        self.building = build
        self._tell_when_done(build)

        def run() -> None:
            try:
                with _READS:
                    index = read(build.cancel)
                if index.ntotal != labels.size:
                    raise ValueError(f"{index.ntotal} vectors for {labels.size} labels")
                graph = _Graph(index, labels, _graph_nbytes(index), build.on_disk)
            except BaseException as exc:  # handed to the loop thread, which logs it
                build.future.set_exception(exc)
            else:
                build.future.set_result(graph)

        threading.Thread(target=run, name="memoryd-ann-read", daemon=True).start()

    def _tell_when_done(self, build: _Build) -> None:
        on_done = self._on_done
        if on_done is not None:
            build.future.add_done_callback(lambda _: on_done())

    def current(self) -> Any:
        """The graph a save would take now (``saved``): the serving one, or a saved one
        being read; None without one. For telling whether it changed since a save."""
        if self.serving is not None:
            return self.serving
        build = self.building
        return build if build is not None and build.saved else None

    def saved(self) -> Saving | None:
        """What a save takes of this partition's graph (``ann_map``; on the loop): None
        without one, else ``Saving``: for a saved graph still being read (a save soon after
        the start) its labels as they are now and the file it is read from."""
        graph = self.serving
        if graph is not None:
            index = graph.index
            return Saving(graph.labels.row_of_label.copy(), graph.on_disk, lambda _t: index, graph)
        build = self.building
        if build is None or not build.saved:
            return None

        def when_read(timeout: float) -> Any:
            try:
                return build.future.result(timeout).index
            except Exception:  # a failed read or the wait's end: nothing to save
                return None

        return Saving(build.labels.row_of_label.copy(), build.on_disk, when_read, build)

    def wait(self, timeout: float | None) -> bool:
        """Block until the build in flight (if any) ends; False if it is still running."""
        build = self.building
        if build is None:
            return True
        done, _ = concurrent.futures.wait([build.future], timeout=timeout)
        return bool(done)

    def close(self) -> None:
        self._view = None
        if self.building is not None:
            self.building.cancel.set()
            self.building = None

    # --- searching (loop thread) -------------------------------------------------------------

    def search(
        self, matrix: F16, n: int, query: F32, mask: U8, k: int, *, keep: bool = False
    ) -> tuple[I64, F32] | None:
        """Top-k like ``topk_dot(matrix[:n], query, mask, k)``, or None: scan exactly.
        ``keep``: ``mask`` is the partition's cached one (no filter of the caller's own),
        so what the search derives from it is kept for the next search with it."""
        graph = self.serving
        if graph is None or k <= 0:
            return None
        labels = graph.labels
        view = self._view
        fresh = (
            view is not None
            and view.graph is graph
            and view.version == labels.version
            and view.n == n
            and view.mask is mask
        )
        eligible = view.eligible if fresh and view is not None else int(np.count_nonzero(mask[:n]))
        fetch = max(4 * k, 64)
        # A walk computes about fetch * m distances anyway: past that, scanning is cheaper.
        if eligible < _MIN_ELIGIBLE_SHARE * n or fetch * self.settings.m >= eligible:
            return None
        import faiss

        if not fresh or view is None:
            view = _View.of(graph, n, mask, eligible)
            if keep:
                self._view = view

        params = faiss.SearchParametersHNSW(efSearch=max(self.settings.ef_search, fetch))
        params.sel = view.selector
        _, found = graph.index.search(query.reshape(1, -1), fetch, params=params)
        hits = found[0]
        rows = labels.row_of_label[hits[hits >= 0]]
        rows = rows[rows >= 0]
        # the short list, ascending (the exact kernel's tie rule is by row): the graph's
        # allowed rows and the tail, re-scored from the stored vectors
        shortlist = np.union1d(rows[mask[rows] != 0], view.tail)
        idx, scores = topk_dot_f16(
            matrix[shortlist], query, np.ones(len(shortlist), dtype=np.uint8), k
        )
        idx = shortlist[idx]
        if len(idx) < min(k, eligible):
            self.fallbacks += 1
            return None
        self.searches += 1
        return idx, scores

    # --- reporting -----------------------------------------------------------------------------

    def nbytes(self) -> int:
        total = 0
        if self.serving is not None:
            total += self.serving.nbytes + self.serving.labels.nbytes()
        if self.building is not None:
            total += self.building.nbytes + self.building.labels.nbytes()
        return total

    def status(self, scope: str, n: int) -> AnnStatus:
        graph = self.serving
        live = graph.labels.live if graph is not None else 0
        return AnnStatus(
            scope=scope,
            rows=n,
            indexed=live,
            tail=n - live if graph is not None else n,
            dead=graph.labels.size - live if graph is not None else 0,
            building=self.building is not None,
            nbytes=self.nbytes(),
            searches=self.searches,
            fallbacks=self.fallbacks,
        )


def _build(matrix: F16, n: int, settings: AnnSettings, build: _Build) -> _Graph:
    """Runs on the builder thread: an HNSW graph over rows [0, n) of ``matrix``, label = row."""
    import faiss

    if build.cancel.is_set():
        raise _Cancelled
    faiss.omp_set_num_threads(settings.build_threads)  # this thread's OpenMP setting only
    dim = matrix.shape[1]
    index = faiss.IndexHNSWSQ(
        dim, faiss.ScalarQuantizer.QT_8bit, settings.m, faiss.METRIC_INNER_PRODUCT
    )
    index.hnsw.efConstruction = settings.ef_construction
    step = max(1, math.ceil(n / _TRAIN_ROWS))
    index.train(np.ascontiguousarray(matrix[:n:step], dtype=np.float32))
    for start in range(0, n, _ADD_CHUNK):
        if build.cancel.is_set():
            raise _Cancelled
        # float16 rows (the hot index's) widened a chunk at a time
        index.add(np.ascontiguousarray(matrix[start : min(n, start + _ADD_CHUNK)], np.float32))
        build.nbytes = _graph_nbytes(index)
    return _Graph(index, build.labels, _graph_nbytes(index))


def _graph_nbytes(index: Any) -> int:
    """Bytes faiss holds for an IndexHNSWSQ: codes, neighbour lists, levels and offsets."""
    import faiss

    hnsw = index.hnsw
    codes = faiss.downcast_index(index.storage).codes.size()
    return int(codes + 4 * hnsw.neighbors.size() + 4 * hnsw.levels.size() + 8 * hnsw.offsets.size())
