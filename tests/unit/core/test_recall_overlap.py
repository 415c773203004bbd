"""A Recall whose query embedding misses the cache works out its lexical leg while the model
runs: whatever is stored, forgotten or superseded in the meantime is what it answers with."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest

from memoryd.core.policy import AccessPolicy
from memoryd.core.records import Memory
from memoryd.core.retrieval import RetrievalConfig, Retriever
from memoryd.core.service import MemoryService, NewMemory, RecallQuery, ServiceLimits
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.storage.repository import Repository
from tests.unit.conftest import DIM, WordHashEmbedder

QUERY = "where are the coffee beans from"


class HeldModel:
    """Word-hash vectors (as the unit tests' embedder); a run holding ``QUERY`` waits for
    ``release`` after telling the batcher it started."""

    name, dim = "word-hash-test", DIM

    def __init__(self) -> None:
        self.words = WordHashEmbedder()
        self.running = threading.Event()
        self.release = threading.Event()

    def embed_full(
        self,
        texts: list[str],
        *,
        tokens: bool = True,
        started: Callable[[], None] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        if started is not None:
            started()
        if QUERY in texts:
            self.running.set()
            assert self.release.wait(10)
        vectors = np.stack([self.words.vector(t) for t in texts])
        return vectors, [v[None, :] for v in vectors] if tokens else []


class Spy:
    """Records, for each lexical leg worked out, whether the model was running then."""

    def __init__(self, repo: Repository, model: HeldModel) -> None:
        self.during_model: list[bool] = []
        real = repo.lexical_leg

        def lexical_leg(*args: Any, **kwargs: Any) -> object:
            self.during_model.append(model.running.is_set() and not model.release.is_set())
            return real(*args, **kwargs)

        repo.lexical_leg = lexical_leg  # type: ignore[method-assign]


@pytest.fixture
async def held(
    open_repository: Callable[[], Repository], clock: Any
) -> AsyncIterator[tuple[MemoryService, HeldModel, Spy]]:
    model = HeldModel()
    # Two workers: Store texts run on the second while the first holds the query.
    embedder = BatchingEmbedder(lambda: model, workers=2)  # type: ignore[arg-type,return-value]
    embedder.start()
    repo = open_repository()
    spy = Spy(repo, model)
    retriever = Retriever(repo, RetrievalConfig())
    service = MemoryService(
        repo, embedder, AccessPolicy(agents={}), ServiceLimits(max_chars=200), clock, retriever
    )
    try:
        yield service, model, spy
    finally:
        model.release.set()
        embedder.close()


async def store(service: MemoryService, text: str) -> Memory:
    return (await service.store_memory(NewMemory(agent_id="a", text=text))).memory


async def recall_while_held(service: MemoryService, model: HeldModel) -> asyncio.Task[Any]:
    task = asyncio.create_task(service.recall(RecallQuery(agent_id="a", query=QUERY, limit=10)))
    for _ in range(1000):
        if model.running.is_set():
            break
        await asyncio.sleep(0.005)
    assert model.running.is_set()
    await asyncio.sleep(0.01)  # the Recall has done what it can without its vector
    return task


async def test_the_lexical_leg_is_worked_out_while_the_model_runs(held) -> None:  # type: ignore[no-untyped-def]
    service, model, spy = held
    beans = await store(service, "The coffee beans are from Ethiopia")
    await store(service, "The grinder sits next to the kettle")
    task = await recall_while_held(service, model)
    assert spy.during_model == [True]  # done beside the model, not after it
    model.release.set()
    hits = await task
    assert hits[0].memory.id == beans.id
    assert spy.during_model == [True]  # and used as it was: nothing changed


async def test_a_memory_forgotten_meanwhile_is_not_recalled_and_rows_moved_are_right(held) -> None:  # type: ignore[no-untyped-def]
    service, model, spy = held
    first = await store(service, "The coffee beans are from Ethiopia")
    await store(service, "Coffee tastes best fresh")
    last = await store(service, "The coffee beans came by ship from Kenya")
    task = await recall_while_held(service, model)
    # Deleting the first row moves the last into its place: a leg worked out before it
    # would score the wrong memory, or a row no longer there.
    await service.forget_id("a", first.id)
    model.release.set()
    hits = await task
    ids = [h.memory.id for h in hits]
    assert first.id not in ids and ids[0] == last.id
    assert len(spy.during_model) == 2  # worked out again after the change
    again = await service.recall(RecallQuery(agent_id="a", query=QUERY, limit=10))
    assert [(h.memory.id, h.score) for h in again] == [(h.memory.id, h.score) for h in hits]


async def test_a_memory_stored_meanwhile_is_recalled(held) -> None:  # type: ignore[no-untyped-def]
    service, model, _ = held
    await store(service, "The grinder sits next to the kettle")
    task = await recall_while_held(service, model)
    beans = await store(service, "The coffee beans are from Ethiopia")  # on worker 1
    model.release.set()
    hits = await task
    assert hits[0].memory.id == beans.id
