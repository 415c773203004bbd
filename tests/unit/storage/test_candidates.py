"""The hot index's hybrid candidates against a brute-force reference, and its filter
mask (cached between queries) against expiry, supersede and delete as time moves."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memoryd.core.records import Candidates, Category, Memory
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


def _same(a: Candidates, b: Candidates) -> None:
    assert [m.id for m in a.memories] == [m.id for m in b.memories]
    np.testing.assert_array_equal(a.vector_scores, b.vector_scores)
    np.testing.assert_array_equal(a.lexical_scores, b.lexical_scores)
    np.testing.assert_array_equal(a.lexical_rank, b.lexical_rank)


CHANGES = {
    "nothing": lambda index, rng: None,
    "a row added": lambda index, rng: index.put(
        mem(500, "agent:a", "coffee tea coffee"), unit(rng)
    ),
    "a row deleted (the last moves into its place)": lambda index, rng: index.remove("m0000"),
    "a row superseded": lambda index, rng: index.put(
        mem(501, "agent:a", "tea morning", supersedes="m0003"), unit(rng)
    ),
    "a row's text updated": lambda index, rng: index.put(
        mem(6, "agent:a", "coffee coffee paris"), unit(rng)
    ),
    "a searched scope's first row": lambda index, rng: index.put(
        mem(502, "shared:new", "coffee"), unit(rng)
    ),
    "row arrays trimmed": lambda index, rng: index._parts["agent:a"].trim(room=1),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_lexical_leg_worked_out_ahead_gives_what_a_fresh_one_gives_after_any_change(
    change: str,
) -> None:
    """A Recall works out its lexical leg while its query is embedded and hands it to
    ``candidates``; whatever was written meanwhile, the candidates are those of a leg
    worked out afresh (the changed one is worked out again), never rows that moved."""
    rng = np.random.default_rng(11)
    index = HotIndex(DIM)
    for i in range(40):
        index.put(mem(i, ["agent:a", "agent:b"][i % 2], " ".join(rng.choice(WORDS, 4))), unit(rng))
    q, text, scopes = unit(rng), "coffee tea morning", ["agent:a", "shared:new"]
    leg = index.lexical_leg(text, scopes, 6, now=NOW)
    CHANGES[change](index, rng)
    _same(index.candidates(q, text, scopes, 6, now=NOW, prepared=leg),
          index.candidates(q, text, scopes, 6, now=NOW))  # fmt: skip


def test_a_lexical_leg_is_used_only_for_the_arguments_it_was_worked_out_for() -> None:
    """Another agent's scopes, time, categories, pool or text: worked out afresh, so a leg
    never carries one caller's rows into another's candidates."""
    rng = np.random.default_rng(12)
    index = HotIndex(DIM)
    for i in range(40):
        index.put(mem(i, ["agent:a", "agent:b"][i % 2], " ".join(rng.choice(WORDS, 4))), unit(rng))
    q, text = unit(rng), "coffee tea morning"
    leg = index.lexical_leg(text, ["agent:a"], 6, now=NOW)
    for kwargs in (
        {"scopes": ["agent:b"]},
        {"text": "piano garden"},
        {"pool": 3},
        {"now": NOW + timedelta(days=1)},
        {"categories": frozenset({Category.PREFERENCE})},
        {"created_after": NOW - timedelta(days=1)},
    ):
        args = {"text": text, "scopes": ["agent:a"], "pool": 6, "now": NOW, **kwargs}
        call = dict(args)
        t, s, p = call.pop("text"), call.pop("scopes"), call.pop("pool")
        got = index.candidates(q, t, s, p, prepared=leg, **call)  # type: ignore[arg-type]
        want = index.candidates(q, t, s, p, **call)  # type: ignore[arg-type]
        _same(got, want)
        if kwargs.get("scopes"):
            assert {m.scope for m in got.memories} == {"agent:b"}
