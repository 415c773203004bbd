"""The hot index's approximate search (faiss HNSW + exact re-score) against its exact scan.

Each test runs the same operations on an index with a low ``ann_threshold`` and on an
exact-only twin (``ann_threshold=0``) and compares what a caller would see. Every test
also checks that the approximate path really answered (``ann_status().searches``), so a
silent fall back to the exact scan cannot make it pass.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.core.records import Category, Memory
from memoryd.storage.ann import AnnSettings, _Cancelled, _Labels
from memoryd.storage.hot_index import HotIndex

from ..conftest import record

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 128  # production is 384-d; nothing here depends on it, and builds are 3x faster
THRESHOLD = 2_000
ROWS = 3_000  # above fetch (80) x M (32) distances: else the exact scan answers
SCOPE = "agent:a"


def mem(i: int, scope: str = SCOPE, **kw: object) -> Memory:
    return record(i, scope=scope, **({"created_at": NOW, "updated_at": NOW} | kw))


def clustered(rng: np.random.Generator, n: int, clusters: int = 40) -> np.ndarray:
    """Unit vectors around random unit centres (same-cluster cosine ~0.5, like sentences)."""
    centres = rng.standard_normal((clusters, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[rng.integers(0, clusters, n)]
    x += rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def near(rng: np.random.Generator, v: np.ndarray, noise: float = 0.5) -> np.ndarray:
    q = v + noise * rng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
    return (q / np.linalg.norm(q)).astype(np.float32)


class Twin:
    """An approximate index and an exact one, fed the same operations."""

    def __init__(self, vectors: np.ndarray, threshold: int = THRESHOLD):
        self.ann = HotIndex(DIM, ann_threshold=threshold)
        self.exact = HotIndex(DIM, ann_threshold=0)
        for i, v in enumerate(vectors):
            self.put(mem(i, category=Category.FACT if i % 10 else Category.DECISION), v)

    def put(self, memory: Memory, vector: np.ndarray) -> None:
        for idx in (self.ann, self.exact):
            idx.put(replace(memory), vector)  # each index derives links on its own copy

    def remove(self, memory_id: str) -> None:
        for idx in (self.ann, self.exact):
            idx.remove(memory_id)

    def build(self) -> None:
        self.ann.maintain_ann()
        assert self.ann.wait_for_ann(timeout=60)
        (status,) = self.ann.ann_status()
        assert not status.building and status.indexed > 0

    def searches(self) -> int:
        return sum(s.searches for s in self.ann.ann_status())

    def search(self, q: np.ndarray, k: int = 10, **kw: object) -> tuple[list[str], list[str]]:
        a = self.ann.search(q, [SCOPE], k, now=NOW, **kw)  # type: ignore[arg-type]
        e = self.exact.search(q, [SCOPE], k, now=NOW, **kw)  # type: ignore[arg-type]
        for memory, score in a:  # re-scored exactly: the stored vector's dot product
            stored = self.ann.vector_of(memory.id)
            assert stored is not None
            assert score == pytest.approx(float(stored @ q), abs=1e-5)
        return [m.id for m, _ in a], [m.id for m, _ in e]


def recall(pairs: list[tuple[list[str], list[str]]]) -> float:
    return float(np.mean([len(set(a) & set(e)) / max(1, len(e)) for a, e in pairs]))


def test_below_the_threshold_results_are_the_exact_scans() -> None:
    rng = np.random.default_rng(1)
    x = clustered(rng, THRESHOLD - 1)
    twin = Twin(x)
    for j in range(20):
        q = near(rng, x[j])
        a = twin.ann.search(q, [SCOPE], 10, now=NOW)
        e = twin.exact.search(q, [SCOPE], 10, now=NOW)
        assert [(m.id, s) for m, s in a] == [(m.id, s) for m, s in e]
    assert twin.ann.ann_status() == []  # no index was even attached


def test_approximate_results_agree_with_the_exact_scan() -> None:
    rng = np.random.default_rng(2)
    x = clustered(rng, ROWS)
    twin = Twin(x)
    first = twin.search(near(rng, x[0]))  # no graph yet: exact, and a build starts
    assert first[0] == first[1] and twin.searches() == 0
    twin.build()
    pairs = [twin.search(near(rng, x[j])) for j in range(60)]
    assert twin.searches() == 60
    assert recall(pairs) >= 0.95
    # The hybrid pool's vector leg goes through the same path.
    for j in range(10):
        q = near(rng, x[j])
        pool = twin.ann.candidates(q, "", [SCOPE], 20, now=NOW, lexical=False)
        truth = twin.exact.candidates(q, "", [SCOPE], 20, now=NOW, lexical=False)
        assert len({m.id for m in pool.memories} & {m.id for m in truth.memories}) >= 18
    assert twin.searches() == 70
    # A category filter that leaves a tenth of the rows eligible is scanned exactly.
    q = near(rng, x[5])
    only = frozenset({Category.DECISION})
    a, e = twin.search(q, categories=only)
    assert a == e and twin.searches() == 70


def test_deleted_superseded_expired_and_filtered_rows_never_come_back() -> None:
    rng = np.random.default_rng(3)
    x = clustered(rng, ROWS)
    twin = Twin(x)
    other_scope = mem(ROWS + 1, scope="agent:b")
    twin.put(other_scope, x[0])  # identical vector, another scope
    twin.build()
    queries = [near(rng, x[j], noise=0.3) for j in range(40)]
    tops = [twin.search(q)[0] for q in queries]
    banned: set[str] = set()
    fresh = ROWS + 10
    for n, ids in enumerate(tops):
        victim = ids[n % 3]  # one of each query's best three
        if victim in banned:
            continue
        memory = twin.exact.get(victim)
        assert memory is not None
        kind = n % 4
        if kind == 0:
            twin.remove(victim)
        elif kind == 1:  # a newer memory supersedes it (the newer one is far away)
            twin.put(mem(fresh, supersedes=victim), clustered(rng, 1)[0])
            fresh += 1
        elif kind == 2:  # expired (metadata-only update: the vector and its label stay)
            twin.put(mem(_num(victim), expires_at=NOW - timedelta(seconds=1)), x[_num(victim)])
        else:  # moved out of the requested category
            twin.put(mem(_num(victim), category=Category.PREFERENCE), x[_num(victim)])
        banned.add(victim)
    before = twin.searches()
    pairs = []
    for q in queries:
        a, e = twin.search(q, k=10, categories=frozenset({Category.FACT, Category.DECISION}))
        assert not banned & set(a)
        assert other_scope.id not in a
        pairs.append((a, e))
    assert twin.searches() - before == len(queries)
    assert recall(pairs) >= 0.95


def _num(memory_id: str) -> int:
    return int(memory_id.rsplit("-", 1)[1])


def test_rows_stored_or_changed_after_the_build_are_found() -> None:
    rng = np.random.default_rng(4)
    x = clustered(rng, ROWS)
    twin = Twin(x)
    twin.build()
    new = clustered(rng, 30)
    for i, v in enumerate(new):
        twin.put(mem(ROWS + i), v)
    moved = {j: clustered(rng, 1)[0] for j in range(100, 130)}
    for j, v in moved.items():
        twin.put(mem(j), v)
    (status,) = twin.ann.ann_status()
    assert status.tail == 60 and status.dead == 30
    before = twin.searches()
    for i, v in enumerate(new):
        a, e = twin.search(near(rng, v, noise=0.2))
        assert a[0] == mem(ROWS + i).id == e[0]
    for j, v in moved.items():
        a, _ = twin.search(near(rng, v, noise=0.2))
        assert a[0] == mem(j).id  # found by its new vector
        a, e = twin.search(x[j])  # its old vector no longer finds it first
        assert a[0] != mem(j).id and a[0] == e[0]
    assert twin.searches() - before == 90


def test_changes_during_a_build_are_honoured() -> None:
    rng = np.random.default_rng(5)
    x = clustered(rng, ROWS)
    twin = Twin(x)
    gate = twin.ann._ann_build_lock
    gate.acquire()  # hold the builder at the start so every change below lands mid-build
    try:
        twin.ann.maintain_ann()
        assert twin.ann.ann_status()[0].building
        for j in range(0, 300, 3):
            twin.remove(mem(j).id)  # swap-deletes move rows the builder is about to read
        changed = {j: clustered(rng, 1)[0] for j in range(1000, 1060)}
        for j, v in changed.items():
            twin.put(mem(j), v)
        added = clustered(rng, 40)
        for i, v in enumerate(added):
            twin.put(mem(ROWS + i), v)
    finally:
        gate.release()
    assert twin.ann.wait_for_ann(timeout=60)
    (status,) = twin.ann.ann_status()
    assert status.rows == ROWS - 100 + 40 and status.indexed + status.tail == status.rows
    before = twin.searches()
    for j, v in changed.items():
        assert twin.search(near(rng, v, noise=0.2))[0][0] == mem(j).id
    for i, v in enumerate(added):
        assert twin.search(near(rng, v, noise=0.2))[0][0] == mem(ROWS + i).id
    pairs = [twin.search(near(rng, x[j])) for j in range(300, 360)]
    assert not {mem(j).id for j in range(0, 300, 3)} & {i for a, _ in pairs for i in a}
    assert recall(pairs) >= 0.95
    assert twin.searches() - before == 160


def test_a_stale_graph_is_rebuilt_and_its_memory_counted() -> None:
    rng = np.random.default_rng(6)
    x = clustered(rng, ROWS)
    twin = Twin(x)
    twin.build()
    assert (
        twin.ann.index_bytes() > twin.exact.index_bytes() + 200 * ROWS
    )  # graph: ~270 B/row at 128-d
    for j in range(400):  # 16% of the rows change: past the 10% rebuild mark
        twin.put(mem(j), clustered(rng, 1)[0])
    twin.search(x[500])  # notices the staleness and starts a rebuild
    assert twin.ann.ann_status()[0].building
    assert twin.ann.wait_for_ann(timeout=60)
    (status,) = twin.ann.ann_status()
    assert (status.tail, status.dead, status.indexed) == (0, 0, ROWS)


def test_close_cancels_a_build() -> None:
    rng = np.random.default_rng(7)
    twin = Twin(clustered(rng, ROWS))
    with twin.ann._ann_build_lock:  # hold the builder before it starts
        twin.ann.maintain_ann()
        ann = twin.ann._parts[SCOPE].ann
        assert ann is not None and ann.building is not None
        build = ann.building.future
        twin.ann.close()
    assert isinstance(build.exception(timeout=10), _Cancelled)  # stopped, not built
    twin.ann.maintain_ann()  # closed: nothing new starts
    (status,) = twin.ann.ann_status()
    assert not status.building and status.indexed == 0


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="rebuild_fraction"):
        AnnSettings(rebuild_fraction=0.0)
    with pytest.raises(ValueError, match="threshold"):
        HotIndex(8, ann_threshold=-1)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_labels_only_ever_point_at_unchanged_snapshot_rows(data: st.DataObject) -> None:
    """Model check of the label maps: after any writes, appends and swap-deletes during a
    build, a row keeps a label only if it still holds what the builder read for that label."""
    size = data.draw(st.integers(1, 12))
    labels = _Labels(size, size, reading=True)
    content = list(range(size))  # what each row holds: its snapshot position, or -1 (new)
    written: set[int] = set()  # positions written since the snapshot
    for _ in range(data.draw(st.integers(0, 30))):
        op = data.draw(st.sampled_from(["write", "append", "delete"]))
        if op == "append" or (op == "write" and not content):
            row = len(content)
            content.append(-1)
        elif op == "write":
            row = data.draw(st.integers(0, len(content) - 1))
            content[row] = -1
        else:
            if not content:
                continue
            hole = data.draw(st.integers(0, len(content) - 1))
            last = len(content) - 1
            labels.moved(hole, last)
            content[hole] = content[last]
            content.pop()
            if hole != last:
                written.add(hole)
            continue
        labels.wrote(row)
        written.add(row)
    for row, held in enumerate(content):
        label = int(labels.label_of_row[row])
        if label >= 0:
            assert held == label and label not in written
            assert labels.row_of_label[label] == row
    assert labels.live == sum(1 for r in range(len(content)) if labels.label_of_row[r] >= 0)


def test_a_moved_rows_label_dies_when_its_snapshot_position_is_rewritten() -> None:
    """The builder reads label p from row p of the snapshot. A delete moves the last row
    (label 3) into the hole; an append then rewrites row 3, which the builder may read
    after the rewrite: label 3 must die, though its memory now lives at row 1."""
    labels = _Labels(4, 4, reading=True)
    labels.moved(1, 3)
    assert labels.label_of_row[1] == 3  # still valid: row 3 has not been rewritten yet
    labels.wrote(3)
    assert list(labels.label_of_row[:4]) == [0, -1, 2, -1]
    assert list(labels.row_of_label) == [0, -1, 2, -1] and labels.live == 2
    built = _Labels(4, 4, reading=False)  # a finished graph: rewrites of free rows are moot
    built.moved(1, 3)
    built.wrote(3)
    assert list(built.label_of_row[:4]) == [0, 3, 2, -1] and built.live == 3


def test_a_search_after_a_rows_vector_changed_finds_it_even_with_the_same_mask() -> None:
    # A search keeps what it derived from the mask and the labels (the walk's filter,
    # the tail) while they stay the same; a changed row must still be found by its new
    # vector even if the caller hands over the very same mask object.
    rng = np.random.default_rng(9)
    x = clustered(rng, ROWS)
    twin = Twin(x)
    twin.build()
    part = twin.ann._parts[SCOPE]
    ann, n = part.ann, len(part)
    assert ann is not None
    mask = np.ones(n, dtype=np.uint8)
    j = 123
    found = ann.search(part.vectors, n, near(rng, x[j], noise=0.2), mask, 10, keep=True)
    assert found is not None and found[0][0] == j
    moved = clustered(rng, 1)[0]
    part.vectors[j] = moved
    ann.wrote(j)  # its label dies: only the tail can bring it back
    found = ann.search(part.vectors, n, near(rng, moved, noise=0.2), mask, 10, keep=True)
    assert found is not None and found[0][0] == j
    assert ann.searches == 2


def test_a_replaced_graph_is_freed_at_its_hand_over() -> None:
    # The search keeps what it derived from the serving graph; a rebuilt graph taking
    # over must not leave the old one (~0.5 KB a row) held by it until the next search.
    rng = np.random.default_rng(10)
    x = clustered(rng, ROWS)
    twin = Twin(x)
    twin.build()
    ann = twin.ann._parts[SCOPE].ann
    assert ann is not None and ann.serving is not None
    twin.search(x[7])  # keeps a view of the serving graph
    old = weakref.ref(ann.serving)
    for j in range(400):  # past the rebuild mark
        twin.put(mem(j), clustered(rng, 1)[0])
    twin.ann.maintain_ann()
    assert twin.ann.wait_for_ann(timeout=60)
    twin.ann.maintain_ann()  # hands the new graph over; no search since
    assert ann.serving is not None and ann.serving is not old()
    assert old() is None
