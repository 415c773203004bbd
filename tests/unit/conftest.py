"""Unit-test fixtures: a real LanceDB store in a temp dir, and a deterministic embedder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from memoryd_testing.records import record as record  # unit tests import it from here

from memoryd.core.policy import AccessPolicy
from memoryd.core.records import Category, StoreResult
from memoryd.core.service import MemoryService, NewMemory, ServiceLimits
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

DIM = 1024


class WordHashEmbedder:
    """Bag of words hashed into DIM buckets, L2-normalised: texts sharing words are close,
    texts sharing none are orthogonal. Counts calls so tests can see the model ran."""

    model_name = "word-hash-test"
    dim = DIM

    def __init__(self) -> None:
        self.calls = 0

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    async def embed_query(self, text: str) -> np.ndarray:
        self.calls += 1
        return self.vector(text)

    async def embed_document(self, text: str) -> np.ndarray:
        self.calls += 1
        return self.vector(text)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


@pytest.fixture
def embedder() -> WordHashEmbedder:
    return WordHashEmbedder()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_repository(tmp_path: Path) -> Callable[[], Repository]:
    """Opens (or re-opens, as after a restart) the store in this test's temp dir."""
    opened: list[Repository] = []

    def _open() -> Repository:
        store = LanceStore(
            str(tmp_path / "db"), table="memories", model_name="word-hash-test", dim=DIM
        )
        repo = Repository(store)
        repo.open()
        opened.append(repo)
        return repo

    yield _open  # type: ignore[misc]
    for repo in opened:
        repo.close()


@pytest.fixture
async def service(
    open_repository: Callable[[], Repository], embedder: WordHashEmbedder, clock: Clock
) -> AsyncIterator[MemoryService]:
    policy = AccessPolicy(
        agents={},
    )
    yield MemoryService(open_repository(), embedder, policy, ServiceLimits(max_chars=200), clock)


async def prefer(service: MemoryService, drink: str) -> StoreResult:
    """Agent a stores "I prefer <drink> in the morning": two such preferences (tea, then
    coffee) are the pair the merge policies act on."""
    text = f"I prefer {drink} in the morning"
    return await service.store_memory(
        NewMemory(agent_id="a", text=text, category=Category.PREFERENCE)
    )
