"""A first start over a large table (no map vouches for a token file: a new daemon, a lost
data directory, a crash before any map was saved) serves before the token file is written:
it loads without the token-vector column and the file's upkeep writes it while serving
(storage/repository.py, ``OWED_TOKENS_MIN_ROWS``). Until then a Recall ranks without the
rerank, and no write may lose a memory's stored token vectors; afterwards every memory has
exactly the store's, writes made meanwhile included, and the next start reuses the file."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryd.core.errors import FailedPrecondition
from memoryd.core.retrieval import LateInteractionReranker
from memoryd.storage import lance_store, repository
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository
from memoryd.storage.token_file import TokenFile

from .test_storage import compacted, mem, unit
from .test_token_file import DIM, FixedQuery, assert_tokens
from .test_token_reuse import fill, map_of, open_repo, started, toks


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repository, "OWED_TOKENS_MIN_ROWS", 10)


async def stored_elsewhere(root: Path) -> dict[str, np.ndarray | None]:
    """A table of 22 memories written by a daemon whose data directory this test never
    uses again: a daemon started on another finds no map, as a new fleet member would."""
    first = open_repo(root, data="first")
    want = await fill(first)
    first.close()
    return want


def pause_scan(
    monkeypatch: pytest.MonkeyPatch, durable: LanceStore
) -> tuple[threading.Event, threading.Event, Callable[..., Iterator[Any]]]:
    """The table's read for the token file paused after its first rows (it takes minutes
    at a million rows: writes go on meanwhile): set once paused, the event that resumes
    it, and the read as it was."""
    started, release = threading.Event(), threading.Event()
    scan = durable.scan_token_rows

    def paused(**kw: bool) -> Iterator[tuple[str, int, str, np.ndarray | None]]:
        for i, row in enumerate(scan(**kw)):
            if i == 1:
                started.set()
                release.wait(30)
            yield row

    monkeypatch.setattr(durable, "scan_token_rows", paused)
    return started, release, scan


async def test_a_first_start_serves_then_writes_the_token_file_with_the_writes_made_meanwhile(
    tmp_path: Path,
) -> None:
    want = await stored_elsewhere(tmp_path)
    repo = open_repo(tmp_path, data="new")
    try:
        reused, why = started(repo)
        assert not reused and "written while serving" in why
        assert repo.tokens_owed
        assert repo._durable.token_bytes_read == 0  # SERVING without the column read
        with_tokens = [i for i, t in want.items() if t is not None]
        assert all(repo.tokens_of(i) is None for i in with_tokens)
        q = np.ones((2, DIM), np.float32) / np.sqrt(DIM)
        reranker = LateInteractionReranker(repo, FixedQuery(q))  # type: ignore[arg-type]
        memories = [m for i in with_tokens if (m := repo.get(i)) is not None]
        with pytest.raises(FailedPrecondition):  # the Recall keeps its fused order
            await reranker.score("q", memories)

        # Before the file is written: a metadata-only Update carries the stored token
        # vectors over (from the table: the file has none yet), never erasing them.
        kept = repo.get(with_tokens[1])
        assert kept is not None
        np.testing.assert_array_equal(
            await repo.tokens_to_copy(kept.id),
            want[kept.id],  # type: ignore[arg-type]
        )
        await repo.replace(dataclasses.replace(kept, importance=0.9), None)
        np.testing.assert_array_equal(
            repo._durable.read_tokens(kept.id),
            want[kept.id],  # type: ignore[arg-type]
        )

        # While the upkeep writes it on its thread: a Store, an Update with a new text,
        # a metadata-only Update and a Forget.
        writing = asyncio.create_task(repo.maintain_tokens())
        await asyncio.sleep(0)
        added = await repo.add(mem(60, text="written meanwhile"), unit(3), toks(60))
        want[added.id] = toks(60)
        changed = repo.get(with_tokens[2])
        assert changed is not None
        await repo.replace(
            dataclasses.replace(
                changed,
                text="a new text",
                content_hash="h-meanwhile",
                updated_at=changed.updated_at + timedelta(seconds=9),
            ),
            unit(4),
            toks(61),
        )
        want[changed.id] = toks(61)
        other = repo.get(with_tokens[3])
        assert other is not None
        await repo.replace(dataclasses.replace(other, importance=0.2), None)
        await repo.delete([with_tokens[4]])
        want[with_tokens[4]] = None
        await writing

        assert not repo.tokens_owed
        assert_tokens(repo, want)
        reranked = [m for i, t in want.items() if t is not None and (m := repo.get(i))]
        assert len(await reranker.score("q", reranked)) == len(reranked) > 15
        assert map_of(tmp_path, "new").exists()  # saved at once: a crash now reuses it
    finally:
        repo.close()
    again = open_repo(tmp_path, data="new")
    try:
        assert started(again)[0], started(again)[1]
        assert_tokens(again, want)
    finally:
        again.close()


async def test_a_stop_before_the_file_is_written_saves_no_map_and_the_next_start_writes_it(
    tmp_path: Path,
) -> None:
    want = await stored_elsewhere(tmp_path)
    repo = open_repo(tmp_path, data="new")
    writing = asyncio.create_task(repo.maintain_tokens())
    await asyncio.sleep(0)
    writing.cancel()  # a stop while the thread reads the table
    with contextlib.suppress(asyncio.CancelledError):
        await writing
    assert repo.tokens_owed
    await repo.shutdown()
    assert not map_of(tmp_path, "new").exists()  # it would vouch for rows with none
    partial = tmp_path / "new" / "tokens.bin.write"
    deadline = time.monotonic() + 10.0  # the thread stops at its next row
    while partial.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not partial.exists()  # no half-written copy left on the disk

    again = open_repo(tmp_path, data="new")
    try:
        reused, why = started(again)
        assert not reused and "written while serving" in why
        await again.maintain_tokens()
        assert_tokens(again, want)
    finally:
        again.close()


async def test_the_upkeep_writes_it_right_after_the_start_not_an_upkeep_period_later(
    tmp_path: Path,
) -> None:
    want = await stored_elsewhere(tmp_path)
    store = LanceStore(str(tmp_path / "lancedb"), table="m", model_name="x", dim=DIM)
    repo = Repository(
        store, token_path=tmp_path / "new" / "tokens.bin", token_upkeep_seconds=3600.0
    )
    repo.open()
    repo.start_jobs()
    try:
        deadline = time.monotonic() + 30.0
        while repo.tokens_owed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not repo.tokens_owed
        assert_tokens(repo, want)
    finally:
        await repo.shutdown()


async def test_a_small_table_writes_the_file_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = await stored_elsewhere(tmp_path)
    monkeypatch.setattr(repository, "OWED_TOKENS_MIN_ROWS", 1_000)
    repo = open_repo(tmp_path, data="new")
    try:
        assert not repo.tokens_owed
        assert "while serving" not in started(repo)[1]
        assert_tokens(repo, want)
    finally:
        repo.close()


async def test_the_write_survives_compactions_and_cleanups_while_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read of the table takes minutes at a million rows, and Stores go on: the
    compactions meanwhile must not delete the files of the version it reads (a local
    store keeps versions 10 s), nor may a failed read be followed by a read of the whole
    table into memory (helper-57's review)."""
    monkeypatch.setattr(lance_store, "_SCAN_BATCH", 4)

    def store() -> LanceStore:
        return LanceStore(
            str(tmp_path / "lancedb"),
            table="m",
            model_name="x",
            dim=DIM,
            compact_every=10**6,
            keep_versions_seconds=0.2,
        )

    first = Repository(store(), token_path=tmp_path / "first" / "tokens.bin")
    first.open()
    want: dict[str, np.ndarray | None] = {}
    for n in range(200):  # 40 small fragments of 5 rows
        m = await first.add(mem(n, text=f"memory {n}"), unit(n, DIM), toks(n))
        want[m.id] = toks(n)
    first.close()

    repo = Repository(store(), token_path=tmp_path / "new" / "tokens.bin")
    repo.open()
    assert repo.tokens_owed
    durable = repo._durable
    whole_reads: list[str] = []
    read_all = durable._read_all
    monkeypatch.setattr(
        durable, "_read_all", lambda t, name: whole_reads.append(name) or read_all(t, name)
    )
    started, release, _ = pause_scan(monkeypatch, durable)
    writing = asyncio.create_task(repo.maintain_tokens())
    try:
        while not started.is_set():
            await asyncio.sleep(0.01)
        durable.compact_every = 1
        for i in range(2):
            m = await repo.add(mem(500 + i, text=f"meanwhile {i}"), unit(i, DIM), toks(500 + i))
            want[m.id] = toks(500 + i)
            await compacted(durable, i + 1)
            await asyncio.sleep(0.5)  # older than keep_versions: a cleanup would take them
        release.set()
        await writing
        assert not repo.tokens_owed
        assert_tokens(repo, want)
        assert whole_reads == []
    finally:
        release.set()
        if not writing.done():
            writing.cancel()
        repo.close()


