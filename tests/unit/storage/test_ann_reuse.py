"""Serving a large scope's HNSW graph again after a clean restart (storage/ann_map.py)
instead of building it anew (minutes at a million rows, the scope scanned exactly
meanwhile): the graph read back answers exactly as the one saved, writes made after the
restart (even before the graph is read) are honoured, and every way the saved graph can be
wrong for the store now (damaged, another faiss or setting, a store that moved on, a crash
after the start that took it) makes the scope build one instead."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pytest

from memoryd.storage import ann_map
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

from .test_ann import clustered, near
from .test_storage import NOW, mem

DIM = 128  # test_ann's vectors
THRESHOLD = 2_000
ROWS = 3_000  # above fetch (64) x M (32) eligible rows: else the exact scan answers
BIG, SMALL = "agent:big", "agent:small"
READ = "read as the last clean shutdown saved it"


def open_repo(root: Path) -> Repository:
    store = LanceStore(
        str(root / "lancedb"), table="m", model_name="x", dim=DIM, compact_every=100_000
    )
    repo = Repository(store, ann_threshold=THRESHOLD, token_path=root / "data" / "tokens.bin")
    repo.open()
    return repo


def graphs_of(root: Path) -> Path:
    return ann_map.graphs_path(root / "data" / "tokens.bin")


def queries(seed: int = 1, n: int = 40) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [near(rng, v) for v in clustered(np.random.default_rng(0), ROWS)[:n]]


def answers(repo: Repository, qs: list[np.ndarray]) -> list[list[tuple[str, float]]]:
    before = repo.ann_status()[0].searches
    out = [
        [(m.id, round(s, 5)) for m, s in repo.search(q, [BIG], 10, now=NOW)]  # type: ignore[arg-type]
        for q in qs
    ]
    assert repo.ann_status()[0].searches == before + len(qs)  # the graph answered each
    return out


async def filled(root: Path) -> tuple[Repository, np.ndarray]:
    """A small scope first (the big one's rows start past it in the token map), the big
    scope's graph built, then deletes (rows move: the saved row order is not the next
    start's) and new vectors for some rows (their labels die, they join the tail)."""
    repo = open_repo(root)
    vectors = clustered(np.random.default_rng(0), ROWS)
    rows = [(mem(10_000 + i, scope=SMALL), vectors[i], None) for i in range(50)]
    rows += [(mem(i, scope=BIG), vectors[i], None) for i in range(ROWS)]
    await repo._durable.add(rows)
    for memory, vector, tokens in rows:
        repo.put(memory, vector, tokens)
    repo.maintain_ann()
    assert repo.wait_for_ann(timeout=120)
    ids = [m.id for m, _, _ in rows[50:]]
    await repo.delete(ids[5:2_000:97])
    for i in range(7, 400, 61):
        memory = repo.get(ids[i])
        assert memory is not None
        moved = dataclasses.replace(memory, updated_at=NOW + timedelta(hours=1))
        await repo.replace(moved, vectors[(i + 1_000) % ROWS])
    return repo, vectors


async def test_a_clean_restart_serves_the_saved_graph_and_answers_as_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo, _ = await filled(tmp_path)
    qs = queries()
    want = answers(repo, qs)
    (status,) = repo.ann_status()
    repo.close()
    assert graphs_of(tmp_path).exists()

    with caplog.at_level(logging.INFO, logger="memoryd"):
        again = open_repo(tmp_path)
        try:
            assert again.graphs_start == "1 of 1 taken, read while serving", again.graphs_start
            assert not list(graphs_of(tmp_path).parent.glob("tokens.bin.ann*"))  # deleted
            assert again.wait_for_ann(timeout=60)
            (now,) = again.ann_status()
            assert (now.indexed, now.tail, now.dead) == (status.indexed, status.tail, status.dead)
            assert answers(again, qs) == want
        finally:
            again.close()
    lines = [r.getMessage() for r in caplog.records]
    assert any(READ in line for line in lines), lines
    assert not any("rows ready in" in line for line in lines)  # nothing built


async def test_writes_after_the_restart_are_honoured_even_before_the_graph_is_read(
    tmp_path: Path,
) -> None:
    repo, _ = await filled(tmp_path)
    qs = queries()
    before = answers(repo, qs)
    repo.close()

    again = open_repo(tmp_path)
    try:
        # at once, while the graph is read: the first answer of each query changes place
        changed, gone = before[0][0][0], before[1][0][0]
        memory = again.get(changed)
        assert memory is not None
        far = clustered(np.random.default_rng(9), 1)[0]  # no row's vector
        await again.replace(dataclasses.replace(memory, updated_at=NOW + timedelta(hours=2)), far)
        await again.delete([gone])
        new = mem(50_000, scope=BIG)
        await again.add(new, qs[2])
        assert again.wait_for_ann(timeout=60)
        got = answers(again, qs)
        assert changed not in [i for i, _ in got[0]]  # its old vector's label died
        assert gone not in {i for answer in got for i, _ in answer}
        assert got[2][0][0] == new.id  # a row the graph never held: the tail
        assert answers(again, [far])[0][0][0] == changed
    finally:
        again.close()


def _damage(root: Path) -> None:
    graph = graphs_of(root).with_name("tokens.bin.ann.0")
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))


