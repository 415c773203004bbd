"""The built-in ONNX embedder (real model from the PyPI packages) and its batching front."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryd.core.errors import ConfigError
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.inference.onnx_embedder import (
    PAD_WASTE,
    ModelFiles,
    OnnxEmbedder,
    builtin_model_files,
    length_groups,
    model_files_from_dir,
)
from memoryd.inference.quantize import quantized_model


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    return OnnxEmbedder(builtin_model_files(), max_tokens=256, intra_op_threads=1)


def test_vectors_are_384d_and_unit_length(model: OnnxEmbedder) -> None:
    v = model.embed(["hello world", "a much longer sentence about cooking pasta at home"])
    assert v.shape == (2, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


PAIRS = [
    ("The user prefers dark mode in the editor", "They like a dark theme for coding"),
    ("My flight to Tokyo leaves on Monday", "I am flying to Japan at the start of the week"),
    ("The cat is sleeping on the sofa", "A kitten naps on the couch"),
]
UNRELATED = [
    ("The user prefers dark mode in the editor", "Quarterly tax filings are due in April"),
    ("My flight to Tokyo leaves on Monday", "Add two cups of flour to the dough"),
    ("The cat is sleeping on the sofa", "The database migration failed on step 3"),
]


def test_similar_pairs_score_far_above_unrelated(model: OnnxEmbedder) -> None:
    def cos(a: str, b: str) -> float:
        x, y = model.embed([a, b])
        return float(x @ y)

    similar = [cos(a, b) for a, b in PAIRS]
    unrelated = [cos(a, b) for a, b in UNRELATED]
    assert min(similar) > 0.4, similar
    assert max(unrelated) < 0.2, unrelated
    assert min(similar) - max(unrelated) > 0.3


def test_batch_equals_one_by_one_and_padding_does_not_leak(model: OnnxEmbedder) -> None:
    texts = ["short", "a considerably longer sentence that needs many more tokens than the first"]
    batch = model.embed(texts)
    single = np.stack([model.embed([t])[0] for t in texts])
    assert np.allclose(batch, single, atol=1e-4)


def test_text_longer_than_the_token_limit_is_truncated_not_refused(model: OnnxEmbedder) -> None:
    v = model.embed(["word " * 2000])
    assert v.shape == (1, 384) and np.isfinite(v).all()


def test_model_dir_must_hold_model_and_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.onnx"):
        model_files_from_dir(tmp_path)


async def test_batcher_shares_runs_dedupes_and_caches(model: OnnxEmbedder) -> None:
    embedder = BatchingEmbedder(lambda: model, workers=1, max_batch=16, cache_size=100)
    embedder.start()
    try:
        texts = [f"note number {i}" for i in range(20)] + ["note number 3"] * 5
        vectors = await asyncio.gather(*(embedder.embed_document(t) for t in texts))
        assert np.allclose(vectors[3], vectors[-1])
        assert np.allclose(vectors[0], model.embed(["note number 0"])[0], atol=1e-4)
        # 25 requests, 20 distinct texts, fewer model runs than texts.
        assert embedder.batched_texts == 20
        assert embedder.batches < 20
        await embedder.embed_query("cached query")
        runs = embedder.batches
        again = await embedder.embed_query("cached query")
        assert embedder.batches == runs and again.shape == (384,)
        assert embedder.cache_stats()[0] >= 1
    finally:
        embedder.close()


def test_mixed_lengths_batch_equals_one_by_one(model: OnnxEmbedder) -> None:
    # Eight lengths from 1 to ~120 words: the batch is split into length groups, and each
    # text must still get exactly the vector (and token vectors) it gets alone.
    texts = [" ".join(["memory"] * n) + f" number {n}" for n in (1, 120, 3, 40, 2, 80, 12, 5)]
    vectors, tokens = model.embed_full(texts)
    for i, text in enumerate(texts):
        alone, alone_tokens = model.embed_full([text])
        assert np.allclose(vectors[i], alone[0], atol=1e-4), text
        assert tokens[i].shape == alone_tokens[0].shape
        assert np.allclose(tokens[i], alone_tokens[0], atol=1e-3)


@pytest.mark.parametrize(
    "lengths", [[5, 5, 5], [3, 200, 4, 150, 7, 9, 60, 61, 62], [10], list(range(1, 60))]
)
def testlength_groups_cover_the_batch_and_bound_padding(lengths: list[int]) -> None:
    groups = length_groups(lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        padded = len(g) * max(lengths[i] for i in g)
        real = sum(lengths[i] for i in g)
        assert len(g) == 1 or padded <= PAD_WASTE * real


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    cache = tmp_path_factory.mktemp("models")
    path = quantized_model(builtin_model_files().model, cache)
    return path, path.stat().st_mtime


def test_quantised_model_is_built_once_and_cached(quantized: tuple[Path, float]) -> None:
    path, built_at = quantized
    again = quantized_model(builtin_model_files().model, path.parent)
    assert again == path and again.stat().st_mtime == built_at
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left


def test_quantised_model_keeps_meaning(model: OnnxEmbedder, quantized: tuple[Path, float]) -> None:
    files = builtin_model_files()
    q = OnnxEmbedder(ModelFiles("q", quantized[0], files.tokenizer), intra_op_threads=1)
    texts = [t for pair in PAIRS + UNRELATED for t in pair]
    reference, vectors = model.embed(texts), q.embed(texts)
    assert (np.sum(reference * vectors, axis=1) > 0.95).all()
    similar = [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(PAIRS))]
    unrelated = [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(PAIRS), 6)]
    assert min(similar) - max(unrelated) > 0.3, (similar, unrelated)


class _GatedModel:
    """Stands in for OnnxEmbedder: records each run's texts; the first run waits for a gate."""

    name, dim = "gated", 4

    def __init__(self) -> None:
        self.runs: list[list[str]] = []
        self.started = threading.Event()
        self.gate = threading.Event()

    def embed_full(self, texts: list[str], *, tokens: bool = True, started=None):  # type: ignore[no-untyped-def]
        if started is not None:
            started()
        if not self.runs:
            self.started.set()
            self.gate.wait(10)
        self.runs.append(list(texts))
        n = len(texts)
        return np.ones((n, 4), np.float32) / 2, [np.ones((1, 4), np.float32)] * n