async def test_a_failed_write_leaves_no_partial_file_and_is_not_retried_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails part way (the disk fills) removes its partial copy (12 GB at a
    million rows), and the upkeep waits before it tries again instead of filling the
    disk every 30 s; once it succeeds, every memory has its token vectors."""
    want = await stored_elsewhere(tmp_path)
    repo = open_repo(tmp_path, data="new")
    append = TokenFile.append
    writes = 0
    full = True

    def filling(self: TokenFile, memory_id: str, tokens: np.ndarray) -> int:
        nonlocal writes
        if self.path is not None and self.path.name.endswith(".write"):
            writes += 1
            if full and writes > 5:
                raise OSError(28, "No space left on device")
        return append(self, memory_id, tokens)

    monkeypatch.setattr(TokenFile, "append", filling)
    try:
        with pytest.raises(OSError):
            await repo.maintain_tokens()
        assert repo.tokens_owed
        left = tmp_path / "new" / "tokens.bin.write"
        assert not left.exists(), f"{left.stat().st_size} bytes left behind"
        full, tried = False, writes
        await repo.maintain_tokens()  # the next upkeep, 30 s on: too soon
        assert repo.tokens_owed and writes == tried
        repo._owed_retry_at = 0.0  # the back-off is over
        await repo.maintain_tokens()
        assert not repo.tokens_owed
        assert_tokens(repo, want)
    finally:
        repo.close()


async def test_an_install_that_fails_leaves_every_row_pointing_into_the_file_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The install copies the records of rows written while the file was written; the disk
    filling at one of those copies leaves the index as it was (every row reading from the
    file in use), and the retry writes the file (helper-58's review)."""
    want = await stored_elsewhere(tmp_path)
    repo = open_repo(tmp_path, data="new")
    durable = repo._durable
    started, release, scan = pause_scan(monkeypatch, durable)
    writing = asyncio.create_task(repo.maintain_tokens())
    try:
        while not started.is_set():
            await asyncio.sleep(0.01)
        for i in range(2):
            m = await repo.add(mem(600 + i, text=f"meanwhile {i}"), unit(i, DIM), toks(600 + i))
            want[m.id] = toks(600 + i)
        append = TokenFile.append
        on_the_loop = 0

        def full(self: TokenFile, memory_id: str, tokens: np.ndarray) -> int:
            nonlocal on_the_loop
            if (
                self.path is not None
                and self.path.name.endswith(".write")
                and threading.current_thread() is threading.main_thread()
            ):
                on_the_loop += 1
                if on_the_loop > 1:
                    raise OSError(28, "No space left on device")
            return append(self, memory_id, tokens)

        monkeypatch.setattr(TokenFile, "append", full)
        release.set()
        with pytest.raises(OSError):
            await writing
        assert repo.tokens_owed
        assert_tokens(repo, {i: want[i] for i in list(want)[-2:]})  # as written meanwhile
        assert not repo._token_file.damaged
        monkeypatch.setattr(TokenFile, "append", append)
        monkeypatch.setattr(durable, "scan_token_rows", scan)
        repo._owed_retry_at = 0.0
        await repo.maintain_tokens()
        assert not repo.tokens_owed
        assert_tokens(repo, want)
    finally:
        release.set()
        if not writing.done():
            writing.cancel()
        repo.close()


