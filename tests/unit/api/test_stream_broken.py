"""A Stream whose request stream breaks (its key revoked after a keys reload: auth.py)
still answers the ops it took before, then ends with the error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb

from memoryd.api.servicer import MemoryServicer
from memoryd.core.errors import Unauthenticated
from memoryd.core.records import Category, Memory, StoreOutcome, StoreResult

NOW = datetime(2026, 12, 1, tzinfo=UTC)


class SlowStores:
    """Stands in for MemoryService: each Store waits for ``release``."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def store_memory(self, new: Any) -> StoreResult:
        self.started.set()
        await self.release.wait()
        memory = Memory("m-1", new.agent_id, f"agent:{new.agent_id}", new.text, new.text,
                        Category.FACT, 0.5, NOW, NOW)  # fmt: skip
        return StoreResult(memory, StoreOutcome.CREATED)


async def test_the_ops_taken_before_a_broken_request_stream_are_answered_then_it_ends() -> None:
    service = SlowStores()
    servicer = MemoryServicer()
    servicer.set_service(service)  # type: ignore[arg-type]

    async def requests() -> AsyncIterator[pb.StreamRequest]:
        yield pb.StreamRequest(request_id="1", store=pb.StoreRequest(agent_id="a", text="kept"))
        await service.started.wait()  # op 1 is running when the stream breaks
        asyncio.get_running_loop().call_later(0.05, service.release.set)
        raise Unauthenticated("the credential was revoked")

    answered: list[pb.StreamResponse] = []
    with pytest.raises(Unauthenticated):
        async for response in servicer.Stream(requests(), None):
            answered.append(response)
    assert [(r.request_id, r.store.memory.id) for r in answered] == [("1", "m-1")]
