"""Token vectors on disk (storage/token_file.py): the late-interaction rerank reads each
candidate's token vectors from the daemon's token file, and what it reads is always what
the store holds for that memory, through restarts, reembeds, followed rows, updates,
forgets and a damaged file."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from memoryd_native import maxsim

from memoryd.core.errors import FailedPrecondition
from memoryd.core.retrieval import LateInteractionReranker
from memoryd.storage import token_file, token_map
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

from .test_storage import mem, unit

DIM = 8


def tokens_for(i: int, count: int = 0) -> np.ndarray:
    """int8 token vectors as quantize_tokens makes them, different per memory."""
    rng = np.random.default_rng(i)
    count = count or int(rng.integers(1, 12))
    return rng.integers(-127, 128, (count, DIM)).astype(np.int8)


def open_repo(path: Path, *, model: str = "x", follow: float = 0.0) -> Repository:
    store = LanceStore(
        str(path / "lancedb"), table="m", model_name=model, dim=DIM, shared=follow > 0
    )
    repo = Repository(
        store,
        follow_interval=follow,
        token_path=path / f"data-{id(store)}" / "tokens.bin",
    )
    repo.open()
    return repo


def assert_tokens(repo: Repository, want: dict[str, np.ndarray | None]) -> None:
    for memory_id, expected in want.items():
        got = repo.tokens_of(memory_id)
        if expected is None:
            assert got is None, memory_id
        else:
            assert got is not None, memory_id
            np.testing.assert_array_equal(got, expected)


class FixedQuery:
    """The embedder side of the reranker: a fixed query's token vectors."""

    def __init__(self, q: np.ndarray):
        self.q = q

    async def embed_query_with_tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        return self.q[0], self.q