@contextlib.asynccontextmanager
async def held(
    kind: str, first: str, **batching: Any
) -> AsyncIterator[tuple[_GatedModel, BatchingEmbedder, asyncio.Future[Any]]]:
    """A one-worker BatchingEmbedder over a _GatedModel whose first run (``first``, a
    "query" or a "document") is in progress, held until ``fake.gate`` is set."""
    fake = _GatedModel()
    embedder = BatchingEmbedder(lambda: fake, workers=1, **batching)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        embed = embedder.embed_query if kind == "query" else embedder.embed_document
        running = asyncio.ensure_future(embed(first))
        assert await asyncio.to_thread(fake.started.wait, 10)
        yield fake, embedder, running
    finally:
        embedder.close()


async def test_queries_jump_ahead_of_queued_documents() -> None:
    async with held("document", "doc 0", doc_batch=3, doc_max_wait=10.0) as (fake, embedder, first):
        docs = [asyncio.ensure_future(embedder.embed_document(f"doc {i}")) for i in range(1, 8)]
        queries = [asyncio.ensure_future(embedder.embed_query(f"query {i}")) for i in range(2)]
        await asyncio.sleep(0.05)  # all queued behind the gated run
        fake.gate.set()
        await asyncio.gather(first, *docs, *queries)
        assert fake.runs[0] == ["doc 0"]
        assert fake.runs[1] == ["query 0", "query 1"]  # one run, before any waiting document
        assert [len(r) for r in fake.runs[2:]] == [3, 3, 1]  # documents in runs of doc_batch


async def test_a_store_text_that_waited_goes_ahead_of_queued_queries() -> None:
    async with held("query", "query 0", max_batch=2, doc_max_wait=0.02) as (fake, embedder, first):
        doc = asyncio.ensure_future(embedder.embed_document("the store text"))
        queries = [asyncio.ensure_future(embedder.embed_query(f"query {i}")) for i in range(1, 7)]
        await asyncio.sleep(0.05)  # the document has now waited longer than doc_max_wait
        fake.gate.set()
        await asyncio.gather(first, doc, *queries)
        assert fake.runs[1] == ["the store text"]  # not after the three runs of queries
        assert [len(r) for r in fake.runs[2:]] == [2, 2, 2]


