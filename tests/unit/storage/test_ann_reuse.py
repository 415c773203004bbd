"""Serving a large scope's HNSW graph again after a restart (storage/ann_map.py), clean or
after a kill -9, instead of building it anew (minutes at a million rows, the scope scanned
exactly meanwhile): the graph read back answers exactly as the one saved, writes made
after it was saved or after the restart (even before the graph is read) are honoured, a
graph is written once and named again by later saves, and every way the saved graph can be
wrong for the store now (damaged, another faiss or setting, another token map) makes the
scope build one instead."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pytest

from memoryd.storage import ann, ann_map, token_map
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

from .test_ann import clustered, near
from .test_storage import NOW, mem

DIM = 128  # test_ann's vectors
THRESHOLD = 2_000
ROWS = 3_000  # above fetch (64) x M (32) eligible rows: else the exact scan answers
BIG, SMALL = "agent:big", "agent:small"
READ = "read as it was saved"


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


def assert_labels_hold_their_rows(repo: Repository) -> None:
    """Every live label of the scope's graph holds its row's vector (as the graph's 8-bit
    codes give it back), and the two maps agree: a search's short list is the graph's."""
    part = repo._parts[BIG]
    assert part.ann is not None and part.ann.serving is not None
    graph = part.ann.serving
    row_of_label = graph.labels.row_of_label
    live = np.flatnonzero(row_of_label >= 0)
    assert len(live) > ROWS // 2
    held = np.stack([graph.index.storage.reconstruct(int(label)) for label in live])
    rows = part.vectors[row_of_label[live]].astype(np.float32)
    cosine = np.sum(held * rows, axis=1) / (
        np.linalg.norm(held, axis=1) * np.linalg.norm(rows, axis=1)
    )
    assert cosine.min() > 0.99, np.flatnonzero(cosine <= 0.99)
    label_of_row = graph.labels.label_of_row[: len(part)]
    has = np.flatnonzero(label_of_row >= 0)
    assert np.array_equal(row_of_label[label_of_row[has]], has)
    assert len(has) == len(live)


def held_back(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The saved graph's read waits until the event is set (a graph of a million rows
    takes seconds to check and parse)."""
    gate = threading.Event()
    real = ann_map.load

    def load(*args: object) -> object:
        assert gate.wait(60)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(ann_map, "load", load)
    return gate


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
            # kept, for a start after a crash: the list and the one graph file it names
            assert sorted(p.name for p in graphs_of(tmp_path).parent.glob("tokens.bin.ann*")) == [
                "tokens.bin.ann",
                "tokens.bin.ann.0",
            ]
            assert again.wait_for_ann(timeout=60)
            (now,) = again.ann_status()
            assert (now.indexed, now.tail, now.dead) == (status.indexed, status.tail, status.dead)
            assert answers(again, qs) == want
            assert_labels_hold_their_rows(again)
        finally:
            again.close()
    lines = [r.getMessage() for r in caplog.records]
    assert any(READ in line for line in lines), lines
    assert not any("rows ready in" in line for line in lines)  # nothing built


async def test_writes_made_while_the_graph_is_read_are_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, vectors = await filled(tmp_path)
    qs = queries()
    before = answers(repo, qs)
    repo.close()

    gate = held_back(monkeypatch)
    again = open_repo(tmp_path)
    try:
        ann = again._parts[BIG].ann
        assert ann is not None and ann.serving is None and ann.building is not None
        # while the graph is read: rows move, get new vectors, come and go
        ids = list(again._parts[BIG].ids)
        await again.delete(ids[10:600:37])
        for i in range(700, 1_200, 53):
            memory = again.get(ids[i])
            assert memory is not None
            memory = dataclasses.replace(memory, updated_at=NOW + timedelta(hours=3))
            await again.replace(memory, -vectors[(i + 17) % ROWS])
        changed, gone = before[0][0][0], before[1][0][0]
        memory = again.get(changed)
        assert memory is not None
        far = clustered(np.random.default_rng(9), 1)[0]  # no row's vector
        await again.replace(dataclasses.replace(memory, updated_at=NOW + timedelta(hours=2)), far)
        await again.delete([gone])
        new = mem(50_000, scope=BIG)
        await again.add(new, qs[2])
        gate.set()
        assert again.wait_for_ann(timeout=60)
        assert_labels_hold_their_rows(again)
        got = answers(again, qs)
        assert changed not in [i for i, _ in got[0]]  # its old vector's label died
        assert gone not in {i for answer in got for i, _ in answer}
        assert got[2][0][0] == new.id  # a row the graph never held: the tail
        assert answers(again, [far])[0][0][0] == changed
    finally:
        gate.set()
        again.close()


