"""The hot index stays coherent with LanceDB: after any mix of concurrent stores, updates,
deletes and expiry sweeps, what a restart rebuilds from disk equals what was served."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from pathlib import Path

import numpy as np

from memoryd.core.policy import AccessPolicy
from memoryd.core.records import Memory
from memoryd.core.service import MemoryPatch, MemoryService, NewMemory
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

WORDS = [
    "amber",
    "basil",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "jasper",
    "kelp",
    "lumen",
    "moss",
]


def state(repo: Repository) -> dict[str, tuple[object, ...]]:
    out = {}
    for m in repo.visible(repo.scopes(), now=_far_past()):
        v = repo.vector_of(m.id)
        assert v is not None
        out[m.id] = (m.text, m.scope, m.importance, m.metadata, m.expires_at, tuple(np.round(v, 5)))
    return out


def _far_past():  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    return datetime(2000, 1, 1, tzinfo=UTC)


async def test_concurrent_writers_then_restart_rebuild_the_same_index(
    tmp_path: Path,
    embedder,
    clock,  # type: ignore[no-untyped-def]
) -> None:
    def open_repo() -> Repository:
        repo = Repository(
            LanceStore(
                str(tmp_path),
                table="m",
                model_name=embedder.model_name,
                dim=embedder.dim,
                compact_every=7,
            )
        )
        repo.open()
        return repo

    repo = open_repo()
    svc = MemoryService(repo, embedder, AccessPolicy(), clock=clock)
    rng = random.Random(7)
    ids: list[str] = []

    async def writer(agent: str, n: int) -> None:
        for i in range(n):
            op = rng.random()
            if op < 0.6 or not ids:
                text = " ".join(rng.sample(WORDS, 5)) + f" {agent} {i}"
                ttl = {"expires_at": clock.now + timedelta(minutes=5)} if rng.random() < 0.2 else {}
                r = await svc.store_memory(NewMemory(agent_id=agent, text=text, **ttl))  # type: ignore[arg-type]
                ids.append(r.memory.id)
            else:
                target = rng.choice(ids)
                m: Memory | None = repo.get(target)
                if m is None or m.agent_id != agent:
                    continue
                if op < 0.8:
                    await svc.update(
                        MemoryPatch(
                            agent_id=agent,
                            id=target,
                            text=m.text + " edited",
                            metadata={"n": str(i)},
                        )
                    )
                else:
                    await svc.forget_id(agent, target)

    await asyncio.gather(*(writer(f"w{k}", 40) for k in range(6)))
    clock.advance(minutes=10)
    swept = await svc.sweep_expired()
    served = state(repo)
    assert swept > 0 and len(served) > 50
    repo.close()
    reopened = open_repo()
    assert state(reopened) == served
    # Search agrees too: every memory is its own best match after the restart.
    for memory_id, (text, scope, *_rest) in list(served.items())[:20]:
        top = reopened.search(embedder.vector(text), [scope], 1, now=clock.now)
        assert top and top[0][0].id == memory_id
    reopened.close()