async def test_a_flooding_tenant_does_not_hold_back_another_tenants_query() -> None:
    from memoryd.core import principals

    principals.TENANT.set("flood")
    async with held("query", "flood 0", max_batch=4) as (fake, embedder, first):
        flood = [asyncio.ensure_future(embedder.embed_query(f"flood {i}")) for i in range(1, 40)]
        principals.TENANT.set("quiet")
        quiet = asyncio.ensure_future(embedder.embed_query("the quiet tenant's question"))
        await asyncio.sleep(0.05)  # all queued behind the gated run
        fake.gate.set()
        await asyncio.gather(first, quiet, *flood)
        # Served in the next run, not after the flood's ten runs.
        assert "the quiet tenant's question" in fake.runs[1]
        assert sum(len(r) for r in fake.runs) == 41


async def test_texts_whose_callers_gave_up_are_dropped_not_computed() -> None:
    import time

    from memoryd.core import principals
    from memoryd.core.errors import DeadlineExceeded

    async with held("query", "first", max_batch=4) as (fake, embedder, first):
        principals.DEADLINE.set(time.monotonic() + 0.01)
        late = asyncio.ensure_future(embedder.embed_query("nobody waits for this"))
        principals.DEADLINE.set(None)
        kept = asyncio.ensure_future(embedder.embed_query("someone waits for this"))
        await asyncio.sleep(0.05)  # the first one's deadline passes while it queues
        fake.gate.set()
        await asyncio.gather(first, kept)
        with pytest.raises(DeadlineExceeded):
            await late
        assert ["someone waits for this"] in fake.runs
        assert not any("nobody waits for this" in r for r in fake.runs)


async def test_a_flood_of_store_texts_does_not_hold_back_a_query() -> None:
    """Store texts that waited go first, but runs alternate while queries wait: a query
    waits for at most one run of documents, not for the whole backlog."""
    async with held("document", "doc 0", doc_batch=4, doc_max_wait=0.0) as (fake, embedder, first):
        docs = [asyncio.ensure_future(embedder.embed_document(f"doc {i}")) for i in range(1, 41)]
        query = asyncio.ensure_future(embedder.embed_query("where is the query?"))
        await asyncio.sleep(0.05)  # every document has waited longer than doc_max_wait
        fake.gate.set()
        await asyncio.gather(first, query, *docs)
        at = next(i for i, run in enumerate(fake.runs) if "where is the query?" in run)
        assert at <= 2, fake.runs[: at + 1]  # after at most one run of documents
        assert sum(len(r) for r in fake.runs) == 42


async def test_queries_run_on_the_first_worker_while_it_is_free_and_on_another_when_busy() -> None:
    """One query at a time, as a gateway's turns come, always runs on the same session
    (its weights still in the caches from the last one); a query arriving while that
    session is busy does not wait for it: another worker runs it. Closing ends both."""
    first, second = _GatedModel(), _GatedModel()
    first.runs.append(["(not gated)"])  # the first worker runs freely
    second.gate.set()
    models = iter([first, second])
    hold, release = threading.Event(), threading.Event()
    run = first.embed_full

    def held_run(texts: list[str], *, tokens: bool = True):  # type: ignore[no-untyped-def]
        if texts == ["a long turn"]:
            hold.set()
            release.wait(10)
        return run(texts, tokens=tokens)

    first.embed_full = held_run  # type: ignore[method-assign]
    embedder = BatchingEmbedder(lambda: next(models), workers=2)  # type: ignore[arg-type,return-value]
    embedder.start()
    threads = list(embedder._threads)
    try:
        for i in range(30):
            await embedder.embed_query(f"turn {i}")
        assert [r[0] for r in first.runs[1:]] == [f"turn {i}" for i in range(30)]
        assert second.runs == []
        # The first worker busy with a query: the next one does not wait for it.
        busy = asyncio.ensure_future(embedder.embed_query("a long turn"))
        assert await asyncio.to_thread(hold.wait, 10)
        vector = await asyncio.wait_for(embedder.embed_query("while the first is busy"), 10)
        assert vector.shape == (4,)
        assert second.runs == [["while the first is busy"]]
        release.set()
        await busy
    finally:
        release.set()
        embedder.close()
    assert not any(t.is_alive() for t in threads)


