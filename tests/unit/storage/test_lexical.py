"""BM25 over a lexical partition stays exact while rows are added, replaced and removed
(the per-term posting arrays it caches between queries must never go stale)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memoryd.storage.lexical import LexicalPartition, bm25_touched, idf

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