async def test_rerank_scores_are_those_of_the_stored_token_vectors(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    try:
        written = {}
        for i in range(40):
            m = await repo.add(mem(i, text=f"memory {i}"), unit(i), tokens_for(i))
            written[m.id] = tokens_for(i)
        q = np.random.default_rng(99).standard_normal((5, DIM)).astype(np.float32)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        reranker = LateInteractionReranker(repo, FixedQuery(q))  # type: ignore[arg-type]
        chosen = [repo.get(i) for i in list(written)[5:25]]
        got = await reranker.score("query", [m for m in chosen if m is not None])
        # what the same candidates score with their token vectors held in memory
        docs = [written[m.id] for m in chosen if m is not None]
        offsets = np.concatenate([[0], np.cumsum([d.shape[0] for d in docs])]).astype(np.int64)
        want = np.clip(maxsim(q / 127.0, np.concatenate(docs), offsets), 0.0, 1.0)
        # the same scores, up to the float32 rounding of the kernel's summation order
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        assert np.argsort(-got, kind="stable").tolist() == np.argsort(-want, kind="stable").tolist()
    finally:
        repo.close()


async def test_the_candidates_tokens_read_together_are_each_memorys_own(tmp_path: Path) -> None:
    """The rerank reads its candidates' token vectors in one call (``tokens_of_many``):
    each memory's own rows in its place, and no answer at all when any candidate has none
    or its record is not the memory's (then the Recall keeps its fused order)."""
    repo = open_repo(tmp_path)
    try:
        ids = []
        for i in range(12):
            m = await repo.add(mem(i, text=f"memory {i}"), unit(i), tokens_for(i))
            ids.append(m.id)
        bare = await repo.add(mem(50, text="stored without token vectors"), unit(50), None)
        pick = [ids[7], ids[2], ids[11], ids[2], ids[0]]  # any order, a repeat
        got = repo.tokens_of_many(pick)
        assert got is not None
        tokens, starts = got
        assert tokens.dtype == np.int8 and starts.tolist()[0] == 0
        for j, memory_id in enumerate(pick):
            want = repo.tokens_of(memory_id)
            assert want is not None
            np.testing.assert_array_equal(tokens[starts[j] : starts[j + 1]], want)
        assert starts[-1] == tokens.shape[0]
        empty = repo.tokens_of_many([])
        assert empty is not None and empty[0].shape == (0, DIM) and empty[1].tolist() == [0]
        assert repo.tokens_of_many([ids[1], bare.id]) is None
        assert repo.tokens_of_many([ids[1], "no-such-memory"]) is None
        assert not repo._token_file.damaged
        # memory 3's record overwritten by memory 4's: the batch is refused, never served
        path = repo._token_file.path
        assert path is not None
        part = repo._parts[mem(3).scope]
        at3, at4 = (int(part.tok_off[part.row_of[ids[k]]]) for k in (3, 4))
        with path.open("r+b") as f:
            f.seek(at4)
            record = f.read(token_file.HEADER_BYTES + 4 * DIM)
            f.seek(at3)
            f.write(record)
        assert repo.tokens_of_many([ids[1], ids[3], ids[5]]) is None
        assert repo._token_file.damaged
        assert repo.tokens_of_many([ids[1], ids[5]]) is not None  # the others still read
    finally:
        repo.close()


async def test_a_recall_with_a_bare_candidate_still_finds_a_damaged_record(
    tmp_path: Path,
) -> None:
    """A Recall whose candidates include a memory stored without token vectors falls back
    to its fused order, and still reads the others' records: a damaged one is noticed
    (and so repaired) as when each candidate was read on its own."""
    repo = open_repo(tmp_path)
    try:
        a = await repo.add(mem(1, text="memory 1"), unit(1), tokens_for(1, 4))
        b = await repo.add(mem(2, text="memory 2"), unit(2), tokens_for(2, 4))
        bare = await repo.add(mem(3, text="no token vectors"), unit(3), None)
        path = repo._token_file.path
        assert path is not None
        part = repo._parts[mem(1).scope]
        at_a, at_b = (int(part.tok_off[part.row_of[m.id]]) for m in (a, b))
        with path.open("r+b") as f:  # a's record overwritten by b's
            f.seek(at_b)
            record = f.read(token_file.HEADER_BYTES + 4 * DIM)
            f.seek(at_a)
            f.write(record)
        q = np.ones((2, DIM), np.float32) / np.sqrt(DIM)
        reranker = LateInteractionReranker(repo, FixedQuery(q))  # type: ignore[arg-type]
        with pytest.raises(FailedPrecondition):
            await reranker.score("q", [bare, a])
        assert repo.tokens_damaged
        assert await repo.repair_tokens()
        assert_tokens(repo, {a.id: tokens_for(1, 4), b.id: tokens_for(2, 4), bare.id: None})
    finally:
        repo.close()


async def test_updates_forgets_and_restart_keep_each_memorys_tokens(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    want: dict[str, np.ndarray | None] = {}
    try:
        for i in range(30):
            m = await repo.add(mem(i, text=f"memory {i}"), unit(i), tokens_for(i))
            want[m.id] = tokens_for(i)
        ids = list(want)
        # a new text: new token vectors
        first = repo.get(ids[0])
        assert first is not None
        await repo.replace(dataclasses.replace(first, text="changed"), unit(3), tokens_for(100))
        want[ids[0]] = tokens_for(100)
        # metadata only (no new vector): the token vectors stay
        second = repo.get(ids[1])
        assert second is not None
        await repo.replace(dataclasses.replace(second, importance=0.9), None)
        # forgotten: none, and the rows that moved into their place keep their own
        await repo.delete(ids[2:6])
        for memory_id in ids[2:6]:
            want[memory_id] = None
        assert_tokens(repo, want)
        # compaction (forced) rewrites the file: nothing changes for a reader
        repo.compact_tokens()
        assert_tokens(repo, want)
    finally:
        repo.close()
    again = open_repo(tmp_path)  # a restart: the token file reused (its map, token_map)
    try:
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_reembedded_store_never_serves_the_old_token_vectors(tmp_path: Path) -> None:
    """The token file of a daemon restarted on a reembedded store holds the new model's
    vectors (the old file's map names another table: the file is rewritten)."""
    path = tmp_path / "data" / "tokens.bin"
    old = Repository(
        LanceStore(str(tmp_path / "old"), table="m", model_name="a", dim=DIM), token_path=path
    )
    old.open()
    m = await old.add(mem(1, text="bees"), unit(1), tokens_for(1))
    old.close()
    new = Repository(
        LanceStore(str(tmp_path / "new"), table="m", model_name="b", dim=DIM), token_path=path
    )
    new.open()
    try:
        assert new.tokens_of(m.id) is None  # not in the new store yet: nothing stale
        await new.add(m, unit(1), tokens_for(7))
        assert_tokens(new, {m.id: tokens_for(7)})
    finally:
        new.close()


async def test_a_followed_row_brings_its_token_vectors(tmp_path: Path) -> None:
    a = open_repo(tmp_path, follow=60.0)
    b = open_repo(tmp_path, follow=60.0)
    try:
        m = await a.add(mem(1, text="the user keeps bees"), unit(1), tokens_for(1))
        await b.catch_up()
        assert_tokens(b, {m.id: tokens_for(1)})
        changed = dataclasses.replace(
            m, text="wasps now", content_hash="h2", updated_at=m.updated_at + timedelta(seconds=1)
        )
        await a.replace(changed, unit(2), tokens_for(2))
        await b.catch_up()
        assert_tokens(b, {m.id: tokens_for(2)})
        await a.delete([m.id])
        await b.catch_up()
        assert_tokens(b, {m.id: None})
    finally:
        await asyncio.to_thread(a.close)
        await asyncio.to_thread(b.close)


@pytest.mark.parametrize("damage", ["truncate", "overwrite"])
async def test_a_damaged_token_file_falls_back_then_is_rebuilt(tmp_path: Path, damage: str) -> None:
    repo = open_repo(tmp_path)
    try:
        want = {}
        for i in range(20):
            m = await repo.add(mem(i, text=f"memory {i}"), unit(i), tokens_for(i, 6))
            want[m.id] = tokens_for(i, 6)
        path = repo._token_file.path
        assert path is not None
        if damage == "truncate":
            os.truncate(path, path.stat().st_size // 2)
        else:  # another memory's record copied over the first ones: wrong ids
            data = path.read_bytes()
            size = token_file.HEADER_BYTES + 6 * DIM
            path.write_bytes(data[5 * size : 10 * size] + data[5 * size :])
        q = np.ones((2, DIM), np.float32) / np.sqrt(DIM)
        reranker = LateInteractionReranker(repo, FixedQuery(q))  # type: ignore[arg-type]
        memories = [repo.get(i) for i in want]
        damaged = [i for i in want if repo.tokens_of(i) is None]
        assert damaged  # the damaged records are seen as such, never as other vectors
        for memory_id in want:
            got = repo.tokens_of(memory_id)
            if got is not None:
                np.testing.assert_array_equal(got, want[memory_id])
        with pytest.raises(FailedPrecondition):  # the Recall keeps its fused order
            await reranker.score("q", [m for m in memories if m is not None])
        assert await repo.repair_tokens()
        assert_tokens(repo, want)
        assert not await repo.repair_tokens()  # nothing left to repair
        await reranker.score("q", [m for m in memories if m is not None])
    finally:
        repo.close()


async def test_an_update_while_the_file_is_damaged_keeps_the_stored_token_vectors(
    tmp_path: Path,
) -> None:
    """A metadata-only Update copies the memory's token vectors: with the token file
    damaged it takes them from the store, never writing the memory back without them."""
    repo = open_repo(tmp_path)
    m = await repo.add(mem(1, text="bees"), unit(1), tokens_for(1))
    path = repo._token_file.path
    assert path is not None
    os.truncate(path, 0)
    assert repo.tokens_of(m.id) is None
    await repo.replace(dataclasses.replace(m, importance=0.9), None)
    assert_tokens(repo, {m.id: tokens_for(1)})  # the update's own write reads again
    repo.close()
    again = open_repo(tmp_path)
    try:
        assert_tokens(again, {m.id: tokens_for(1)})
    finally:
        again.close()


async def test_compaction_on_a_thread_keeps_writes_made_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upkeep job compacts the token file while writes go on: a memory updated or
    forgotten during the copy reads as last written afterwards, and the file shrinks."""
    monkeypatch.setattr(token_file, "COMPACT_MIN_DEAD", 0)
    repo = open_repo(tmp_path)
    try:
        want: dict[str, np.ndarray | None] = {}
        for i in range(30):
            m = await repo.add(mem(i, text=f"memory {i}"), unit(i), tokens_for(i, 10))
            want[m.id] = tokens_for(i, 10)
        ids = list(want)
        for memory_id in ids[:20]:  # dead records outweigh the live ones
            current = repo.get(memory_id)
            assert current is not None
            one = tokens_for(50, 1)
            await repo.replace(dataclasses.replace(current, text="x"), unit(1), one)
            want[memory_id] = one
        path = repo._token_file.path
        assert path is not None
        before = path.stat().st_size
        compaction = asyncio.create_task(repo.maintain_tokens())
        await asyncio.sleep(0)  # the copy has begun on its thread
        changed = repo.get(ids[25])
        assert changed is not None
        await repo.replace(dataclasses.replace(changed, text="y"), unit(2), tokens_for(77))
        want[ids[25]] = tokens_for(77)
        await repo.delete([ids[26]])
        want[ids[26]] = None
        await compaction
        assert_tokens(repo, want)
        assert path.stat().st_size < before
        assert not repo.tokens_damaged
    finally:
        repo.close()


def test_a_file_reopened_for_a_map_is_cut_back_to_what_the_map_describes(tmp_path: Path) -> None:
    """A map saved while serving, then records appended before a crash: the start reopens
    the file at the map's length, as it was then (its modification time too), and appends
    after it; a map longer than the file is refused."""
    path = tmp_path / "tokens.bin"
    f = token_file.TokenFile(DIM, path)
    first = f.append("a", tokens_for(1))
    size = f.size
    mtime = f.sync().st_mtime_ns
    f.append("b", tokens_for(2))  # after the map
    f.close()
    assert path.stat().st_size > size
    again = token_file.TokenFile(DIM, path, keep=size, mtime_ns=mtime)
    try:
        assert path.stat().st_size == size and path.stat().st_mtime_ns == mtime
        held = again.read("a", first, tokens_for(1).shape[0])
        assert held is not None
        np.testing.assert_array_equal(held, tokens_for(1))
        assert again.append("c", tokens_for(3)) == size  # where "b" was
    finally:
        again.close()
    with pytest.raises(ValueError, match="not 100000 or more"):
        token_file.TokenFile(DIM, path, keep=100_000)


def test_whatever_truncates_or_replaces_the_file_deletes_its_map_first(tmp_path: Path) -> None:
    path = tmp_path / "tokens.bin"
    where = token_map.map_path(path)
    f = token_file.TokenFile(DIM, path)
    f.append("a", tokens_for(1))
    where.write_bytes(b"a map")
    other = token_file.TokenFile(DIM, tmp_path / "tokens.bin.compact")
    other.append("a", tokens_for(1))
    assert where.exists()
    f.replace_with(other)  # a compaction or a repair
    assert not where.exists() and f.generation == 1
    f.close()
    where.write_bytes(b"a map")
    token_file.TokenFile(DIM, path).close()  # a start that rewrites the file
    assert not where.exists() and path.stat().st_size == 0
