"""The hot index's hybrid candidates against a brute-force reference, and its filter
mask (cached between queries) against expiry, supersede and delete as time moves."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memoryd.core.records import Category, Memory
from memoryd.storage.hot_index import HotIndex
from memoryd.storage.lexical import K1, B, idf

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 16
WORDS = [
    *("coffee", "tea", "morning", "run", "berlin", "paris"),
    *("budget", "deadline", "piano", "garden", "cat", "dog"),
]


def mem(i: int, scope: str, text: str, **kw: object) -> Memory:
    return Memory(
        id=f"m{i:04d}",
        agent_id="a",
        scope=scope,
        text=text,
        summary="",
        category=Category.FACT,
        importance=0.5,
        created_at=NOW,
        updated_at=NOW,
        **kw,  # type: ignore[arg-type]
    )


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def visible_ids(index: HotIndex, at: datetime) -> set[str]:
    q = np.ones(DIM, np.float32) / math.sqrt(DIM)
    return {m.id for m, _ in index.search(q, ["s"], 100, now=at)}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_candidates_are_the_union_of_both_legs_best_over_the_given_scopes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    index = HotIndex(DIM)
    rows: dict[str, tuple[Memory, np.ndarray]] = {}
    for i in range(90):
        scope = ["agent:a", "shared:x", "agent:b"][i % 3]
        # distinct word counts per memory, so no two BM25 scores tie
        text = " ".join(rng.choice(WORDS, rng.integers(2, 7))) + " filler" * int(i)
        expires = NOW - timedelta(seconds=1) if i % 11 == 0 else None
        m = mem(i, scope, text, expires_at=expires, language="en")
        v = unit(rng).astype(np.float16).astype(np.float32)  # as the index keeps it
        index.put(m, v)
        rows[m.id] = (m, v)
    for i in rng.choice(90, 10, replace=False):  # swap-deletes reorder rows
        index.remove(f"m{int(i):04d}")
        del rows[f"m{int(i):04d}"]
    scopes = ["agent:a", "shared:x"]  # agent:b's rows must never show up
    in_scope = [m for m, _ in rows.values() if m.scope in scopes]
    alive = [m for m in in_scope if m.expires_at is None]
    terms = {m.id: Counter(index.analyzer.terms(m.text, m.language)) for m in in_scope}
    avgdl = sum(sum(c.values()) for c in terms.values()) / len(in_scope)
    pool = 8
    for _ in range(10):
        q = unit(rng)
        text = " ".join(rng.choice(WORDS, 3))
        cands = index.candidates(q, text, scopes, pool, now=NOW)
        # in the query's detected language and in the scopes' one (English)
        qterms = index.analyzer.query_terms(text, ["en"])[1]
        weights = {
            t: idf(df, len(in_scope)) * c
            for t, c in qterms.items()
            if (df := sum(1 for m in in_scope if terms[m.id][t]))
        }

        def bm25(m: Memory, weights: dict[str, float] = weights) -> float:
            tfs = terms[m.id]
            norm = K1 * (1 - B + B * sum(tfs.values()) / avgdl)
            return sum(w * tfs[t] * (K1 + 1) / (tfs[t] + norm) for t, w in weights.items())

        by_vec = sorted(alive, key=lambda m: -float(rows[m.id][1] @ q))[:pool]
        by_lex = sorted((m for m in alive if bm25(m) > 0), key=lambda m: -bm25(m))[:pool]
        want = {m.id for m in by_vec} | {m.id for m in by_lex}
        got = [m.id for m in cands.memories]
        assert len(got) == len(set(got))
        assert set(got) == want
        for i, m in enumerate(cands.memories):
            assert cands.vector_scores[i] == pytest.approx(float(rows[m.id][1] @ q), abs=1e-5)
            assert cands.lexical_scores[i] == pytest.approx(bm25(m), rel=1e-5, abs=1e-6)
            np.testing.assert_array_equal(cands.vectors[i], rows[m.id][1])
        vec_order = [got[i] for i in np.argsort(cands.vector_rank)]
        assert vec_order[:pool] == [m.id for m in by_vec]


def test_the_filter_follows_expiry_supersede_and_delete_between_queries() -> None:
    rng = np.random.default_rng(0)
    index = HotIndex(DIM)
    index.put(mem(1, "s", "a", expires_at=NOW + timedelta(seconds=10)), unit(rng))
    index.put(mem(2, "s", "b"), unit(rng))
    index.put(mem(3, "s", "c", expires_at=NOW + timedelta(seconds=20)), unit(rng))
    assert visible_ids(index, NOW) == {"m0001", "m0002", "m0003"}
    # m0001 expires between two queries that change nothing else
    assert visible_ids(index, NOW + timedelta(seconds=15)) == {"m0002", "m0003"}
    # a query as of an earlier time sees what was alive then
    assert visible_ids(index, NOW + timedelta(seconds=5)) == {"m0001", "m0002", "m0003"}
    assert visible_ids(index, NOW + timedelta(seconds=25)) == {"m0002"}
    assert visible_ids(index, NOW + timedelta(seconds=9.5)) == {"m0001", "m0002", "m0003"}
    # a newer memory superseding m0002 hides it at once
    index.put(mem(4, "s", "d", supersedes="m0002"), unit(rng))
    assert visible_ids(index, NOW + timedelta(seconds=9.5)) == {"m0001", "m0003", "m0004"}
    # deleting the newer one shows m0002 again; deleting m0003 drops it
    index.remove("m0004")
    index.remove("m0003")
    assert visible_ids(index, NOW + timedelta(seconds=9.5)) == {"m0001", "m0002"}
    # an update that gives m0002 an expiry takes effect
    index.put(mem(2, "s", "b", expires_at=NOW + timedelta(seconds=9.6)), unit(rng))
    assert visible_ids(index, NOW + timedelta(seconds=9.7)) == {"m0001"}


def test_counts_and_memory_use_follow_every_write() -> None:
    """Stats' counts (by scope, by category) equal what listing the visible memories
    gives, index_bytes equals a recount, and every memory's token vectors read back as
    last written, after inserts, updates and deletes."""
    rng = np.random.default_rng(5)
    index = HotIndex(DIM)
    cats = list(Category)
    written: dict[str, np.ndarray | None] = {}
    for i in range(60):
        scope = ["agent:a", "shared:x", "agent:b"][i % 3]
        expires = NOW + timedelta(seconds=int(rng.integers(-5, 5))) if i % 4 == 0 else None
        m = mem(i, scope, f"text {i}", expires_at=expires)
        m = dataclasses.replace(m, category=cats[int(rng.integers(0, len(cats)))])
        tokens = rng.integers(-127, 128, (int(rng.integers(1, 9)), DIM)).astype(np.int8)
        written[m.id] = tokens if i % 5 else None
        index.put(m, unit(rng), written[m.id])
    for i in range(0, 60, 7):
        index.remove(f"m{i:04d}")
        del written[f"m{i:04d}"]
    for i in range(1, 60, 9):  # updates: new tokens, none, or other ones
        old = index.get(f"m{i:04d}")
        if old is not None:
            tokens = None if i % 2 else np.zeros((3, DIM), np.int8)
            written[old.id] = tokens
            index.put(old, unit(rng), tokens)
    for scopes in (["agent:a"], ["agent:a", "shared:x"], ["agent:b", "nobody"]):
        for at in (NOW - timedelta(seconds=10), NOW, NOW + timedelta(seconds=10)):
            listed = index.visible(scopes, now=at)
            by_scope, by_category = index.count_visible(scopes, now=at)
            assert by_scope == dict(Counter(m.scope for m in listed))
            assert by_category == dict(Counter(m.category for m in listed))
    for memory_id, want in written.items():
        got = index.tokens_of(memory_id)
        assert (got is None) == (want is None), memory_id
        if want is not None:
            np.testing.assert_array_equal(got, want)
    parts = sum(p.nbytes() for p in index._parts.values())
    every = index.visible(["agent:a", "shared:x", "agent:b"], now=NOW - timedelta(days=1))
    text = sum(len(m.text) + len(m.summary) for m in every)
    # token vectors are in the token file: not counted as held
    assert index.index_bytes() == parts + text + 400 * len(index)


def test_row_arrays_left_unused_by_a_burst_are_given_back_once_it_pauses() -> None:
    """The row arrays grow by a quarter, so a burst of Stores leaves up to a fifth of
    them unused; once no row has come for a whole interval they shrink (index_bytes drops
    by that room), reads answer exactly as before, and writes after it still land."""
    rng = np.random.default_rng(7)
    index = HotIndex(DIM)
    q = unit(rng)
    index.put(mem(90_000, "small", "a few rows elsewhere"), unit(rng))
    i = 0
    while True:  # stop right after a growth, with rows enough for the trim to pay
        before = index.index_bytes()
        index.put(mem(i, "s", f"memory {i} {WORDS[i % len(WORDS)]}"), unit(rng),
                  np.full((2, DIM), i % 100, np.int8))  # fmt: skip
        i += 1
        if i > 10_000 and index.index_bytes() - before > 1000 * 70:
            break
    hits = [(m.id, round(s, 5)) for m, s in index.search(q, ["s", "small"], 20, now=NOW)]
    assert index.trim_idle_rows() == 0  # rows came since the last look: a burst goes on
    grown = index.index_bytes()
    freed = index.trim_idle_rows()  # nothing new since: trimmed
    assert freed > 2000, freed
    assert index.index_bytes() < grown - freed * 70
    assert index.trim_idle_rows() == 0  # nothing more to give back
    assert [(m.id, round(s, 5)) for m, s in index.search(q, ["s", "small"], 20, now=NOW)] == hits
    last = f"m{i - 1:04d}"
    np.testing.assert_array_equal(index.tokens_of(last), np.full((2, DIM), (i - 1) % 100))
    for j in range(i, i + 500):  # the trim left room; past it the arrays grow again
        index.put(mem(j, "s", f"memory {j}"), unit(rng))
    assert len(index.visible(["s"], now=NOW)) == i + 500
    assert index.get(f"m{i + 499:04d}") is not None