def _other_faiss(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = ann_map.describe
    monkeypatch.setattr(ann_map, "describe", lambda *a: {**real(*a), "faiss": "0.0.1"})


def _store_moved_on(root: Path) -> None:
    table = lancedb.connect(str(root / "lancedb")).open_table("m")
    table.delete("id = '00000000-0000-4000-8000-000000000003'")  # another writer's delete


@pytest.mark.parametrize(
    ("change", "start", "log"),
    [
        (_damage, "1 of 1 taken, read while serving", "the checksum of tokens.bin.ann.0"),
        (_other_faiss, "none taken: this daemon's faiss is", ""),
        (_store_moved_on, "", ""),  # the token file is rewritten: no graph is looked at
        (lambda root: graphs_of(root).unlink(), "", ""),
    ],
    ids=["damaged", "another-faiss", "store-moved-on", "graph-list-missing"],
)
async def test_a_saved_graph_that_does_not_fit_leaves_the_scope_to_a_build(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    change: object,
    start: str,
    log: str,
) -> None:
    repo, _ = await filled(tmp_path)
    repo.close()
    if change is _other_faiss:
        _other_faiss(tmp_path, monkeypatch)
    else:
        change(tmp_path)  # type: ignore[operator]
    with caplog.at_level(logging.INFO, logger="memoryd"):
        again = open_repo(tmp_path)
        try:
            assert again.graphs_start.startswith(start), again.graphs_start
            assert bool(again.graphs_start) == bool(start)
            assert not list(graphs_of(tmp_path).parent.glob("tokens.bin.ann*"))
            assert again.wait_for_ann(timeout=120)  # the read fails, or nothing was read
            again.maintain_ann()  # a failed read is handed over: the build starts at once
            assert again.wait_for_ann(timeout=120)
            (status,) = again.ann_status()
            assert status.indexed == len(again._parts[BIG]) and status.tail == 0
            answers(again, queries())
        finally:
            again.close()
    lines = [r.getMessage() for r in caplog.records]
    assert not any(READ in line for line in lines)
    assert any("rows ready in" in line for line in lines), lines
    if log:
        assert any(log in line for line in lines), lines


async def test_a_crash_after_a_start_that_took_the_graph_builds_it_next_time(
    tmp_path: Path,
) -> None:
    repo, _ = await filled(tmp_path)
    repo.close()
    again = open_repo(tmp_path)
    assert again.graphs_start.startswith("1 of 1 taken")
    assert again.wait_for_ann(timeout=60)
    await again.delete([again._parts[BIG].ids[0]])
    # kill -9: the write is committed, the index (and its graph) die with the process
    await asyncio.to_thread(again._durable.close)
    third = open_repo(tmp_path)
    try:
        assert third.graphs_start == ""  # the start deleted what it took
        assert third.token_start is not None and not third.token_start.reused
        assert third.wait_for_ann(timeout=120)
        (status,) = third.ann_status()
        assert status.indexed == len(third._parts[BIG])
    finally:
        third.close()
