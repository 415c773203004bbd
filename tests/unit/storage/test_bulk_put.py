"""The load at start puts a batch of rows a scope at a time (``HotIndex.put_loaded``): the
index it makes is the one putting each row in turn makes, whatever the rows hold (links,
supersessions, a row read twice, texts without a language, expiries, idempotency keys)."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from memoryd.core.records import Category, Memory
from memoryd.storage.hot_index import HotIndex

from ..conftest import record

DIM = 8
NOW = record(0).created_at


def rows(seed: int) -> list[tuple[Memory, np.ndarray]]:
    rng = random.Random(seed)
    out: list[tuple[Memory, np.ndarray]] = []
    for i in range(400):
        scope = f"agent:{rng.choice('abcde')}"
        kw: dict[str, object] = dict(
            scope=scope,
            agent_id=scope[-1],
            text=rng.choice(["bees make honey", "Die Katze schläft", "猫が寝ている", "tea"]),
            language=rng.choice(["en", "en", "de", "ja", ""]),  # "": detected on load
            created_at=NOW + timedelta(seconds=rng.randrange(1000)),
            category=rng.choice(list(Category)[1:]),
            content_hash=f"h{rng.randrange(300)}",  # shared hashes: the later row wins
        )
        if rng.random() < 0.2:
            kw["expires_at"] = NOW + timedelta(days=rng.randrange(1, 9))
        if rng.random() < 0.1:
            kw["idempotency_key"] = f"k{i}"
        earlier = [m for m, _ in out if m.scope == scope]
        if earlier and rng.random() < 0.15:
            kw["related_ids"] = [rng.choice(earlier).id, record(9999).id]  # one not stored
        if earlier and rng.random() < 0.1:
            kw["supersedes"] = rng.choice(earlier).id
        memory = record(i, **kw)
        if out and rng.random() < 0.05:  # an id read again (same scope), another text
            first = out[rng.randrange(len(out))][0]
            kw.update(scope=first.scope, agent_id=first.agent_id, text="again")
            kw.pop("related_ids", None)
            kw.pop("supersedes", None)
            memory = record(int(first.id[-12:]), **kw)
        vector = np.asarray([rng.gauss(0, 1) for _ in range(DIM)], dtype=np.float32)
        out.append((memory, vector / np.linalg.norm(vector)))
    rng.shuffle(out)  # links to rows read later, too
    return out


def state(index: HotIndex) -> dict[str, object]:
    out: dict[str, object] = {
        "memories": dict(sorted(index._memories.items())),
        "idempotency": index._idempotency,
        "text_bytes": index._text_bytes,
        "links": (index._forward, index._backlinks, index._supersedes, index._superseded_by),
    }
    for scope, part in sorted(index._parts.items()):  # rows by id: their order is free
        n = len(part)
        assert sorted(part.row_of.items(), key=lambda item: item[1]) == [
            (memory_id, row) for row, memory_id in enumerate(part.ids)
        ]
        columns = (
            part.vectors,
            part.codes,
            part.expires,
            part.category,
            part.created,
            part.hidden,
            part.tok_n,
        )
        out[scope] = (
            {
                memory_id: (
                    [c[row].tolist() for c in columns],
                    part.lexical.row_terms(row),
                    part.lexical.doc_language[row],
                    float(part.lexical.lengths()[row]),
                )
                for row, memory_id in enumerate(part.ids)
            },
            n,
            part.by_hash,
            part.record_bytes,
            part.order.keys,
            part.lexical.total_len,
            dict(part.lexical.language_counts),
        )
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("defer", [False, True], ids=["analysed", "deferred"])
def test_a_batch_put_by_scope_makes_the_index_one_put_at_a_time_makes(
    seed: int, defer: bool
) -> None:
    loaded = rows(seed)
    one_by_one = HotIndex(DIM)
    with one_by_one.bulk_load():
        for memory, vector in loaded:
            one_by_one.put(memory, vector, None)
    batched = HotIndex(DIM)
    with batched.bulk_load(defer_texts=defer):
        for at in range(0, len(loaded), 64):
            batched.put_loaded(loaded[at : at + 64])
    assert state(batched) == state(one_by_one)
    hidden = sum(int(p.hidden[: len(p)].sum()) for p in batched._parts.values())
    assert hidden > 0  # the supersessions took effect


def test_the_same_idempotency_key_in_two_scopes_maps_as_put_one_at_a_time_maps() -> None:
    """put_loaded puts each scope's waiting rows at the batch's end, in the order the scopes
    first came: a key an agent used in two scopes (its own and a shared one; an import, a
    race of two daemons) ends mapped to another memory than putting the rows in turn."""
    loaded: list[tuple[Memory, np.ndarray]] = []
    vector = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    for i in range(16):
        scope = "team:x" if i in (0, 15) else "agent:a"
        kw: dict[str, object] = dict(scope=scope, agent_id="a", text=f"note {i}", language="en")
        if i in (1, 15):
            kw["idempotency_key"] = "k"
        loaded.append((record(i, **kw), vector))
    one_by_one = HotIndex(DIM)
    with one_by_one.bulk_load():
        for memory, v in loaded:
            one_by_one.put(memory, v, None)
    batched = HotIndex(DIM)
    with batched.bulk_load():
        batched.put_loaded(loaded)
    assert batched._idempotency == one_by_one._idempotency
