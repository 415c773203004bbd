"""Lexical analysis and BM25 postings for the hot index.

The analyzer lower-cases, splits on Unicode word boundaries, drops English stop words,
stems with Snowball (PyStemmer), turns runs of CJK characters into overlapping bigrams
(CJK text has no spaces), and keeps tag-like tokens (``proj:x``) whole as well as split,
so a tag query finds the memory carrying the tag.

Postings live beside the vectors, one ``LexicalPartition`` per scope partition, and are
changed in the same call that changes the vectors: the text index can never be stale.
Scores are Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's non-negative idf) with the collection
statistics of the scopes being searched.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import Stemmer

from memoryd.native import bm25_sparse

K1 = 1.2
B = 0.75

_TOKEN = re.compile(r"[^\W_]+(?:[:'’.\-][^\W_]+)*", re.UNICODE)
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u1100-\u11ff]+"
)
_SPLIT = re.compile(r"[:'’.\-]")
_CACHED_WORD_LEN = 40  # longer "words" (e.g. a CJK sentence) are analysed uncached

STOP_WORDS = frozenset(
    {
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
        "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
        "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
        "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
        "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
        "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
        "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
        "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
        "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
        "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
        "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
        "yourselves", "s", "t", "don", "didn", "doesn", "isn", "wasn", "weren", "won", "wouldn",
        "shouldn", "couldn", "ll", "re", "ve", "d", "m",
    }
)  # fmt: skip


class Analyzer:
    def __init__(self, language: str = "english"):
        self._stemmer = Stemmer.Stemmer(language)
        self._stem = lru_cache(maxsize=200_000)(self._stemmer.stemWord)
        self._word = lru_cache(maxsize=200_000)(self._analyse)

    def terms(self, text: str) -> list[str]:
        out: list[str] = []
        for word in _TOKEN.findall(text.lower()):
            # A word's terms depend on the word alone, and words repeat: cached, analysing
            # 100k memories at start-up takes a third of the time.
            out.extend(self._word(word) if len(word) <= _CACHED_WORD_LEN else self._analyse(word))
        return out

    def _analyse(self, word: str) -> tuple[str, ...]:
        out: list[str] = []
        if _CJK.search(word):
            self._cjk(word, out)
            return tuple(out)
        if ":" in word:
            out.append(word)  # the whole tag, unstemmed
        parts = _SPLIT.split(word) if _SPLIT.search(word) else [word]
        if len(parts) > 1 and ":" not in word and "'" not in word and "’" not in word:
            out.append(word.replace(".", "").replace("-", ""))  # e.g. "e-mail", "u.s"
        for part in parts:
            if part and part not in STOP_WORDS:
                out.append(self._stem(part))
        return tuple(out)

    def _cjk(self, word: str, out: list[str]) -> None:
        pos = 0
        for run in _CJK.finditer(word):
            for other in _SPLIT.split(word[pos : run.start()]):
                if other and other not in STOP_WORDS:
                    out.append(self._stem(other))
            chars = run.group()
            if len(chars) == 1:
                out.append(chars)
            else:
                out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
            pos = run.end()
        for other in _SPLIT.split(word[pos:]):
            if other and other not in STOP_WORDS:
                out.append(self._stem(other))


class LexicalPartition:
    """BM25 postings of one scope partition; rows are the partition's row numbers."""

    def __init__(self) -> None:
        self.postings: dict[str, dict[int, int]] = {}
        self.doc_terms: list[Counter[str]] = []
        self.doc_len: list[int] = []
        self.total_len = 0
        # doc_len as float32, kept in step (rebuilding it per query cost 6 ms at 100k rows)
        self._lengths = np.zeros(16, dtype=np.float32)
        # each queried term's posting as (rows, tf) arrays, dropped when the posting changes:
        # converting a common term's dict on every query was most of the lexical leg.
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._scratch = np.zeros(16, dtype=np.float32)

    def posting_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        cached = self._arrays.get(term)
        if cached is not None:
            return cached
        posting = self.postings.get(term)
        if not posting:
            return None
        rows = np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))
        tf = np.fromiter(posting.values(), dtype=np.float32, count=len(posting))
        self._arrays[term] = (rows, tf)
        return rows, tf

    def lengths(self) -> np.ndarray:
        return self._lengths[: len(self.doc_len)]

    def scratch(self) -> np.ndarray:
        """A zeroed float32 buffer as long as the partition, for ``bm25_sparse`` (which
        leaves it zeroed); one per partition, reused by every query (the index is used
        from one thread)."""
        n = len(self.doc_len)
        if self._scratch.shape[0] < n:
            self._scratch = np.zeros(max(16, 2 * n), dtype=np.float32)
        return self._scratch

    def _set_length(self, row: int, value: int) -> None:
        if row >= self._lengths.shape[0]:
            grown = np.zeros(max(16, 2 * self._lengths.shape[0], row + 1), dtype=np.float32)
            grown[: self._lengths.shape[0]] = self._lengths
            self._lengths = grown
        self._lengths[row] = value

    def __len__(self) -> int:
        return len(self.doc_terms)

    def set(self, row: int, terms: Sequence[str]) -> None:
        """Index ``terms`` as row ``row`` (appending when row == len, else replacing)."""
        if row < len(self.doc_terms):
            self._unpost(row)
        counts = Counter(terms)
        if row == len(self.doc_terms):
            self.doc_terms.append(counts)
            self.doc_len.append(len(terms))
        else:
            self.doc_terms[row] = counts
            self.doc_len[row] = len(terms)
        self._set_length(row, len(terms))
        self.total_len += len(terms)
        for term, tf in counts.items():
            self.postings.setdefault(term, {})[row] = tf
            self._arrays.pop(term, None)

    def move_last_into(self, row: int) -> None:
        """Delete ``row`` by moving the last row into it (mirrors the vector matrix)."""
        last = len(self.doc_terms) - 1
        self._unpost(row)
        if row != last:
            moved = self.doc_terms[last]
            for term, tf in moved.items():
                posting = self.postings[term]
                del posting[last]
                posting[row] = tf
                self._arrays.pop(term, None)
            self.doc_terms[row] = moved
            self.doc_len[row] = self.doc_len[last]
            self._set_length(row, self.doc_len[last])
        self.doc_terms.pop()
        self.doc_len.pop()

    def _unpost(self, row: int) -> None:
        for term in self.doc_terms[row]:
            self._arrays.pop(term, None)
            posting = self.postings[term]
            del posting[row]
            if not posting:
                del self.postings[term]
        self.total_len -= self.doc_len[row]

    def df(self, term: str) -> int:
        posting = self.postings.get(term)
        return len(posting) if posting else 0


def idf(df: int, n_docs: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_touched(
    part: LexicalPartition, query: dict[str, float], avgdl: float
) -> tuple[np.ndarray, np.ndarray]:
    """The rows holding at least one query term (ascending) and their BM25 scores: the
    lexical leg ranks only these rows.
    The work is proportional to the query terms' postings, plus one pass over the
    partition when they touch more than an eighth of its rows."""
    if not query or avgdl <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    rows, tf, weights = [], [], []
    for term, weight in query.items():
        arrays = part.posting_arrays(term)
        if arrays is not None:
            rows.append(arrays[0])
            tf.append(arrays[1])
            weights.append(weight)
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    starts = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([r.size for r in rows], out=starts[1:])
    lengths = part.lengths()
    return bm25_sparse(
        np.concatenate(rows) if len(rows) > 1 else rows[0],
        np.concatenate(tf) if len(tf) > 1 else tf[0],
        starts,
        np.array(weights, dtype=np.float64),
        lengths,
        avgdl,
        K1,
        B,
        part.scratch(),
    )
