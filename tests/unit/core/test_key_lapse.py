"""A lapsed idempotency key (store.idempotency_days) with several daemons: the Store is
judged afresh on every daemon, whatever the key's claim (storage/claims.py) still says."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lancedb
import pytest

from memoryd.core.policy import AccessPolicy
from memoryd.core.records import StoreOutcome
from memoryd.core.service import MemoryService, NewMemory, ServiceLimits
from memoryd.storage.claims import KeyClaims
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

from ..conftest import DIM, Clock, WordHashEmbedder

WINDOW = timedelta(days=7)


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Repository]:
    path = str(tmp_path / "db")
    store = LanceStore(path, table="m", model_name="word-hash-test", dim=DIM, key_window=WINDOW)
    claims = KeyClaims(path, "m", lapse=WINDOW)
    repo = Repository(store, key_window=WINDOW, claims=claims)
    repo.open()
    yield repo
    repo.close()


def service_over(repo: Repository, clock: Clock) -> MemoryService:
    return MemoryService(
        repo, WordHashEmbedder(), AccessPolicy(agents={}), ServiceLimits(max_chars=200), clock
    )


async def test_a_lapsed_key_reused_for_other_text_stores_it_despite_its_claim(
    repository: Repository, tmp_path: Path
) -> None:
    """The key's claim still named the memory the DUPLICATE answer named (claims go only
    at a compaction, every COMPACT_EVERY claims): the Store deleted the memory it had just
    created and answered DUPLICATE of that unrelated memory."""
    clock = Clock()
    clock.now = datetime.now(UTC) - WINDOW - timedelta(days=1)
    service = service_over(repository, clock)
    text, other = "the staging cluster runs in eu-west-1", "lunch is at noon on fridays"
    first = await service.store_memory(NewMemory(agent_id="a", text=text))
    dup = await service.store_memory(NewMemory(agent_id="a", text=text, idempotency_key="k"))
    assert dup.outcome == StoreOutcome.DUPLICATE and dup.memory.id == first.memory.id
    # its claim was made then too (KeyClaims stamps it with the time of day)
    claims = lancedb.connect(str(tmp_path / "db")).open_table("m_claims")
    claims.update(values={"at": clock.now})
    clock.now = datetime.now(UTC)  # the key's record lapsed: the Store is judged afresh
    taken = await service.store_memory(NewMemory(agent_id="a", text=other, idempotency_key="k"))
    assert taken.outcome == StoreOutcome.CREATED, taken
    assert taken.memory.text == other
    assert sorted(m.text for m in service.export("a")) == sorted([text, other])
    again = await service.store_memory(NewMemory(agent_id="a", text=other, idempotency_key="k"))
    assert again.memory.id == taken.memory.id and again.outcome == StoreOutcome.CREATED