async def test_a_stop_while_the_graph_is_read_saves_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = await filled(tmp_path)
    want = answers(repo, queries())
    repo.close()
    gate = held_back(monkeypatch)
    again = open_repo(tmp_path)
    assert again.graphs_start.startswith("1 of 1 taken")
    threading.Timer(0.5, gate.set).start()  # the read ends while the stop waits for it
    again.close()
    assert graphs_of(tmp_path).exists()
    third = open_repo(tmp_path)
    try:
        assert third.graphs_start.startswith("1 of 1 taken"), third.graphs_start
        assert third.wait_for_ann(timeout=60)
        assert answers(third, queries()) == want
        assert_labels_hold_their_rows(third)
    finally:
        third.close()


async def test_a_scope_below_the_threshold_has_no_graph_saved(tmp_path: Path) -> None:
    repo, _ = await filled(tmp_path)
    ids = list(repo._parts[BIG].ids)
    await repo.delete(ids[: len(ids) - (THRESHOLD - 100)])  # still searched with its graph
    assert repo._parts[BIG].ann is not None
    repo.close()
    assert not list(graphs_of(tmp_path).parent.glob("tokens.bin.ann*"))


async def test_what_is_not_the_daemons_own_in_the_way_never_fails_a_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo, _ = await filled(tmp_path)
    repo.close()
    data = tmp_path / "data"
    (data / "tokens.bin.ann.0").unlink()
    (data / "tokens.bin.ann.0").mkdir()  # a directory where the graph's file was
    (data / "tokens.bin.ann.bak").write_bytes(b"someone's copy")
    with caplog.at_level(logging.WARNING, logger="memoryd"):
        again = open_repo(tmp_path)
        try:
            assert again.graphs_start == "0 of 1 taken", again.graphs_start
            assert again.wait_for_ann(timeout=120)  # built instead
            assert again.ann_status()[0].indexed == len(again._parts[BIG])
        finally:
            again.close()  # saved under another number; the directory is not deleted: logged
    assert (data / "tokens.bin.ann.bak").read_bytes() == b"someone's copy"
    assert (data / "tokens.bin.ann.0").is_dir()
    lines = [r.getMessage() for r in caplog.records]
    assert any("could not be taken" in line for line in lines), lines
    assert token_map.map_path(data / "tokens.bin").exists()


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


def _other_map(root: Path) -> None:
    """The token map replaced after the graphs were saved with it (its rows the same)."""
    where = token_map.map_path(root / "data" / "tokens.bin")
    saved = token_map.read(where)
    saved.header["note"] = "saved again"
    token_map.write(where, saved)


