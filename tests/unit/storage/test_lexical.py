"""BM25 over a lexical partition stays exact while rows are added, replaced and removed
(the per-term posting arrays it caches between queries must never go stale)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memoryd.storage.lexical import LexicalPartition, bm25_touched, idf
from memoryd.storage.term_map import Gathering, gather

WORDS = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "zeta"]


def fresh(docs: list[list[str]]) -> LexicalPartition:
    part = LexicalPartition()
    for row, terms in enumerate(docs):
        part.set(row, terms)
    return part


def weights(part: LexicalPartition, terms: list[str]) -> dict[str, float]:
    n = len(part)
    return {t: idf(part.df(t), n) for t in set(terms) if part.df(t)}


@pytest.mark.parametrize("seed", range(5))
def test_scores_match_a_partition_built_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    docs: list[list[str]] = []
    part = LexicalPartition()
    for _ in range(300):
        op = rng.random()
        if op < 0.5 or not docs:
            terms = rng.choices(WORDS, k=rng.randint(1, 6))
            part.set(len(docs), terms)
            docs.append(terms)
        elif op < 0.75:
            row = rng.randrange(len(docs))
            terms = rng.choices(WORDS, k=rng.randint(1, 6))
            part.set(row, terms)
            docs[row] = terms
        else:
            row = rng.randrange(len(docs))
            part.move_last_into(row)
            docs[row] = docs[-1]
            docs.pop()
        for word in WORDS:  # each posting holds exactly the rows with the word, and its tf
            want_posting = {r: d.count(word) for r, d in enumerate(docs) if word in d}
            assert part.posting(word) == want_posting
            assert list(part.posting(word)) == sorted(want_posting)  # kept in row order
            assert part.df(word) == len(want_posting)
        if docs and rng.random() < 0.5:  # query often, so cached arrays get reused
            query = rng.choices(WORDS, k=2)
            avgdl = part.total_len / len(part)
            got_rows, got = bm25_touched(part, weights(part, query), avgdl)
            reference = fresh(docs)
            want_rows, want = bm25_touched(reference, weights(reference, query), avgdl)
            np.testing.assert_array_equal(got_rows, want_rows)
            assert np.allclose(got, want, atol=1e-5)


def state(part: LexicalPartition) -> tuple[object, ...]:
    return (
        [part.row_terms(r) for r in range(len(part))],
        {t: part.posting(t) for t in part.postings},
        part.doc_len,
        part.lengths().tolist(),
        part.total_len,
        part.doc_language,
        dict(part.language_counts),
    )


@pytest.mark.parametrize("seed", range(4))
def test_postings_saved_and_taken_back_in_another_row_order_are_the_same_index(
    seed: int,
) -> None:
    """What a start does with saved postings (``term_map``): a partition worked on by sets and
    deletes, saved, and taken back with its rows in another order (as a later load puts them)
    is exactly the partition built by analysing the rows in that order, and stays so through
    more writes."""
    rng = random.Random(seed)
    docs: list[list[str]] = []
    langs: list[str] = []
    part = LexicalPartition()
    for _ in range(200):
        if rng.random() < 0.7 or not docs:
            terms = rng.choices(WORDS, k=rng.randint(0, 6))
            lang = rng.choice(["en", "de"])
            part.set(len(docs), terms, lang)
            docs.append(terms)
            langs.append(lang)
        else:
            row = rng.randrange(len(docs))
            part.move_last_into(row)
            docs[row], langs[row] = docs[-1], langs[-1]
            docs.pop()
            langs.pop()
    saved = gather([part])
    ((rows, words, counts, pairs),) = saved.partitions()
    assert rows == len(docs)
    order = list(range(rows))
    rng.shuffle(order)  # the new load's row i is the saved row order[i]
    at = np.empty(rows, dtype=np.int64)
    at[order] = np.arange(rows)
    taken = LexicalPartition()
    taken.adopt(at, words, counts, pairs, [langs[i] for i in order])
    want = LexicalPartition()
    for row, i in enumerate(order):
        want.set(row, docs[i], langs[i])
    assert state(taken) == state(want)
    for _ in range(50):  # and both stay the same index through writes
        row = rng.randrange(len(want))
        if rng.random() < 0.5:
            terms = rng.choices(WORDS, k=rng.randint(1, 5))
            taken.set(row, terms, "en")
            want.set(row, terms, "en")
        else:
            taken.move_last_into(row)
            want.move_last_into(row)
        assert state(taken) == state(want)


@pytest.mark.parametrize("every_bytes", [0, 8, 24])
def test_postings_copied_in_pieces_save_as_those_copied_at_once(every_bytes: int) -> None:
    """A save while serving copies the postings a slice at a time, a long posting in
    pieces of ``every_bytes``, and joins them a slice at a time; a partition written to
    mid-copy is dropped (saved without its postings). Whatever the slices and wherever the
    drop, each partition kept reads back as one copied at once, and the dropped one as
    skipped."""
    rng = random.Random(every_bytes)
    parts = []
    for _ in range(3):
        part = LexicalPartition()
        for row in range(40):  # common words: postings of many pairs
            part.set(row, rng.choices(WORDS[:6], k=rng.randint(1, 5)), "en")
        parts.append(part)
    gathering = Gathering()
    for _ in gathering.add(parts[0], 0, every_bytes):
        pass
    copying = gathering.add(parts[1], 0, every_bytes)
    for _ in range(5):  # some way into the second partition's postings (or all of it)
        next(copying, None)
    gathering.drop_last(len(parts[1]))  # written to meanwhile
    for _ in gathering.add(parts[2], 0, every_bytes):
        pass
    joins = sum(1 for _ in gathering.join(every_bytes))  # joined a slice at a time too
    assert (joins > 1) == (every_bytes > 0)
    got = gathering.result()
    assert got.skipped == {1}
    kept = got.partitions()
    assert [rows for rows, *_ in kept] == [40, 40, 40]
    for k in (0, 2):
        ((_, words, counts, pairs),) = gather([parts[k]]).partitions()
        assert kept[k][1] == words
        np.testing.assert_array_equal(kept[k][2], counts)
        np.testing.assert_array_equal(kept[k][3], pairs)
    assert kept[1][1] == [] and len(kept[1][3]) == 0


def test_saved_postings_that_do_not_make_an_index_are_refused() -> None:
    part = LexicalPartition()
    for row, terms in enumerate([["alpha", "beta"], ["beta"], ["gamma", "gamma"]]):
        part.set(row, terms, "en")
    ((rows, words, counts, pairs),) = gather([part]).partitions()
    at = np.arange(rows, dtype=np.int64)
    bad_row = pairs.copy()
    bad_row[0] = 7  # a row the partition does not have
    zero_tf = pairs.copy()
    zero_tf[1] = 0
    for words_, pairs_ in [
        (words, bad_row),
        (words, zero_tf),
        (["alpha", "alpha", "gamma"], pairs),
    ]:
        target = LexicalPartition()
        with pytest.raises(ValueError):
            target.adopt(at, words_, counts, pairs_, ["en"] * rows)
        assert len(target) == 0 and not target.postings  # nothing taken
    beta = words.index("beta")
    start = 2 * int(counts[:beta].sum())
    twice = pairs.copy()
    twice[start + 2] = twice[start]  # beta's posting names its first row twice
    with pytest.raises(ValueError):
        LexicalPartition().adopt(at, words, counts, twice, ["en"] * rows)
    # two saved rows given one row here (or a row past the partition's end)
    for where in (np.array([0, 1, 0]), np.array([0, 1, 3])):
        target = LexicalPartition()
        with pytest.raises(ValueError):
            target.adopt(where, words, counts, pairs, ["en"] * rows)
        assert len(target) == 0 and not target.postings
