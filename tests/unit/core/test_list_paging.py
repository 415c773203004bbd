"""List through the service: a page token stays good while memories come and go."""

from __future__ import annotations

from memoryd.core.service import MemoryService, NewMemory


async def store(service: MemoryService, agent: str, text: str):  # type: ignore[no-untyped-def]
    return await service.store_memory(NewMemory(agent_id=agent, text=text))


async def test_a_page_token_stays_good_while_memories_come_and_go(  # type: ignore[no-untyped-def]
    service: MemoryService, clock
) -> None:
    """Stores and deletes between pages: the next page starts right after the last row
    shown, so no memory that exists throughout is shown twice or skipped, and a memory
    stored meanwhile (newer than every page) does not shift the pages."""
    ids = []
    for i in range(9):
        clock.advance(seconds=1)
        ids.append((await store(service, "a", f"note {i} about topic{i}")).memory.id)
    newest_first = list(reversed(ids))
    first = service.list("a", page_size=3)
    assert [m.id for m in first.memories] == newest_first[:3]
    clock.advance(seconds=1)
    await store(service, "a", "a brand new note about something else")
    await service.forget_id("a", newest_first[3])  # the next page's first row
    await service.forget_id("a", newest_first[0])  # a row already shown
    second = service.list("a", page_size=3, page_token=first.next_page_token)
    assert [m.id for m in second.memories] == newest_first[4:7]
    assert second.total_size == 8  # 9 + 1 - 2
    third = service.list("a", page_size=3, page_token=second.next_page_token)
    assert [m.id for m in third.memories] == newest_first[7:] and not third.next_page_token
    oldest = service.list("a", page_size=4, oldest_first=True)
    assert [m.id for m in oldest.memories] == ids[:4]