class _CountingModel:
    """Stands in for OnnxEmbedder: records its texts; each run takes a little while."""

    name, dim = "counting", 4

    def __init__(self, seconds: float = 0.0005) -> None:
        self.texts: list[str] = []
        self.seconds = seconds

    def embed_full(self, texts: list[str], *, tokens: bool = True, started=None):  # type: ignore[no-untyped-def]
        if started is not None:
            started()
        time.sleep(self.seconds)
        self.texts.extend(texts)
        n = len(texts)
        return np.ones((n, 4), np.float32) / 2, [np.ones((1, 4), np.float32)] * n


async def _both_waiting(embedder: BatchingEmbedder) -> None:
    for _ in range(1000):
        with embedder._cond:
            if embedder._first_waiting and embedder._others_waiting == 1:
                return
        await asyncio.sleep(0.005)
    raise AssertionError("the workers never both waited")


async def test_a_store_text_goes_to_another_worker_while_the_first_waits() -> None:
    # worker 0 is kept for the next query: a Store text wakes another worker when one waits
    first, second = _CountingModel(), _CountingModel()
    models = iter([first, second])
    embedder = BatchingEmbedder(lambda: next(models), workers=2)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        await _both_waiting(embedder)
        await asyncio.wait_for(embedder.embed_document("a store text"), 10)
        assert (first.texts, second.texts) == ([], ["a store text"])
        await _both_waiting(embedder)
        await asyncio.wait_for(embedder.embed_query("a query"), 10)
        assert (first.texts, second.texts) == (["a query"], ["a store text"])
    finally:
        embedder.close()


@pytest.mark.parametrize("workers", [1, 2, 3])
async def test_every_text_of_a_mixed_burst_is_answered(workers: int) -> None:
    # queries and Store texts arriving together from many callers, in any order: none is
    # left waiting (a wake-up lost between the workers' two conditions would hang here)
    models = [_CountingModel() for _ in range(workers)]
    found = iter(models)
    embedder = BatchingEmbedder(lambda: next(found), workers=workers, doc_batch=3)  # type: ignore[arg-type,return-value]
    embedder.start()
    rng = random.Random(workers)
    try:
        for burst in range(5):
            calls = []
            for i in range(120):
                embed = embedder.embed_query if rng.random() < 0.5 else embedder.embed_document
                calls.append(asyncio.ensure_future(embed(f"{burst} {i}")))
                if rng.random() < 0.1:
                    await asyncio.sleep(rng.random() * 0.002)
            await asyncio.wait_for(asyncio.gather(*calls), 30)
        texts = [t for m in models for t in m.texts]
        assert sorted(texts) == sorted(f"{b} {i}" for b in range(5) for i in range(120))
    finally:
        embedder.close()


@pytest.mark.parametrize("workers", [2, 3])
async def test_a_burst_of_store_texts_runs_on_every_worker(workers: int) -> None:
    # Store texts submitted in one go (a re-embedding, a bulk import): every worker takes
    # runs of them, worker 0 included while no query waits
    models = [_CountingModel(seconds=0.02) for _ in range(workers)]
    found = iter(models)
    embedder = BatchingEmbedder(lambda: next(found), workers=workers, doc_batch=4)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        for _ in range(1000):
            with embedder._cond:
                if embedder._first_waiting and embedder._others_waiting == workers - 1:
                    break
            await asyncio.sleep(0.005)
        texts = [f"store text {i}" for i in range(8 * workers)]
        await asyncio.wait_for(asyncio.gather(*map(embedder.embed_document, texts)), 30)
        assert sorted(t for m in models for t in m.texts) == sorted(texts)
        assert all(m.texts for m in models), [len(m.texts) for m in models]
    finally:
        embedder.close()


class _StartingModel:
    """Stands in for OnnxEmbedder: notes when it was told its run started; each run takes
    ``seconds`` after that (or raises ``fail``)."""

    name, dim = "starting", 4

    def __init__(self, seconds: float = 0.05, fail: Exception | None = None) -> None:
        self.seconds, self.fail = seconds, fail
        self.started_at: list[float] = []
        self.runs = 0

    def embed_full(self, texts: list[str], *, tokens: bool = True, started=None):  # type: ignore[no-untyped-def]
        self.runs += 1
        if self.fail is not None:
            raise self.fail
        if started is not None:
            self.started_at.append(time.monotonic())
            started()
        time.sleep(self.seconds)
        n = len(texts)
        return np.ones((n, 4), np.float32) / 2, [np.ones((1, 4), np.float32)] * n