@pytest.mark.parametrize("reading", [False, True])
async def test_a_purge_that_ends_during_the_long_read_still_sweeps_unlisted_files(
    tmp_path: Path, reading: bool
) -> None:
    """Files no version lists (a rewrite a crash or a full disk left uncommitted) may hold
    copies of forgotten rows: the sweep after a purge deletes them, also when the purge
    ended while the token file's long read kept every version (helper-58's review)."""
    store = LanceStore(
        str(tmp_path),
        table="m",
        model_name="x",
        dim=DIM,
        compact_every=10**6,
        keep_versions_seconds=0.2,
        purge_every_seconds=0.0,
    )
    store.start()
    try:
        await store.add(
            [(mem(i, text=f"the door code is 9000-{i}"), unit(i), None) for i in range(50)]
        )
        data = tmp_path / "m.lance" / "data"
        (source,) = list(data.glob("*.lance"))
        planted = data / f"{uuid.uuid4().hex}.lance"  # an uncommitted rewrite's copy
        shutil.copy(source, planted)
        long = store.long_read()
        if reading:
            long.__enter__()
        await store.delete([mem(7).id])
        await compacted(store, 1)  # the purge ends
        if reading:
            long.__exit__(None, None, None)
            await store.add([(mem(50), unit(50), None)])
        deadline = time.monotonic() + 10.0
        while planted.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not planted.exists(), "a copy of the forgotten row stays (Lance: 7 days)"
    finally:
        store.close()


