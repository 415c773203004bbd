"""Reusing the token file across restarts (storage/token_map.py): after a clean shutdown the
next start takes every memory's token vectors from the daemon's tokens.bin without reading
the store's token-vector column, and reranks exactly as a start that rewrote the file; every
way the file, its map or the store can have changed since makes the start rewrite it, and
the token vectors read are always the store's."""

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
        assert not map_of(tmp_path).exists()  # gone until the next clean shutdown
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

    map_of(tmp_path).unlink()  # as a crash leaves it: the file is rewritten
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


async def test_a_crash_after_a_reused_start_rewrites_the_file(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    again = open_repo(tmp_path)
    assert started(again)[0]
    m = await again.add(mem(60, text="written before the crash"), unit(3), toks(60))
    want[m.id] = toks(60)
    # kill -9: the write is committed, the index and its map die with the process
    await asyncio.to_thread(again._durable.close)
    third = open_repo(tmp_path)
    try:
        assert not started(third)[0] and "no map" in started(third)[1]
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
    """Another writer (a tool, another daemon) changed the table while this one was down:
    a new text for a memory, with new token vectors."""
    table = lancedb.connect(str(root / "lancedb")).open_table("m")
    row = table.search().where("id = '00000000-0000-4000-8000-000000000005'").to_arrow()
    row = row.set_column(
        row.schema.get_field_index("token_vectors"),
        "token_vectors",
        [[toks(555).tobytes()]],
    )
    table.merge_insert("id").when_matched_update_all().execute(row)
    return "the table's"


@pytest.mark.parametrize(
    "change",
    [
        _truncate_file,
        _edit_file,
        _remove_file,
        _edit_map,
        _truncate_map,
        _restore_older,
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
    has it (a write it never applied): the start reads the table's token vectors after all."""
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
        assert not reused and "not in the table as the map has it" in why, why
        assert again._durable.token_bytes_read > 0
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_file_damaged_while_serving_leaves_no_map(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    want = await fill(repo)
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


async def test_a_fleet_daemon_reuses_the_file_only_for_the_version_it_holds(
    tmp_path: Path,
) -> None:
    """Two daemons over one store: a clean shutdown first follows the other's last
    commits, so the map names the newest version; once the other writes again, a's next
    start rewrites its file."""

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
        await asyncio.to_thread(a.close)  # no last look: its index trails, no map is saved
        assert not map_of(tmp_path, "a").exists()
        a = follow("a")
        reused, why = started(a)
        assert not reused and "no map" in why, why
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