async def test_begin_query_returns_once_the_model_runs_and_the_vector_after_it() -> None:
    """A Recall's query goes to the model at once and its caller goes on (to the query's
    text analysis) only once the model started on it, so its work runs beside the model,
    not ahead of the worker; the vector comes when the model is done; the same text again
    comes from the cache without a run."""
    model = _StartingModel(seconds=0.05)
    embedder = BatchingEmbedder(lambda: model, workers=1)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        await asyncio.sleep(0.05)  # the worker waits
        pending = embedder.begin_query("where is the cat", tokens=True, wait_for_model=5.0)
        returned = time.monotonic()
        assert not pending.ready and len(model.started_at) == 1
        assert model.started_at[0] <= returned < model.started_at[0] + model.seconds
        vector, tokens = await pending
        assert time.monotonic() >= model.started_at[0] + model.seconds
        assert vector.shape == (4,) and tokens is not None and tokens.shape == (1, 4)
        again = embedder.begin_query("where is the cat", tokens=True, wait_for_model=5.0)
        assert again.ready and model.runs == 1
        np.testing.assert_array_equal((await again)[0], vector)
    finally:
        embedder.close()


async def test_begin_query_does_not_wait_for_a_busy_worker_nor_a_failed_run() -> None:
    """When its worker is in another run the caller goes on at once (its loop is not held
    for a run it is not in); a run that fails before starting frees the caller at once and
    its error reaches the await."""
    async with held("query", "first", doc_max_wait=10.0) as (fake, embedder, first):
        began = time.monotonic()
        pending = embedder.begin_query("second", tokens=False, wait_for_model=5.0)
        assert time.monotonic() - began < 1.0 and not pending.ready
        fake.gate.set()
        await first
        assert (await pending)[0].shape == (4,)
    model = _StartingModel(fail=RuntimeError("the model broke"))
    embedder = BatchingEmbedder(lambda: model, workers=1)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        await asyncio.sleep(0.05)
        began = time.monotonic()
        pending = embedder.begin_query("where is the cat", tokens=False, wait_for_model=5.0)
        assert time.monotonic() - began < 1.0
        with pytest.raises(RuntimeError, match="the model broke"):
            await pending
    finally:
        embedder.close()


class _Halt(BaseException):
    """What no ``except Exception`` catches (a model's own code could raise SystemExit)."""


async def test_a_model_run_ending_in_a_base_exception_fails_its_texts_and_the_worker_goes_on() -> (
    None
):
    """Before, a worker caught only Exception: anything else ended its thread with the
    text's caller waiting for ever (and, with one worker, every later caller too)."""
    model = _StartingModel(fail=_Halt("stop right there"))
    embedder = BatchingEmbedder(lambda: model, workers=1)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        with pytest.raises(RuntimeError, match="_Halt: stop right there"):
            await asyncio.wait_for(embedder.embed_query("the first text"), 5)
        model.fail = None
        assert (await asyncio.wait_for(embedder.embed_query("the next text"), 5)).shape == (4,)
        assert embedder.live_workers() == 1 and model.runs == 2
    finally:
        embedder.close()


def _fault_on_answer(embedder: BatchingEmbedder, prefix: str) -> None:
    """A fault in the batcher itself (not the model): handing back the answer of a text
    starting with ``prefix`` raises SystemExit in the worker, whose thread ends."""
    answer = embedder._answer

    def faulty(job: Any, callback: Any, value: object) -> None:
        if job.text.startswith(prefix) and not isinstance(value, BaseException):
            raise SystemExit("a fault in the worker")
        answer(job, callback, value)

    embedder._answer = faulty  # type: ignore[method-assign]


