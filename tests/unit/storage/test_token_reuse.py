"""Reusing the token file across restarts (storage/token_map.py): after a clean shutdown the
next start takes every memory's token vectors from the daemon's tokens.bin without reading
the store's token-vector column, and reranks exactly as a start that rewrote the file; after
a crash, the map saved while serving gives the rows it holds as they are and the start reads
only the others from the table; every way the file, its map or the store can have changed
otherwise makes the start rewrite it, and the token vectors read are always the store's."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pytest

from memoryd.core.retrieval import LateInteractionReranker
from memoryd.storage import token_map
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

from .test_storage import NOW, mem, unit
from .test_token_file import DIM, FixedQuery, assert_tokens

Want = dict[str, np.ndarray | None]


def toks(i: int, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(i)
    return rng.integers(-127, 128, (int(rng.integers(1, 12)), dim)).astype(np.int8)


def open_repo(
    root: Path, *, model: str = "x", dim: int = DIM, follow: float = 0.0, data: str = "data"
) -> Repository:
    store = LanceStore(
        str(root / "lancedb"),
        table="m",
        model_name=model,
        dim=dim,
        shared=follow > 0,
        compact_every=10_000,
    )
    repo = Repository(store, follow_interval=follow, token_path=root / data / "tokens.bin")
    repo.open()
    return repo


def map_of(root: Path, data: str = "data") -> Path:
    return token_map.map_path(root / data / "tokens.bin")


def started(repo: Repository) -> tuple[bool, str]:
    assert repo.token_start is not None
    return repo.token_start.reused, repo.token_start.why


async def fill(repo: Repository, seed: int = 0, dim: int = DIM) -> Want:
    """Stores (some without token vectors), an update with a new text, two forgets."""
    want: Want = {}
    for i in range(24):
        tokens = None if i % 7 == 3 else toks(i + seed, dim)
        v = np.zeros(dim, np.float32)
        v[i % dim] = 1.0
        m = await repo.add(mem(i, text=f"memory {i} about bees"), v, tokens)
        want[m.id] = tokens
    ids = list(want)
    first = repo.get(ids[0])
    assert first is not None
    changed = dataclasses.replace(
        first, text="wasps now", content_hash="h-new", updated_at=NOW + timedelta(seconds=5)
    )
    await repo.replace(changed, unit(5, dim), toks(100 + seed, dim))
    want[ids[0]] = toks(100 + seed, dim)
    await repo.delete(ids[1:3])
    for memory_id in ids[1:3]:
        want[memory_id] = None
    return want


async def rerank_scores(repo: Repository) -> tuple[list[str], np.ndarray]:
    """The late-interaction scores of the hybrid candidates that have token vectors."""
    q = np.random.default_rng(7).standard_normal((4, DIM)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    cands = repo.candidates(q[0], "memory about bees", ["agent:a"], 50, now=NOW)
    chosen = [m for m in cands.memories if repo.has_tokens(m.id)]
    reranker = LateInteractionReranker(repo, FixedQuery(q))  # type: ignore[arg-type]
    return [m.id for m in cands.memories], await reranker.score("q", chosen)


async def test_a_clean_restart_reuses_the_file_and_reranks_as_a_rewritten_one(
    tmp_path: Path,
) -> None:
    repo = open_repo(tmp_path)
    reused, why = started(repo)
    assert not reused and "no map" in why
    want = await fill(repo)
    repo.close()
    assert map_of(tmp_path).exists()

    again = open_repo(tmp_path)
    try:
        assert started(again)[0], started(again)[1]
        assert again._durable.token_bytes_read == 0  # the token column was not read
        assert map_of(tmp_path).exists()  # kept: it describes the file's first bytes still
        kept = map_of(tmp_path).stat()
        # what is on disk is current: no save is due, even forced, until rows change
        assert not await again.checkpoint_tokens(force=True)
        assert map_of(tmp_path).stat().st_mtime_ns == kept.st_mtime_ns
        assert_tokens(again, want)
        ids, reused_scores = await rerank_scores(again)
        # Writes after a reused start append to the kept file, and survive the next one.
        m = await again.add(mem(50, text="later"), unit(2), toks(50))
        want[m.id] = toks(50)
        assert_tokens(again, want)
    finally:
        again.close()

    third = open_repo(tmp_path)
    try:
        assert started(third)[0], started(third)[1]
        assert_tokens(third, want)
    finally:
        third.close()

    map_of(tmp_path).unlink()  # a data dir without one: the file is rewritten
    rewritten = open_repo(tmp_path)
    try:
        assert not started(rewritten)[0] and "no map" in started(rewritten)[1]
        assert rewritten._durable.token_bytes_read > 0
        assert_tokens(rewritten, want)
        await rewritten.delete([m.id])  # the state the reused start reranked in
        got_ids, got = await rerank_scores(rewritten)
        assert got_ids == ids
        np.testing.assert_array_equal(got, reused_scores)
    finally:
        rewritten.close()


async def test_a_crash_after_a_reused_start_reads_only_the_rows_written_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memoryd.storage.repository.TOKENS_SAMPLE", 0)  # none compared
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    again = open_repo(tmp_path)
    assert started(again)[0]
    m = await again.add(mem(60, text="written before the crash"), unit(3), toks(60))
    want[m.id] = toks(60)
    # kill -9: the write is committed, the index dies with the process; the map the clean
    # stop saved still describes the file's first bytes
    await asyncio.to_thread(again._durable.close)
    third = open_repo(tmp_path)
    try:
        reused, why = started(third)
        assert reused and "1 rows read from the table" in why, why
        assert_tokens(third, want)
        # that row's token vectors (and their offsets), not the column's ~1 KB
        assert toks(60).nbytes <= third._durable.token_bytes_read <= toks(60).nbytes + 16
    finally:
        third.close()


async def test_a_crash_reuses_the_map_saved_while_serving_and_ranks_as_a_rewritten_start(
    tmp_path: Path,
) -> None:
    """The map saved while serving (checkpoint_tokens), then Stores, an update with a new
    text and forgets before a kill -9: the start takes the rows the map still holds, reads
    the written and changed ones from the table, leaves the forgotten ones' records dead,
    and reranks exactly as a start that rewrote the file from the table."""
    repo = open_repo(tmp_path)
    map_of(tmp_path).unlink(missing_ok=True)
    want = await fill(repo)
    assert await repo.checkpoint_tokens(force=True)
    assert not await repo.checkpoint_tokens(force=True)  # nothing changed since
    for i in range(30, 36):
        m = await repo.add(mem(i, text=f"memory {i} about bees, later"), unit(i % DIM), toks(i))
        want[m.id] = toks(i)
    ids = [i for i, t in want.items() if t is not None]
    first = repo.get(ids[3])
    assert first is not None
    changed = dataclasses.replace(
        first, text="hornets now", content_hash="h-later", updated_at=NOW + timedelta(seconds=9)
    )
    await repo.replace(changed, unit(7), toks(300))
    want[ids[3]] = toks(300)
    await repo.delete([ids[4], ids[-1]])
    want[ids[4]] = want[ids[-1]] = None
    await asyncio.to_thread(repo._durable.close)  # kill -9
    crashed = open_repo(tmp_path)
    try:
        reused, why = started(crashed)
        assert reused and "6 rows read from the table" in why, why  # 5 new, 1 changed
        assert "3 rows' records" not in why
        assert_tokens(crashed, want)
        ids_reused, scores_reused = await rerank_scores(crashed)
    finally:
        crashed.close()
    map_of(tmp_path).unlink()
    rewritten = open_repo(tmp_path)
    try:
        assert not started(rewritten)[0]
        got_ids, got = await rerank_scores(rewritten)
        assert got_ids == ids_reused
        np.testing.assert_array_equal(got, scores_reused)
    finally:
        rewritten.close()


async def test_a_crash_takes_every_row_saved_after_forgets_moved_others_and_updates(
    tmp_path: Path,
) -> None:
    """Each row's state as the map saved while serving keeps it follows the row through
    the index: forgets move the scope's last rows into the gaps, an update stamps a new
    time; after a kill -9 with nothing written since the save, the start takes every row
    from the map and reads none from the table."""
    repo = open_repo(tmp_path)
    want: Want = {}
    for i in range(12):  # each its own time and text: a row given another's state shows
        m = await repo.add(
            mem(i, text=f"memory {i}", updated_at=NOW + timedelta(seconds=i)), unit(i), toks(i)
        )
        want[m.id] = toks(i)
    ids = list(want)
    await repo.delete([ids[1], ids[4]])  # the two last rows move into their places
    want[ids[1]] = want[ids[4]] = None
    moved = repo.get(ids[-1])
    assert moved is not None
    later = dataclasses.replace(moved, importance=0.9, updated_at=NOW + timedelta(minutes=5))
    await repo.replace(later, unit(11), toks(11))
    await repo.delete([ids[2]])  # and once more, the updated row moving
    want[ids[2]] = None
    assert await repo.checkpoint_tokens(force=True)
    await asyncio.to_thread(repo._durable.close)  # kill -9
    crashed = open_repo(tmp_path)
    try:
        reused, why = started(crashed)
        assert reused and "its map matches table version" in why, why
        assert crashed._durable.token_bytes_read == 0
        assert_tokens(crashed, want)
    finally:
        crashed.close()


async def test_a_map_saved_while_serving_is_due_only_after_changes(tmp_path: Path) -> None:
    """The upkeep saves the map once rows changed since the one on disk: at the first quiet
    upkeep a minute after the last, or five minutes after it whatever the writes; not again
    while nothing changes."""
    repo = open_repo(tmp_path)
    try:
        assert not started(repo)[0]  # no map matches this start: one is due at once
        assert await repo.checkpoint_tokens()
        saved = token_map.read(map_of(tmp_path))
        assert not await repo.checkpoint_tokens()  # nothing changed
        await repo.add(mem(1, text="bees"), unit(1), toks(1))
        assert not await repo.checkpoint_tokens()  # changed, but a map was saved just now
        repo._checkpoint_at -= 61
        await repo.add(mem(3, text="moths"), unit(3), toks(3))
        assert not await repo.checkpoint_tokens()  # a minute on, but rows changed since
        assert await repo.checkpoint_tokens()  # a minute on and quiet
        assert len(token_map.read(map_of(tmp_path)).ids) == len(saved.ids) + 2
        await repo.add(mem(2, text="wasps"), unit(2), toks(2))
        repo._checkpoint_at -= 301
        assert await repo.checkpoint_tokens()  # five minutes on, writes or not
    finally:
        repo.close()


async def test_a_start_reads_the_whole_column_when_too_much_changed_since_the_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memoryd.storage.repository.DELTA_MIN_ROWS", 0)
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    again = open_repo(tmp_path)
    for i in range(40, 52):  # more than a quarter of the rows are new
        m = await again.add(mem(i, text=f"memory {i}"), unit(i % DIM), toks(i))
        want[m.id] = toks(i)
    await asyncio.to_thread(again._durable.close)  # kill -9
    third = open_repo(tmp_path)
    try:
        reused, why = started(third)
        assert not reused and "the map holds 22 of the table's 34 rows" in why, why
        assert_tokens(third, want)
    finally:
        third.close()


def _truncate_file(root: Path) -> str:
    path = root / "data" / "tokens.bin"
    os.truncate(path, path.stat().st_size // 2)
    return "token file"


def _edit_file(root: Path) -> str:
    path = root / "data" / "tokens.bin"
    with path.open("r+b") as f:  # same size, other bytes: another memory's record
        f.seek(0)
        head = f.read(64)
        f.seek(64)
        f.write(head)
    return "token file"


def _edit_map(root: Path) -> str:
    data = bytearray(map_of(root).read_bytes())
    data[len(data) // 2] ^= 0xFF
    map_of(root).write_bytes(bytes(data))
    return "checksum"


def _truncate_map(root: Path) -> str:
    os.truncate(map_of(root), map_of(root).stat().st_size - 5)
    return "checksum"


def _remove_file(root: Path) -> str:
    (root / "data" / "tokens.bin").unlink()
    return "token file"


def _restore_older(root: Path) -> str:
    table = lancedb.connect(str(root / "lancedb")).open_table("m")
    table.restore(table.version - 2)  # a rollback: the table at an older state
    return "the table's"


def _write_behind(root: Path) -> str:
    """Another writer (a tool) changed a row's token vectors in the table while this one
    was down, leaving its updated_at and content hash as they were (memoryd's writes never
    do: a new text is a new updated_at): the sample compared with the table catches it."""
    table = lancedb.connect(str(root / "lancedb")).open_table("m")
    row = table.search().where("id = '00000000-0000-4000-8000-000000000005'").to_arrow()
    row = row.set_column(
        row.schema.get_field_index("token_vectors"),
        "token_vectors",
        [[toks(555).tobytes()]],
    )
    table.merge_insert("id").when_matched_update_all().execute(row)
    return "token vectors in the table are not the file's"


@pytest.mark.parametrize(
    "change",
    [
        _truncate_file,
        _edit_file,
        _remove_file,
        _edit_map,
        _truncate_map,
        _write_behind,
    ],
)
async def test_any_change_since_the_shutdown_rewrites_the_file(
    tmp_path: Path, change: Callable[[Path], str]
) -> None:
    repo = open_repo(tmp_path)
    await fill(repo)
    repo.close()
    reason = change(tmp_path)
    # What the store holds now, read from the table itself (the truth).
    direct = LanceStore(str(tmp_path / "lancedb"), table="m", model_name="x", dim=DIM)
    truth: Want = {memory.id: tokens for memory, _, tokens in direct.scan()}
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert not reused and reason in why, why
        assert again._durable.token_bytes_read > 0
        assert_tokens(again, truth)
        assert not again.tokens_damaged
    finally:
        again.close()


async def test_a_table_rolled_back_since_the_map_gives_the_tables_token_vectors(
    tmp_path: Path,
) -> None:
    """A restore to an older version: rows forgotten since are back, an updated one has its
    old text; the start takes what the map holds as the table has it and reads the rest."""
    repo = open_repo(tmp_path)
    await fill(repo)
    repo.close()
    _restore_older(tmp_path)
    direct = LanceStore(str(tmp_path / "lancedb"), table="m", model_name="x", dim=DIM)
    truth: Want = {memory.id: tokens for memory, _, tokens in direct.scan()}
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert reused and "rows read from the table" in why, why
        assert_tokens(again, truth)
        assert not again.tokens_damaged
    finally:
        again.close()


@pytest.mark.parametrize(("model", "dim"), [("y", DIM), ("x", 16)])
async def test_a_store_swapped_in_with_the_same_version_is_never_taken_for_the_old(
    tmp_path: Path, model: str, dim: int
) -> None:
    """A reembedded store, or one re-created with the same history (so the same version
    number), moved to where the old one was: the map's table is not this one."""
    repo = open_repo(tmp_path)
    await fill(repo)
    repo.close()
    saved = token_map.read(map_of(tmp_path)).header["table"]
    other = tmp_path / "other"
    made = open_repo(other, model=model, dim=dim, data="unused")
    want = await fill(made, seed=1000, dim=dim)
    made.close()
    shutil.rmtree(tmp_path / "lancedb")
    (other / "lancedb").rename(tmp_path / "lancedb")
    again = open_repo(tmp_path, model=model, dim=dim)
    try:
        assert again._durable.table_version() == saved["version"]  # the same version number
        reused, why = started(again)
        assert not reused and "the table's" in why, why
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_map_whose_rows_differ_from_the_table_is_caught_row_by_row(
    tmp_path: Path,
) -> None:
    """The table is the one the map names, but the index had not held one row as the table
    has it (a write it never applied): the start reads that row's token vectors from the
    table."""
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    saved = token_map.read(map_of(tmp_path))
    saved.updated = saved.updated.copy()
    saved.updated[3] += 1
    token_map.write(map_of(tmp_path), saved)
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert reused and "1 rows read from the table" in why, why
        assert again._durable.token_bytes_read > 0
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_file_damaged_while_serving_leaves_no_map(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    want = await fill(repo)
    assert await repo.checkpoint_tokens(force=True)  # a map saved while serving
    path = tmp_path / "data" / "tokens.bin"
    os.truncate(path, 0)
    assert repo.tokens_of(list(want)[5]) is None and repo.tokens_damaged
    repo.close()
    assert not map_of(tmp_path).exists()
    again = open_repo(tmp_path)
    try:
        assert not started(again)[0]
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_fleet_daemon_reads_only_what_the_others_changed_since_its_map(
    tmp_path: Path,
) -> None:
    """Two daemons over one store: a clean shutdown first follows the other's last
    commits, so the map names the newest version; once the other writes again, a's next
    start reads from the table only the row the other changed."""

    def follow(data: str) -> Repository:
        return open_repo(tmp_path, follow=60.0, data=data)

    a, b = follow("a"), follow("b")
    want: Want = {}
    try:
        m = await a.add(mem(1, text="bees"), unit(1), toks(1))
        want[m.id] = toks(1)
        n = await b.add(mem(2, text="wasps"), unit(2), toks(2))  # not followed by a yet
        want[n.id] = toks(2)
        await a.shutdown()
        a = follow("a")
        assert started(a)[0], started(a)[1]
        assert_tokens(a, want)
        changed = dataclasses.replace(
            n, text="hornets", content_hash="h2", updated_at=n.updated_at + timedelta(seconds=1)
        )
        await b.replace(changed, unit(3), toks(3))
        want[n.id] = toks(3)
        saved = token_map.read(map_of(tmp_path, "a")).digest
        await asyncio.to_thread(a.close)  # no last look: its index trails, no map is saved
        assert token_map.read(map_of(tmp_path, "a")).digest == saved  # the start's stays
        a = follow("a")
        reused, why = started(a)
        assert reused and "1 rows read from the table" in why, why
        assert_tokens(a, want)
    finally:
        await asyncio.to_thread(a.close)
        await asyncio.to_thread(b.close)


async def test_the_start_says_which_way_it_took(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="memoryd.storage.repository")
    repo = open_repo(tmp_path)
    await fill(repo)
    repo.close()
    again = open_repo(tmp_path)
    again.close()
    lines = [r.getMessage() for r in caplog.records if "loaded" in r.getMessage()]
    assert "token file rewritten (no map" in lines[0]
    assert "token file reused (its map matches table version" in lines[1]
    assert "token file reused (its map of table version" not in lines[1]


async def test_a_stop_saves_the_map_without_reading_the_tables_version_list(
    tmp_path: Path,
) -> None:
    """The version list reads every version's manifest (seconds per thousand versions,
    which a burst of Stores leaves until a compaction cleans them up) and waits behind a
    compaction's clean-up: a stop that needed it waited out the compaction it abandoned,
    past a supervisor's timeout. The map is saved and reused without it."""
    repo = open_repo(tmp_path)
    want = await fill(repo)

    def unreadable() -> list[object]:
        raise RuntimeError("the version list is being cleaned up")

    repo._durable._table.list_versions = unreadable
    repo.close()
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert reused, why
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_map_an_earlier_memoryd_saved_with_its_versions_commit_time_is_reused(
    tmp_path: Path,
) -> None:
    """Upgrading memoryd does not cost a rewrite of the token file (at 1M rows, minutes):
    the commit time such a map names is no longer compared, the rows still are."""
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    saved = token_map.read(map_of(tmp_path))
    saved.header["table"]["committed_us"] = 1_764_000_000_000_000
    token_map.write(map_of(tmp_path), saved)
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert reused, why
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_store_recreated_with_the_same_rows_and_other_token_vectors_is_not_the_old(
    tmp_path: Path,
) -> None:
    """The same model name and dimension, the same ids, times and texts,
    the same version number and row count, but other token vectors (a reembed or restore
    with new weights under the same model name, e.g. an updated ``embedder.model_dir`` of
    the same directory name, or another ``recall.token_vectors_max``), swapped in under the
    data dir that holds the old store's map: the start must not serve the old vectors."""
    repo = open_repo(tmp_path)
    await fill(repo)
    repo.close()
    saved = token_map.read(map_of(tmp_path)).header["table"]
    other = tmp_path / "other"
    made = open_repo(other, data="unused")
    want = await fill(made, seed=1000)
    made.close()
    shutil.rmtree(tmp_path / "lancedb")
    (other / "lancedb").rename(tmp_path / "lancedb")
    again = open_repo(tmp_path)
    try:
        assert again._durable.table_version() == saved["version"]  # the same version number
        reused, why = started(again)
        assert not reused, why
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_map_pointing_rows_at_each_others_records_is_caught_by_the_header_sample(
    tmp_path: Path,
) -> None:
    """The file is the map's (same inode, size, mtime), the map reads whole, every row is
    in the state the map has it, but two rows' places are swapped: their records' headers
    name the other memory, and the start rewrites rather than serve them crossed."""
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    saved = token_map.read(map_of(tmp_path))
    a, b = [i for i in range(len(saved.ids)) if saved.counts[i] >= 0][:2]
    offsets, counts = saved.offsets.copy(), saved.counts.copy()
    offsets[[a, b]], counts[[a, b]] = offsets[[b, a]], counts[[b, a]]
    saved.offsets, saved.counts = offsets, counts
    token_map.write(map_of(tmp_path), saved)
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert not reused and "is not in the token file where the map says" in why, why
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_token_file_replaced_by_a_copy_is_not_the_maps(tmp_path: Path) -> None:
    """A copy put in its place (another inode) with the same size and modification time:
    only the inode tells it apart, and the start does not take the map for it."""
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    path = tmp_path / "data" / "tokens.bin"
    copy = path.with_name("copy")
    shutil.copyfile(path, copy)
    stat = path.stat()
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(copy, path)
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert not reused and "another file than the map's" in why, why
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_row_another_daemon_changed_during_the_start_gets_no_stale_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start reads a row's token vectors from the table after its load: if the table
    has the row in another state by then (another daemon's update), the row keeps none
    until that update is followed, rather than the new text's vectors on the old record."""
    repo = open_repo(tmp_path)
    want = await fill(repo)
    assert await repo.checkpoint_tokens(force=True)
    m = await repo.add(mem(90, text="written after the map"), unit(4), toks(90))
    want[m.id] = toks(90)
    await asyncio.to_thread(repo._durable.close)  # kill -9
    real = LanceStore.read_token_rows

    def moved_on(self: LanceStore, ids: list[str]) -> object:
        for memory_id, updated_us, content_hash, tokens in real(self, ids):
            if memory_id == m.id:  # another daemon's update landed meanwhile
                yield memory_id, updated_us + 1, "h-other", toks(91)
            else:
                yield memory_id, updated_us, content_hash, tokens

    monkeypatch.setattr(LanceStore, "read_token_rows", moved_on)
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert reused and "1 rows read from the table" in why, why
        assert not again.has_tokens(m.id) and again.tokens_of(m.id) is None
        want.pop(m.id)
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_compaction_makes_a_map_due_again(tmp_path: Path) -> None:
    """The file replaced by its compaction (the map before it deleted): a map is due at
    once, even with no row changed since, so that a crash then does not rewrite it all."""
    repo = open_repo(tmp_path)
    try:
        await fill(repo)
        assert await repo.checkpoint_tokens(force=True)
        assert not await repo.checkpoint_tokens(force=True)
        await repo.compact_tokens_async()
        assert not map_of(tmp_path).exists()
        assert await repo.checkpoint_tokens(force=True)
        saved = token_map.read(map_of(tmp_path))
        assert saved.header["file"]["ino"] == (tmp_path / "data" / "tokens.bin").stat().st_ino
    finally:
        repo.close()


async def test_a_memory_recreated_with_the_same_id_and_time_is_told_apart_by_its_text(
    tmp_path: Path,
) -> None:
    """A memory forgotten, then one with the same id and updated_at created again (an
    import keeps both), with another text whose content hash has the same CRC-32 as the
    old one's: the map keeps 64 bits of the hash, and the start reads the new row's token
    vectors from the table instead of giving it the forgotten one's."""
    repo = open_repo(tmp_path)
    old = mem(5, text="the old text", content_hash="h-29685295")
    new = dataclasses.replace(old, text="another text", content_hash="h-32060020")
    import zlib

    assert zlib.crc32(b"h-29685295") == zlib.crc32(b"h-32060020")  # the collision
    await repo.add(old, unit(1), toks(1))
    assert await repo.checkpoint_tokens(force=True)
    await repo.delete([old.id])
    await repo.add(new, unit(2), toks(2))
    await asyncio.to_thread(repo._durable.close)  # kill -9
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert reused and "1 rows read from the table" in why, why
        assert_tokens(again, {new.id: toks(2)})
    finally:
        again.close()


async def test_a_map_of_the_format_before_is_still_taken(tmp_path: Path) -> None:
    """A map an earlier memoryd saved (format 1: the content hash kept as its CRC-32):
    upgrading costs no rewrite of the token file."""
    import zlib

    repo = open_repo(tmp_path)
    want = await fill(repo)
    hashes = {i: m.content_hash for i, m in repo._memories.items()}
    repo.close()
    saved = token_map.read(map_of(tmp_path))
    crcs = np.array([zlib.crc32(hashes[i].encode()) for i in saved.ids], dtype="<u4")
    encoded = [i.encode() for i in saved.ids]
    header = {**saved.header, "format": 1, "rows": len(encoded)}
    columns = (saved.offsets, saved.counts, saved.updated, crcs, [len(e) for e in encoded])
    types = ("<i8", "<i4", "<i8", "<u4", "<u4")
    sections = [np.asarray(c).astype(t).tobytes() for c, t in zip(columns, types, strict=True)]
    token_map.write_framed(map_of(tmp_path), b"MTKMAP01", header, [*sections, b"".join(encoded)])
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert reused and "its map matches table version" in why, why
        assert again._durable.token_bytes_read == 0
        assert_tokens(again, want)
    finally:
        again.close()


async def test_the_token_vectors_compared_with_the_table_are_drawn_from_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool rewrote the token vectors of the last hundred of 600 rows in the table in
    place (their updated_at and content hashes as they were): the start's sample of 64
    rows compared with the table is drawn from all the map's rows, so it finds them (with
    this seed; a sample from the map's first rows never would)."""
    real_rng = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", lambda *a: real_rng(*(a or (5,))))
    repo = open_repo(tmp_path)
    rows = [(mem(i, text=f"memory {i}"), unit(i), toks(i)) for i in range(600)]
    await repo._durable.add(rows)
    for memory, vector, tokens in rows:
        repo.put(memory, vector, tokens)
    repo.close()
    table = lancedb.connect(str(tmp_path / "lancedb")).open_table("m")
    ids = [m.id for m, _, _ in rows[500:]]
    quoted = ", ".join(f"'{i}'" for i in ids)
    changed = table.search().where(f"id IN ({quoted})").limit(None).to_arrow()
    column = changed.schema.get_field_index("token_vectors")
    changed = changed.set_column(
        column, "token_vectors", [[toks(7_000 + k).tobytes() for k in range(len(ids))]]
    )
    table.merge_insert("id").when_matched_update_all().execute(changed)
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert not reused and "token vectors in the table are not the file's" in why, why
    finally:
        again.close()