def test_a_filling_given_up_before_its_thread_began_leaves_no_file(tmp_path: Path) -> None:
    # A stop can cancel the write before the executor ran it: the loop then closes and
    # removes the new file itself, and a thread that begins late touches nothing.
    new = TokenFile(DIM, tmp_path / "tokens.bin.write")
    new.append("m1", toks(3))
    assert new.path is not None and new.path.exists()
    filling = repository._Filling(new)
    filling.abandon()
    assert not new.path.exists()
    called = []
    with pytest.raises(repository._Stopped):
        filling.run(lambda stop: called.append(stop) or repository._Found())  # type: ignore[func-returns-value]
    assert called == []


def test_a_filling_given_up_while_its_thread_runs_is_removed_by_the_thread(tmp_path: Path) -> None:
    new = TokenFile(DIM, tmp_path / "tokens.bin.write")
    filling = repository._Filling(new)
    inside, release = threading.Event(), threading.Event()

    def fill(stop: threading.Event) -> repository._Found:
        new.append("m1", toks(3))
        inside.set()
        release.wait(10)
        return repository._Found()

    outcome: list[BaseException] = []
    thread = threading.Thread(
        target=lambda: outcome.append(_raised(lambda: filling.run(fill))), daemon=True
    )
    thread.start()
    assert inside.wait(10)
    filling.abandon()  # the thread still writes: the loop must not remove the file
    assert new.path is not None and new.path.exists()
    release.set()
    thread.join(10)
    assert isinstance(outcome[0], repository._Stopped)
    assert not new.path.exists()


def _raised(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except BaseException as e:
        return e
    raise AssertionError("no exception")