async def test_a_worker_that_stops_hands_its_queries_to_the_others_and_the_last_fails_them() -> (
    None
):
    """A worker's thread that ends by a fault answers the text it held (UNAVAILABLE at
    the edge, which the clients retry), the other worker takes the queries, and once no
    worker is left every queued and later text fails at once, instead of each call
    waiting until its deadline, or for ever without one."""
    from memoryd.core.errors import NotReady

    fake = _GatedModel()
    fake.gate.set()
    embedder = BatchingEmbedder(lambda: fake, workers=2)  # type: ignore[arg-type,return-value]
    embedder.start()
    _fault_on_answer(embedder, "fault")
    try:
        with pytest.raises(NotReady, match="an embedding worker stopped; retry"):
            await asyncio.wait_for(embedder.embed_query("fault one"), 5)
        assert embedder.live_workers() == 1 and embedder.alive()
        assert (await asyncio.wait_for(embedder.embed_query("a query"), 5)).shape == (4,)
        with pytest.raises(NotReady, match="retry"):
            await asyncio.wait_for(embedder.embed_query("fault two"), 5)
        assert embedder.live_workers() == 0 and not embedder.alive()
        began = time.monotonic()
        with pytest.raises(NotReady, match="workers stopped"):
            await asyncio.wait_for(embedder.embed_query("asked afterwards"), 5)
        with pytest.raises(NotReady, match="workers stopped"):
            await asyncio.wait_for(embedder.embed_document("stored afterwards"), 5)
        assert time.monotonic() - began < 1.0
    finally:
        embedder.close()

    # One worker, texts queued behind the run that ends it: they fail as it stops.
    fake = _GatedModel()
    embedder = BatchingEmbedder(lambda: fake, workers=1)  # type: ignore[arg-type,return-value]
    embedder.start()
    _fault_on_answer(embedder, "fault")
    try:
        running = asyncio.ensure_future(embedder.embed_query("fault in the run"))
        assert await asyncio.to_thread(fake.started.wait, 10)
        queued = [
            asyncio.ensure_future(embedder.embed_query("a queued query")),
            asyncio.ensure_future(embedder.embed_document("a queued Store text")),
        ]
        await asyncio.sleep(0.05)
        fake.gate.set()
        with pytest.raises(NotReady, match="retry"):
            await asyncio.wait_for(running, 5)
        for q in queued:
            with pytest.raises(NotReady, match="workers stopped"):
                await asyncio.wait_for(q, 5)
        assert fake.runs == [["fault in the run"]]
    finally:
        embedder.close()


async def test_a_fault_while_answering_expired_texts_still_fails_the_run_it_took() -> None:
    """The texts a worker took off the queue are its to answer from that moment: a fault
    while it answers the expired ones among them (before its run) fails the others too,
    and a caller asking the same text later is refused, not joined to a lost job
    (helper-65's review)."""
    from memoryd.core import principals
    from memoryd.core.errors import DeadlineExceeded, NotReady

    fake = _GatedModel()
    embedder = BatchingEmbedder(lambda: fake, workers=1)  # type: ignore[arg-type,return-value]
    embedder.start()
    answer = embedder._answer

    def faulty(job: Any, callback: Any, value: object) -> None:
        if isinstance(value, DeadlineExceeded):
            raise SystemExit("a fault answering an expired text")
        answer(job, callback, value)

    embedder._answer = faulty  # type: ignore[method-assign]
    try:
        running = asyncio.ensure_future(embedder.embed_query("the gated run"))
        assert await asyncio.to_thread(fake.started.wait, 10)

        async def expiring() -> Any:
            principals.DEADLINE.set(time.monotonic() + 0.01)
            return await embedder.embed_query("a text whose caller gives up")

        late = asyncio.ensure_future(expiring())
        waiting = asyncio.ensure_future(embedder.embed_query("a text with no deadline"))
        await asyncio.sleep(0.05)
        fake.gate.set()  # next: the expired text and the other taken in one go
        await asyncio.wait_for(running, 5)
        with pytest.raises(NotReady):
            await asyncio.wait_for(waiting, 5)
        with pytest.raises((NotReady, DeadlineExceeded)):
            await asyncio.wait_for(late, 5)
        with pytest.raises(NotReady, match="workers stopped"):
            await asyncio.wait_for(embedder.embed_query("a text with no deadline"), 5)
        assert not embedder.alive() and fake.runs == [["the gated run"]]
    finally:
        embedder.close()


