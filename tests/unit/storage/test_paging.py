"""List pages by keyset inside the hot index: each page starts after the previous page's
last (created_at, id), so pages stay right while others insert and delete between them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memoryd.core.records import Category, Memory
from memoryd.storage.hot_index import HotIndex

from ..conftest import record

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 8
SCOPES = ["agent:a", "shared:team"]  # what the caller reads
OTHER = "agent:b"  # never listed for the caller


def mem(i: int, scope: str, created: datetime, **kw: object) -> Memory:
    fields: dict[str, object] = dict(
        agent_id=scope.split(":")[1],
        text=f"note {i}",
        created_at=created,
        updated_at=created,
        language="en",
    )
    return record(i, scope=scope, **(fields | kw))


def vec(rng: random.Random) -> np.ndarray:
    v = np.array([rng.random() for _ in range(DIM)], dtype=np.float32)
    return v / np.linalg.norm(v)


class World:
    """A hot index and random memories: few distinct creation times (so ties are broken
    by id), some expired, every category, three scopes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.index = HotIndex(DIM)
        self.next = 0
        self.ids: list[str] = []

    def add(self) -> Memory:
        rng = self.rng
        self.next += 1
        expires = NOW - timedelta(hours=1) if rng.random() < 0.1 else None
        m = mem(
            self.next,
            rng.choice([*SCOPES, OTHER]),
            NOW + timedelta(seconds=rng.randrange(200)),
            category=rng.choice(list(Category)[1:]),
            expires_at=expires,
        )
        self.index.put(m, vec(rng))
        self.ids.append(m.id)
        return m

    def delete(self) -> str | None:
        if not self.ids:
            return None
        at = self.rng.randrange(len(self.ids))
        self.ids[at], self.ids[-1] = self.ids[-1], self.ids[at]
        victim = self.ids.pop()
        self.index.remove(victim)
        return victim


def expected(index: HotIndex, categories: frozenset[Category], oldest_first: bool) -> list[Memory]:
    """The reference: every visible memory sorted, as List answered before paging moved
    into the index."""
    rows = index.visible(SCOPES, now=NOW, categories=categories)
    return rows[::-1] if oldest_first else rows


def walk(
    index: HotIndex,
    size: int,
    categories: frozenset[Category],
    oldest_first: bool,
    between: object = None,
) -> tuple[list[Memory], list[int]]:
    """Every page in turn (calling ``between()`` after each); the rows and the totals."""
    rows: list[Memory] = []
    totals: list[int] = []
    after: tuple[datetime, str] | None = None
    while True:
        page = index.page(
            SCOPES,
            now=NOW,
            limit=size,
            after=after,
            oldest_first=oldest_first,
            categories=categories,
        )
        assert len(page.memories) <= size
        rows.extend(page.memories)
        totals.append(page.total)
        if not page.more:
            return rows, totals
        assert len(page.memories) == size
        last = page.memories[-1]
        after = (last.created_at, last.id)
        if callable(between):
            between()


FILTERS = [frozenset(), frozenset({Category.FACT}), frozenset({Category.DECISION, Category.OTHER})]


@pytest.mark.parametrize("oldest_first", [False, True])
@pytest.mark.parametrize("categories", FILTERS)
def test_pages_of_a_quiet_store_are_the_sorted_listing(
    categories: frozenset[Category], oldest_first: bool
) -> None:
    world = World(1)
    for _ in range(400):
        world.add()
    for _ in range(40):
        world.delete()
    want = expected(world.index, categories, oldest_first)
    for size in (1, 7, 50, 1000):
        got, totals = walk(world.index, size, categories, oldest_first)
        assert [m.id for m in got] == [m.id for m in want]
        assert set(totals) == {len(want)}
        assert all(m.scope in SCOPES for m in got)


@pytest.mark.parametrize("oldest_first", [False, True])
@pytest.mark.parametrize("categories", FILTERS)
def test_inserts_and_deletes_between_pages_never_skip_or_repeat_a_surviving_row(
    categories: frozenset[Category], oldest_first: bool
) -> None:
    world = World(2)
    for _ in range(300):
        world.add()
    at_start = {m.id for m in expected(world.index, categories, oldest_first)}
    deleted: set[str] = set()

    def churn() -> None:
        for _ in range(world.rng.randrange(6)):
            world.add()
        for _ in range(world.rng.randrange(4)):
            if (victim := world.delete()) is not None:
                deleted.add(victim)

    got, _ = walk(world.index, 9, categories, oldest_first, churn)
    ids = [m.id for m in got]
    assert len(ids) == len(set(ids)), "a row came twice"
    survivors = at_start - deleted
    assert survivors <= set(ids), f"skipped {len(survivors - set(ids))} surviving rows"
    keys = [(m.created_at, m.id) for m in got]
    assert keys == sorted(keys, reverse=not oldest_first)  # one order across all pages
    assert all(m.scope in SCOPES for m in got)
    assert not categories or all(m.category in categories for m in got)


def test_a_changed_creation_time_moves_the_row_and_a_row_back_after_delete_is_listed_once() -> None:
    index = HotIndex(DIM)
    rng = random.Random(3)
    rows = [mem(i, "agent:a", NOW + timedelta(seconds=i)) for i in range(5)]
    for m in rows:
        index.put(m, vec(rng))
    index.put(mem(0, "agent:a", NOW + timedelta(seconds=10)), vec(rng))  # now the newest
    index.remove(rows[2].id)
    index.put(rows[2], vec(rng))  # back with its id and time (an import keeps both)
    page = index.page(["agent:a"], now=NOW, limit=10)
    assert [m.id for m in page.memories] == [rows[i].id for i in (0, 4, 3, 2, 1)]
    assert page.total == 5 and not page.more


def test_ten_thousand_memories_page_exactly_like_a_full_sort() -> None:
    world = World(4)
    for _ in range(10_000):
        world.add()
    for _ in range(500):
        world.delete()
    for categories in (frozenset(), frozenset({Category.PREFERENCE})):
        want = [m.id for m in expected(world.index, categories, False)]
        got, totals = walk(world.index, 250, categories, False)
        assert [m.id for m in got] == want and set(totals) == {len(want)}
        assert len(want) > 1000 or categories


def test_bulk_loading_orders_rows_like_one_put_at_a_time() -> None:
    rng = random.Random(5)
    rows = [mem(i, "agent:a", NOW + timedelta(seconds=rng.randrange(50))) for i in range(300)]
    one = HotIndex(DIM)
    bulk = HotIndex(DIM)
    for m in rows:
        one.put(m, vec(rng))
    with bulk.bulk_load():
        for m in rows:
            bulk.put(m, vec(rng))
    for index in (one, bulk):
        got = index.page(["agent:a"], now=NOW, limit=1000, oldest_first=True).memories
        assert [m.id for m in got] == [
            m.id for m in sorted(rows, key=lambda m: (m.created_at, m.id))
        ]