@pytest.mark.parametrize(
    ("change", "start", "log"),
    [
        (_damage, "1 of 1 taken, read while serving", "the checksum of tokens.bin.ann.0"),
        (_other_faiss, "none taken: this daemon's faiss is", ""),
        (_other_map, "none taken: saved with another token map", ""),
        (lambda root: graphs_of(root).unlink(), "", ""),
    ],
    ids=["damaged", "another-faiss", "another-map", "graph-list-missing"],
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
            left = list(graphs_of(tmp_path).parent.glob("tokens.bin.ann*"))
            assert len(left) == (2 if start.startswith("1 of 1") else 0)  # taken: kept
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


@pytest.mark.parametrize("how", ["read", "built"])
async def test_a_graph_serves_as_soon_as_it_is_built_or_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # No search and no maintenance tick (that job runs once a minute) needed: Stats and
    # the next Recall see the graph as soon as its thread is done.
    repo, _ = await filled(tmp_path)
    repo.close()
    if how == "read":
        gate = held_back(monkeypatch)
    else:  # no map: the token file is rewritten, no graph taken, one is built
        token_map.remove(token_map.map_path(tmp_path / "data" / "tokens.bin"))
        gate = threading.Event()
        real = ann._build
        monkeypatch.setattr(ann, "_build", lambda *a: (gate.wait(60), real(*a))[1])
    again = open_repo(tmp_path)
    again.start_jobs()
    try:
        assert again.graphs_start.startswith("1 of 1 taken") == (how == "read")
        assert not again.ann_status()[0].indexed
        gate.set()  # the thread's work ends after the loop's owner asked to be told
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not again.ann_status()[0].indexed:
            assert loop.time() < deadline, again.ann_status()
            await asyncio.sleep(0.05)
    finally:
        gate.set()
        await again.shutdown()


async def test_a_store_moved_on_keeps_the_graph_with_the_gone_rows_labels_dead(
    tmp_path: Path,
) -> None:
    repo, _ = await filled(tmp_path)
    gone = "00000000-0000-4000-8000-000000000003"
    assert repo.get(gone) is not None
    repo.close()
    _store_moved_on(tmp_path)  # another writer deleted a row of the big scope
    again = open_repo(tmp_path)
    try:
        assert again.graphs_start == "1 of 1 taken, read while serving", again.graphs_start
        assert again.wait_for_ann(timeout=60)
        assert again.get(gone) is None
        assert_labels_hold_their_rows(again)
        assert gone not in {i for answer in answers(again, queries()) for i, _ in answer}
    finally:
        again.close()


async def test_a_kill_9_after_the_graph_was_saved_while_serving_reads_it_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The upkeep saves the graph once it is built (with the token map, on a thread); a
    kill -9 after more writes then costs the scope no build: the start reads the graph,
    its labels of rows changed or gone since dead, the rows written since in its tail, and
    it answers as the graph before the crash did."""
    repo, vectors = await filled(tmp_path)
    token_map.remove(token_map.map_path(tmp_path / "data" / "tokens.bin"))
    ann_map.remove(graphs_of(tmp_path))
    assert await repo.checkpoint_tokens(force=True)
    assert graphs_of(tmp_path).exists()
    ids = list(repo._parts[BIG].ids)
    await repo.delete(ids[20:400:41])
    for i in range(500, 900, 67):
        memory = repo.get(ids[i])
        assert memory is not None
        memory = dataclasses.replace(memory, updated_at=NOW + timedelta(hours=5))
        await repo.replace(memory, -vectors[(i + 3) % ROWS])
    new = mem(60_000, scope=BIG)
    await repo.add(new, queries()[3])
    qs = queries()
    want = answers(repo, qs)
    await asyncio.to_thread(repo._durable.close)  # kill -9: no map, no graph saved at a stop
    with caplog.at_level(logging.INFO, logger="memoryd"):
        crashed = open_repo(tmp_path)
        try:
            assert crashed.token_start is not None and crashed.token_start.reused
            assert crashed.graphs_start == "1 of 1 taken, read while serving"
            assert crashed.wait_for_ann(timeout=60)
            assert_labels_hold_their_rows(crashed)
            assert answers(crashed, qs) == want
            assert answers(crashed, [qs[3]])[0][0][0] == new.id  # the tail
        finally:
            crashed.close()
    lines = [r.getMessage() for r in caplog.records]
    assert any(READ in line for line in lines), lines
    assert not any("rows ready in" in line for line in lines)  # nothing built


async def test_a_graph_is_written_once_and_named_again_by_later_saves(tmp_path: Path) -> None:
    repo, _ = await filled(tmp_path)
    try:
        ann_map.remove(graphs_of(tmp_path))
        assert await repo.checkpoint_tokens(force=True)
        graph_file = graphs_of(tmp_path).with_name("tokens.bin.ann.0")
        written = graph_file.stat()
        await repo.add(mem(70_000, scope=BIG), queries()[0])
        assert await repo.checkpoint_tokens(force=True)  # the map again, not the graph
        assert graph_file.stat().st_mtime_ns == written.st_mtime_ns
        assert graph_file.stat().st_ino == written.st_ino
        header, graphs = ann_map.read(graphs_of(tmp_path))
        assert (
            header["map"]
            == token_map.read(token_map.map_path(graph_file.with_name("tokens.bin"))).digest
        )
        assert [g.file.name for g in graphs] == ["tokens.bin.ann.0"]
        # a graph built anew is written under another number; the old file goes
        part = repo._parts[BIG]
        assert part.ann is not None
        part.ann.serving = None
        repo.maintain_ann()
        assert repo.wait_for_ann(timeout=120)
        repo.maintain_ann()
        assert await repo.checkpoint_tokens(force=True)
        _, graphs = ann_map.read(graphs_of(tmp_path))
        assert [g.file.name for g in graphs] == ["tokens.bin.ann.1"]
        assert not graph_file.exists()
    finally:
        repo.close()


async def test_a_row_moved_to_another_scope_before_a_kill_9_keeps_no_label_in_the_old_graph(
    tmp_path: Path,
) -> None:
    """A memory forgotten in the big scope and imported into another (its id, time and text
    kept, as an Import does), then kill -9: the saved graph's label of it must not land on
    the row its number has in the other scope, nor on another row of the big one."""
    repo, _ = await filled(tmp_path)
    ann_map.remove(graphs_of(tmp_path))
    assert await repo.checkpoint_tokens(force=True)
    part = repo._parts[BIG]
    assert part.ann is not None and part.ann.serving is not None
    labels = part.ann.serving.labels
    row = next(r for r in range(100, len(part)) if labels.label_of_row[r] >= 0)
    moved = repo.get(part.ids[row])
    assert moved is not None
    vector = part.vectors[row].astype(np.float32)
    await repo.delete([moved.id])
    await repo.add(dataclasses.replace(moved, scope=SMALL), vector)
    await asyncio.to_thread(repo._durable.close)  # kill -9: no map at the stop
    crashed = open_repo(tmp_path)
    try:
        assert crashed.graphs_start == "1 of 1 taken, read while serving"
        assert crashed.wait_for_ann(timeout=120)
        crashed.maintain_ann()
        assert_labels_hold_their_rows(crashed)
        graph = crashed._parts[BIG].ann.serving  # type: ignore[union-attr]
        live = graph.labels.row_of_label[graph.labels.row_of_label >= 0]
        assert len(np.unique(live)) == len(live) == graph.labels.live
        assert moved.id not in crashed._parts[BIG].row_of
        assert crashed.get(moved.id).scope == SMALL  # type: ignore[union-attr]
    finally:
        crashed.close()


async def _scope_of(repo: Repository, scope: str, base: int, vectors: np.ndarray) -> list[str]:
    rows = [(mem(base + i, scope=scope), vectors[i], None) for i in range(len(vectors))]
    await repo._durable.add(rows)
    for memory, vector, tokens in rows:
        repo.put(memory, vector, tokens)
    return [m.id for m, _, _ in rows]


async def _graphs_built(repo: Repository) -> None:
    repo.maintain_ann()
    assert repo.wait_for_ann(timeout=300)
    repo.maintain_ann()


async def test_a_graph_file_name_is_never_given_to_another_graph(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """b's graph file goes while b, just below the threshold, keeps its graph; c's new graph
    is written; b back at the threshold: its graph is written again, not named by the name
    c's may have, and after a kill -9 every graph is read as it was saved."""
    repo = open_repo(tmp_path)
    vb = clustered(np.random.default_rng(1), THRESHOLD + 1)
    await _scope_of(repo, "agent:a", 0, clustered(np.random.default_rng(0), THRESHOLD))
    b = await _scope_of(repo, "agent:b", 100_000, vb[:THRESHOLD])
    await _graphs_built(repo)
    assert await repo.checkpoint_tokens(force=True)
    await repo.delete([b[-1]])  # b's graph stays (it is above 3/4 of the threshold)
    assert await repo.checkpoint_tokens(force=True)
    _, graphs = ann_map.read(graphs_of(tmp_path))
    assert len(graphs) == 1
    await _scope_of(repo, "agent:c", 200_000, clustered(np.random.default_rng(2), THRESHOLD))
    await _graphs_built(repo)
    assert await repo.checkpoint_tokens(force=True)
    await _scope_of(repo, "agent:b", 300_000, vb[THRESHOLD:])
    assert await repo.checkpoint_tokens(force=True)
    _, graphs = ann_map.read(graphs_of(tmp_path))
    names = [g.file.name for g in graphs]
    assert len(set(names)) == len(names) == 3
    await asyncio.to_thread(repo._durable.close)  # kill -9
    with caplog.at_level(logging.INFO, logger="memoryd"):
        crashed = open_repo(tmp_path)
        try:
            assert crashed.graphs_start == "3 of 3 taken, read while serving"
            assert crashed.wait_for_ann(timeout=300)
        finally:
            crashed.close()
    lines = [r.getMessage() for r in caplog.records]
    assert sum(READ in line for line in lines) == 3, lines
    assert not any("could not be taken" in line for line in lines), lines


async def test_a_graph_file_taken_at_a_start_keeps_its_name_to_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """b's graph taken at a start after a kill -9; b dips below the threshold (it keeps
    its graph) and a save finds no graph, deleting b's file; c's new graph must get another
    name than the one b's graph still has, or b's is not read after the next kill -9."""
    repo = open_repo(tmp_path)
    vb = clustered(np.random.default_rng(1), THRESHOLD + 1)
    b = await _scope_of(repo, "agent:b", 100_000, vb[:THRESHOLD])
    await _graphs_built(repo)
    assert await repo.checkpoint_tokens(force=True)
    await asyncio.to_thread(repo._durable.close)  # kill -9
    repo = open_repo(tmp_path)
    try:
        assert repo.graphs_start == "1 of 1 taken, read while serving"
        assert repo.wait_for_ann(timeout=120)
        repo.maintain_ann()
        await repo.delete([b[-1]])
        assert await repo.checkpoint_tokens(force=True)
        assert not list(graphs_of(tmp_path).parent.glob("tokens.bin.ann*"))
        await _scope_of(repo, "agent:c", 200_000, clustered(np.random.default_rng(2), THRESHOLD))
        await _graphs_built(repo)
        assert await repo.checkpoint_tokens(force=True)
        await _scope_of(repo, "agent:b", 300_000, vb[THRESHOLD:])  # b back at the threshold
        assert await repo.checkpoint_tokens(force=True)
        names = [g.file.name for g in ann_map.read(graphs_of(tmp_path))[1]]
        assert len(set(names)) == len(names) == 2, names
        await asyncio.to_thread(repo._durable.close)  # kill -9
    except BaseException:
        repo.close()
        raise
    with caplog.at_level(logging.INFO, logger="memoryd"):
        crashed = open_repo(tmp_path)
        try:
            assert crashed.wait_for_ann(timeout=300)
        finally:
            crashed.close()
    lines = [r.getMessage() for r in caplog.records]
    assert sum(READ in line for line in lines) == 2, lines
    assert not any("could not be taken" in line for line in lines), lines


async def test_no_graph_file_stays_once_no_scope_has_a_graph(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    try:
        ids = await _scope_of(repo, "agent:a", 0, clustered(np.random.default_rng(0), THRESHOLD))
        await _graphs_built(repo)
        assert await repo.checkpoint_tokens(force=True)
        assert graphs_of(tmp_path).with_name("tokens.bin.ann.0").is_file()
        await repo.delete(ids)  # the whole scope forgotten
        assert await repo.checkpoint_tokens(force=True)
        left = sorted(p.name for p in graphs_of(tmp_path).parent.glob("tokens.bin.ann*"))
        assert left == []
    finally:
        repo.close()