class _HoldingModel:
    """Stands in for OnnxEmbedder: records each run's texts; a run of "held" waits for
    ``gate`` (``entered`` says it began)."""

    name, dim = "holding", 4

    def __init__(self) -> None:
        self.runs: list[list[str]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()

    def embed_full(self, texts: list[str], *, tokens: bool = True, started=None):  # type: ignore[no-untyped-def]
        if started is not None:
            started()
        if texts == ["held"]:
            self.entered.set()
            self.gate.wait(10)
        self.runs.append(list(texts))
        n = len(texts)
        return np.ones((n, 4), np.float32) / 2, [np.ones((1, 4), np.float32)] * n


async def test_with_worker_0_gone_the_other_workers_still_put_queries_before_store_texts() -> None:
    """Worker 0 serves queries and the others Store texts while it does; once it is gone,
    a query waiting behind a backlog of Store texts still goes in the next run, as with
    one worker (it went after all of them: helper-65's review)."""
    from memoryd.core.errors import NotReady

    models = [_HoldingModel(), _HoldingModel()]
    chosen = iter(models)
    embedder = BatchingEmbedder(
        lambda: next(chosen),  # type: ignore[arg-type,return-value]
        workers=2,
        doc_batch=1,
        doc_max_wait=10.0,
    )
    embedder.start()
    _fault_on_answer(embedder, "fault")
    second = models[1]
    try:
        with pytest.raises(NotReady):
            await asyncio.wait_for(embedder.embed_query("fault"), 5)  # worker 0 ends
        assert embedder.live_workers() == 1
        holding = asyncio.ensure_future(embedder.embed_document("held"))
        assert await asyncio.to_thread(second.entered.wait, 5)
        docs = [asyncio.ensure_future(embedder.embed_document(f"doc {i}")) for i in range(6)]
        query = asyncio.ensure_future(embedder.embed_query("a recall"))
        await asyncio.sleep(0.05)
        second.gate.set()
        await asyncio.wait_for(asyncio.gather(holding, query, *docs), 10)
        order = [t for run in second.runs for t in run]
        assert order[order.index("held") + 1] == "a recall", order
    finally:
        embedder.close()


def test_a_caller_whose_event_loop_closed_does_not_stop_the_worker() -> None:
    """A program embedding memoryd may call it from a loop that ends (``asyncio.run``
    returns) while its text is in the model: the answer has nowhere to go. The worker drops
    it and goes on; before, handing it to the closed loop raised in the worker's thread,
    the thread died, and every later caller's text waited for ever."""
    fake = _GatedModel()
    embedder = BatchingEmbedder(lambda: fake, workers=1)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        gone = asyncio.new_event_loop()

        async def submit_and_leave() -> None:
            task = asyncio.ensure_future(embedder.embed_query("asked from a loop that ends"))
            assert await asyncio.to_thread(fake.started.wait, 10)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        gone.run_until_complete(submit_and_leave())
        gone.close()
        fake.gate.set()  # the run ends; its answer is for the closed loop

        async def ask() -> np.ndarray:
            return await asyncio.wait_for(embedder.embed_query("asked afterwards"), 5.0)

        async def ask_again() -> np.ndarray:  # the same text: its dropped job is not shared
            return await asyncio.wait_for(embedder.embed_query("asked from a loop that ends"), 5)

        assert asyncio.run(ask()).shape == (4,)
        assert asyncio.run(ask_again()).shape == (4,)
        assert fake.runs == [
            ["asked from a loop that ends"],
            ["asked afterwards"],
            ["asked from a loop that ends"],
        ]
    finally:
        embedder.close()


def test_callers_on_two_event_loops_asking_the_same_text_are_each_answered() -> None:
    """Two threads with event loops of their own (a program calling memoryd from each)
    ask for the same text at once: each gets its answer. A future of one loop cannot be
    awaited on another, so the text is not shared across them (it was: the second caller
    failed with "attached to a different loop")."""
    fake = _GatedModel()
    embedder = BatchingEmbedder(lambda: fake, workers=1)  # type: ignore[arg-type,return-value]
    embedder.start()
    try:
        first: list[Any] = []

        async def ask() -> np.ndarray:
            return await asyncio.wait_for(embedder.embed_query("the same text"), 5)

        thread = threading.Thread(target=lambda: first.append(asyncio.run(ask())))
        thread.start()
        assert fake.started.wait(10)

        async def ask_too() -> np.ndarray:
            task = asyncio.ensure_future(ask())
            await asyncio.sleep(0.05)  # queued behind the first loop's run
            fake.gate.set()
            return await task

        assert asyncio.run(ask_too()).shape == (4,)
        thread.join(10)
        assert len(first) == 1 and first[0].shape == (4,)
        assert fake.runs == [["the same text"], ["the same text"]]
    finally:
        fake.gate.set()
        embedder.close()
