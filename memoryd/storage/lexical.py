"""Lexical analysis and BM25 postings for the hot index.

Each memory is analysed in its own language (``core.language.detect``, stored with the
memory): lower-cased, split on Unicode word boundaries, that language's stop words dropped
(the ``stop-words`` package; the list below for English) and its Snowball stemmer applied
(PyStemmer); languages without a stemmer (Vietnamese, ...) keep whole words. Mixed text is
analysed by script runs: a word in another script than the text's language is analysed as
that script's default language (a Latin brand name in Russian text as English, Cyrillic in
English text as Russian). Runs of Chinese, Japanese, Korean or Thai characters (no spaces
between words) become overlapping character n-grams (bigrams for CJK, ``THAI_NGRAM``-grams
for Thai). Arabic words also index their character trigrams (``WORD_TRIGRAM_LANGUAGES``),
weighed ``TRIGRAM_WEIGHT`` of their idf in a query. Tag-like tokens (``proj:x``) are kept
whole as well as split, so a tag query finds the memory carrying the tag.

A query is analysed in its detected language and, term by term at most as often as any one
analysis yields it, in the main languages of the scopes it searches (``query_terms``): a
short query the detector gets wrong still meets the stems its memories were indexed with.

Postings live beside the vectors, one ``LexicalPartition`` per scope partition, and are
changed in the same call that changes the vectors: the text index can never be stale.
Scores are Okapi BM25 (k1 = 0.6, b = 0.75, Lucene's non-negative idf) with the collection
statistics of the scopes being searched.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import math
import re
import sys
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain

import numpy as np
import Stemmer
from memoryd_native import bm25_sparse

from memoryd.core import language as lang
from memoryd.core import text as core_text

# k1 0.6, not Lucene's 1.2: memories are a sentence or a chat turn, where a word said twice
# is little more telling than once, so its weight saturates sooner. Measured (bench/RESULTS.md,
# issue 13): XQuAD MRR@10 en 0.852 -> 0.855, es 0.764 -> 0.775, ar 0.727 -> 0.740 (default
# pipeline, MiniLM), LoCoMo recall@10 / MRR 0.674 / 0.507 -> 0.678 / 0.521. At a memory of
# average length a term said once scores its idf whatever k1 is.
K1 = 0.6

# Languages whose words also index their character trigrams (``_word_trigrams``). Arabic:
# XQuAD MRR@10 (default pipeline, MiniLM) 0.740 -> 0.772 (bench/RESULTS.md, issue 13).
WORD_TRIGRAM_LANGUAGES = frozenset({"ar"})
# A query's word trigram terms weigh this much of their idf: a word yields about as many
# trigrams as it has letters, and at full weight they outweighed its stem and pushed the
# lexical scores into the top of the fusion's tanh (XQuAD ar with USE: 0.781 -> 0.765;
# 0.25: 0.778, and MiniLM 0.772; 0.5: USE 0.774, below its lexical leg's 0.776).
TRIGRAM_WEIGHT = 0.25
B = 0.75
THAI_NGRAM = 3

# Characters written without spaces between words: analysed as character n-grams.
_NGRAM_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u1100-\u11ff"
_THAI_CHARS = "\u0e00-\u0e7f"  # Thai vowel signs are marks (not \w): the whole block
_WORD_PATTERN = (
    f"[^\\W_{_NGRAM_CHARS}{_THAI_CHARS}]+(?:[:'’.\\-][^\\W_{_NGRAM_CHARS}{_THAI_CHARS}]+)*"
)
_PIECE = re.compile(
    f"(?P<cjk>[{_NGRAM_CHARS}]+)|(?P<thai>[{_THAI_CHARS}]+)|(?P<word>{_WORD_PATTERN})", re.UNICODE
)
# The same words where a text holds no CJK or Thai character (most texts): one findall.
_WORD = re.compile(_WORD_PATTERN, re.UNICODE)
_NGRAM_OR_THAI = re.compile(f"[{_NGRAM_CHARS}{_THAI_CHARS}]")
_SPLIT = re.compile(r"[:'’.\-]")
_CACHED_WORD_LEN = 40  # longer "words" are analysed uncached

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

# stop-words' list names by ISO 639-1 code (the languages it has besides English). Not
# Vietnamese: its list holds ~1,900 single syllables, many of them parts of content words
# (XQuAD vi MRR@10 0.770 with it, 0.81 without).
_STOP_LIST_NAMES = {
    "ar": "arabic", "bg": "bulgarian", "ca": "catalan", "cs": "czech", "da": "danish",
    "de": "german", "el": "greek", "es": "spanish", "fa": "persian", "fi": "finnish",
    "fr": "french", "he": "hebrew", "hi": "hindi", "hu": "hungarian", "id": "indonesian",
    "it": "italian", "nl": "dutch", "no": "norwegian", "pl": "polish", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sk": "slovak", "sv": "swedish", "tr": "turkish",
    "uk": "ukrainian",
}  # fmt: skip


def stop_words(language: str) -> frozenset[str]:
    if language == "en":
        return STOP_WORDS
    name = _STOP_LIST_NAMES.get(language)
    if name is None:
        return frozenset()
    from stop_words import get_stop_words  # type: ignore[import-untyped]

    # single words only: multi-word entries can never equal one token
    return frozenset(w.lower() for w in get_stop_words(name) if " " not in w)


def language_code(name: str) -> str:
    """An ISO 639-1 code from a code or a Snowball name ("english" -> "en")."""
    if name in lang.LANGUAGES:
        return name
    for code, snowball in lang.SNOWBALL.items():
        if snowball == name:
            return code
    raise KeyError(name)


class _Language:
    """One language's word analysis, cached per word."""

    def __init__(self, code: str, owner: Analyzer):
        self.code = code
        self.script = lang.script_of_language(code)
        self.owner = owner
        self.stop = stop_words(code)
        snowball = lang.SNOWBALL.get(code)
        self._stem = (
            lru_cache(maxsize=200_000)(Stemmer.Stemmer(snowball).stemWord) if snowball else None
        )
        self.word = lru_cache(maxsize=200_000)(self.analyse)

    def stem(self, word: str) -> str:
        return self._stem(word) if self._stem is not None else word

    def analyse(self, word: str) -> tuple[str, ...]:
        """A word's terms (``word`` is the cached form of this)."""
        script = next((lang.script_of_char(c) for c in word if c.isalpha()), self.script)
        if script != self.script and script != lang.OTHER:
            other = lang.SCRIPT_DEFAULT.get(script, self.owner.default)
            if other != self.code:
                return self.owner.language(other).word(word)
        out: list[str] = []
        if ":" in word:
            out.append(word)  # the whole tag, unstemmed
        parts = _SPLIT.split(word) if _SPLIT.search(word) else [word]
        if len(parts) > 1 and ":" not in word and "'" not in word and "’" not in word:
            out.append(word.replace(".", "").replace("-", ""))  # e.g. "e-mail", "u.s"
        for part in parts:
            if part and part not in self.stop:
                out.append(self.stem(part))
                if self.code in WORD_TRIGRAM_LANGUAGES:
                    _word_trigrams(part, out)
        return tuple(out)


def _word_trigrams(word: str, out: list[str]) -> None:
    """The character trigrams of ``#word#``, each marked with a leading "#" (no word term
    holds one). Arabic joins articles, prepositions, conjunctions and pronouns to its words,
    and its stemmer strips only some of them: the trigrams match what the stem misses."""
    marked = f"#{word}#"
    out.extend("#" + marked[i : i + 3] for i in range(len(marked) - 2))


def _ngrams(chars: str, n: int, out: list[str]) -> None:
    if len(chars) <= n:
        out.append(chars)
    else:
        out.extend(chars[i : i + n] for i in range(len(chars) - n + 1))


# The packages whose versions can change a text's terms (``Analyzer.fingerprint``).
_ANALYSIS_PACKAGES = ("PyStemmer", "stop-words", "py3langid")

QUERY_CACHE_SIZE = 1024  # query analyses kept (LRU), keyed on the text


class Analyzer:
    """Text to BM25 terms in the text's language; ``default`` (an ISO code or a Snowball
    name) is the language of Latin-script text the detector is unsure of."""

    def __init__(self, default: str = "en"):
        self.default = language_code(default)
        self._languages: dict[str, _Language] = {}
        self.language(self.default)
        # A query's analysis depends on its text and the ``also`` languages alone: a
        # repeated query (the one the embedder's cache answers) skips language detection
        # and analysis, which cost more than the whole vector leg at 10k memories.
        self._query_analysis = lru_cache(maxsize=QUERY_CACHE_SIZE)(self._analyse_query)
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        """What a text's terms depend on besides the text and its language: the analysing
        code (this module, ``core.language``, ``core.text``), the stemmers', stop-word
        lists' and language detector's versions, and the default language. Terms saved
        under another fingerprint are never reused (``term_map``)."""
        if self._fingerprint is None:
            digest = hashlib.sha256(self.default.encode())
            digest.update(f"{sys.version};{unicodedata.unidata_version};".encode())
            for module in (__file__, lang.__file__, core_text.__file__):
                with open(module, "rb") as f:
                    digest.update(f.read())
            for package in _ANALYSIS_PACKAGES:
                digest.update(f"{package}={importlib.metadata.version(package)};".encode())
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def language(self, code: str) -> _Language:
        analysis = self._languages.get(code)
        if analysis is None:
            if code not in lang.LANGUAGES:
                code = self.default
            analysis = self._languages.get(code) or _Language(code, self)
            self._languages[code] = analysis
        return analysis

    def detect(self, text: str) -> str:
        return lang.detect(text, self.default)

    def terms(self, text: str, language: str | None = None) -> list[str]:
        analysis = self.language(language or self.detect(text))
        lowered = text.lower()
        if _NGRAM_OR_THAI.search(lowered) is None:
            # Words only: matched in one call and looked up in the word cache without a
            # Python step per word (the load at start analyses every stored text).
            words = _WORD.findall(lowered)
            if not words or max(map(len, words)) <= _CACHED_WORD_LEN:
                return list(chain.from_iterable(map(analysis.word, words)))
        out: list[str] = []
        for m in _PIECE.finditer(lowered):
            piece = m.group()
            if m.lastgroup == "cjk":
                _ngrams(piece, 2, out)
            elif m.lastgroup == "thai":
                _ngrams(piece, THAI_NGRAM, out)
            else:
                # A word's terms depend on the word alone, and words repeat: cached,
                # analysing 100k memories at start-up takes a third of the time.
                out.extend(
                    analysis.word(piece)
                    if len(piece) <= _CACHED_WORD_LEN
                    else analysis.analyse(piece)
                )
        return out

    def query_terms(self, text: str, also: Iterable[str] = ()) -> tuple[str, Counter[str]]:
        """The query's language and its terms: its own analysis, merged with the analyses
        in the ``also`` languages (each term counted as often as the analysis that yields
        it most often). The counts are the caller's own (a copy of the cached analysis)."""
        code, counts = self._query_analysis(text, tuple(also))
        return code, Counter(counts)

    def _analyse_query(self, text: str, also: tuple[str, ...]) -> tuple[str, Counter[str]]:
        code = self.detect(text)
        counts = Counter(self.terms(text, code))
        for other in also:
            if other == code:
                continue
            for term, n in Counter(self.terms(text, other)).items():
                if n > counts[term]:
                    counts[term] = n
        return code, counts


class LexicalPartition:
    """BM25 postings of one scope partition; rows are the partition's row numbers."""

    def __init__(self) -> None:
        # term -> its posting: (row, tf) pairs interleaved in one int32 array, by row (8
        # bytes a pair and 64 a term; a dict of row -> tf was ~40 bytes a pair plus an int
        # object a row: 695 bytes a memory against 271 at 100k memories in one scope, 1,511
        # against 824 in scopes of 100). A new row is the highest: an append; a row is found
        # by binary search, and a delete or a move shifts the pairs after it (a memmove).
        self.postings: dict[str, array[int]] = {}
        # each row's distinct terms (its term frequencies are in the postings): a tuple of
        # shared strings is a third of a Counter's bytes
        self.doc_terms: list[tuple[str, ...]] = []
        self.doc_len: list[int] = []
        self.total_len = 0
        self.doc_language: list[str] = []
        self.language_counts: Counter[str] = Counter()
        # doc_len as float32, kept in step: rebuilding it per query costs O(rows)
        self._lengths = np.zeros(16, dtype=np.float32)
        # each queried term's posting as (rows, tf) arrays, dropped when the posting changes:
        # converting a common term's dict on every query was most of the lexical leg.
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.version = 0  # changes so far (a save while serving copies it unchanged)
        self._scratch = np.zeros(16, dtype=np.float32)

    def posting_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        cached = self._arrays.get(term)
        if cached is not None:
            return cached
        posting = self.postings.get(term)
        if not posting:
            return None
        pairs = np.frombuffer(posting, dtype=np.int32)
        rows, tf = pairs[0::2].astype(np.int64), pairs[1::2].astype(np.float32)
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

    def set(self, row: int, terms: Sequence[str], language: str = "") -> None:
        """Index ``terms`` (of a text in ``language``) as row ``row`` (appending when
        row == len, else replacing)."""
        self.version += 1
        counts: dict[str, int] = {}  # not a Counter: its constructor costs more than this
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
        postings = self.postings
        new = counts
        if row < len(self.doc_terms):
            self._drop_stats(row)
            new = dict(counts)
            self._repost(row, new)
        self.language_counts[language] += 1
        if row == len(self.doc_terms):
            self.doc_terms.append(tuple(counts))
            self.doc_len.append(len(terms))
            self.doc_language.append(language)
        else:
            self.doc_terms[row] = tuple(counts)
            self.doc_len[row] = len(terms)
            self.doc_language[row] = language
        self._set_length(row, len(terms))
        self.total_len += len(terms)
        for term, tf in new.items():
            found = postings.get(term)
            if found is None:
                postings[term] = pair = _PAIR[:]  # a copy: faster than array("i", ...)
                pair[0], pair[1] = row, tf
            elif row > found[-2]:  # a new row (every row of the load at start)
                found.append(row)
                found.append(tf)
            else:
                _insert(found, row, tf)
        if self._arrays:  # none at the load at start: nothing has been queried yet
            for term in new:
                self._arrays.pop(term, None)

    def move_last_into(self, row: int) -> None:
        """Delete ``row`` by moving the last row into it (mirrors the vector matrix)."""
        self.version += 1
        last = len(self.doc_terms) - 1
        postings = self.postings
        self._drop_stats(row)
        # The last row is the highest: its pair ends each of its postings.
        moved: dict[str, int] = {}
        for term in self.doc_terms[last]:
            self._arrays.pop(term, None)
            posting = postings[term]
            moved[term] = posting[-1]
            del posting[-2:]
            if row == last and not posting:
                del postings[term]
        if row != last:
            self._repost(row, moved)
            for term, tf in moved.items():  # (a posting emptied above gets its pair back)
                _insert(postings[term], row, tf)
            self.doc_terms[row] = self.doc_terms[last]
            self.doc_len[row] = self.doc_len[last]
            self.doc_language[row] = self.doc_language[last]
            self._set_length(row, self.doc_len[last])
        self.doc_terms.pop()
        self.doc_len.pop()
        self.doc_language.pop()

    def _repost(self, row: int, tfs: dict[str, int]) -> None:
        """Take ``row``'s pairs out of the postings of its terms, except where ``tfs``
        names the term: there its tf is set in place (no shift) and the term is popped
        from ``tfs``, leaving the terms still to insert."""
        postings = self.postings
        for term in self.doc_terms[row]:
            self._arrays.pop(term, None)
            posting = postings[term]
            at = _at(posting, row)
            tf = tfs.pop(term, 0)
            if tf:
                posting[at + 1] = tf
            elif len(posting) == 2:
                del postings[term]
            else:
                del posting[at : at + 2]

    def _drop_stats(self, row: int) -> None:
        self.total_len -= self.doc_len[row]
        gone = self.doc_language[row]
        self.language_counts[gone] -= 1
        if self.language_counts[gone] <= 0:
            del self.language_counts[gone]

    def adopt(
        self,
        rows: np.ndarray,
        words: list[str],
        lengths: np.ndarray,
        pairs: np.ndarray,
        languages: list[str],
    ) -> None:
        """Take a partition's postings as saved (``term_map``) instead of analysing its
        texts; only into an empty partition of ``len(languages)`` rows. ``rows[i]``: where
        the saved row ``i`` is here (-1: nowhere, its pairs are dropped: a row changed or
        gone since), each row here at most once; ``words``: the saved postings' terms, in
        order, ``lengths`` their pair counts, ``pairs`` their (saved row, tf) pairs;
        ``languages``: each row's language, by row here. The rows here that no saved row
        becomes are left without terms, for the caller to ``set``. ValueError if they do
        not make postings of these rows (nothing is taken then)."""
        n, size = len(rows), len(languages)
        if self.doc_terms or len(words) != len(lengths):
            raise ValueError("the saved partition does not fit")
        if len(set(words)) != len(words):
            raise ValueError("a term is saved twice")
        live = rows[rows >= 0]
        if live.size and (live.max() >= size or len(np.unique(live)) != live.size):
            raise ValueError("the saved rows are not distinct rows of the partition")
        old = pairs[0::2]
        tf = pairs[1::2]
        if int(lengths.sum()) != old.size or (old.size and (old.min() < 0 or old.max() >= n)):
            raise ValueError("a saved posting names a row the partition does not have")
        if tf.size and tf.min() < 1:
            raise ValueError("a saved term frequency is not positive")
        new = rows[old]
        group = np.repeat(np.arange(len(words), dtype=np.int64), lengths)
        if live.size < n:  # the pairs of rows changed or gone since go
            kept = new >= 0
            new, tf, group = new[kept], tf[kept], group[kept]
            lengths = np.bincount(group, minlength=len(words))
        new = new.astype(np.int32)
        if not np.array_equal(rows, np.arange(n)):
            order = np.lexsort((new, group))  # each posting by its rows here
            new, tf = new[order], tf[order]
        if np.any((np.diff(new) <= 0) & (np.diff(group) == 0)):
            raise ValueError("a saved posting names a row twice")
        packed = np.empty(2 * new.size, dtype=np.int32)
        packed[0::2], packed[1::2] = new, tf
        view = memoryview(packed.tobytes())
        postings: dict[str, array[int]] = {}
        at = 0
        for word, length in zip(words, lengths.tolist(), strict=True):
            if length:
                posting = array("i")
                posting.frombytes(view[at : at + 8 * length])
                postings[word] = posting
                at += 8 * length
        # Each row's distinct terms: the pairs by row.
        by_row = np.argsort(new, kind="stable")
        per_row = np.bincount(new, minlength=size).tolist()
        doc_len = np.bincount(new, weights=tf, minlength=size).astype(np.int64)
        entry_words = np.asarray(words, dtype=object)[group[by_row]].tolist()
        doc_terms: list[tuple[str, ...]] = []
        start = 0
        for count in per_row:
            doc_terms.append(tuple(entry_words[start : start + count]))
            start += count
        self.postings = postings
        self.doc_terms = doc_terms
        self.doc_len = doc_len.tolist()
        self.total_len = int(doc_len.sum())
        self.doc_language = list(languages)
        self.language_counts = Counter(languages)
        self._lengths = np.zeros(max(16, size), dtype=np.float32)
        self._lengths[:size] = doc_len
        self._arrays.clear()
        self.version += 1

    def row_terms(self, row: int) -> dict[str, int]:
        """A row's terms and their frequencies (from the postings)."""
        out: dict[str, int] = {}
        for term in self.doc_terms[row]:
            posting = self.postings[term]
            out[term] = posting[_at(posting, row) + 1]
        return out

    def df(self, term: str) -> int:
        posting = self.postings.get(term)
        return len(posting) // 2 if posting else 0

    def posting(self, term: str) -> dict[int, int]:
        """A term's posting as row -> term frequency (tests, tools)."""
        pairs = self.postings.get(term)
        if not pairs:
            return {}
        return dict(zip(pairs[0::2], pairs[1::2], strict=True))


_PAIR = array("i", (0, 0))


def _insert(posting: array[int], row: int, tf: int) -> None:
    at = _at(posting, row)
    posting.insert(at, tf)
    posting.insert(at, row)


def _at(posting: array[int], row: int) -> int:
    """Where ``row``'s pair is, or would go, in a posting: a binary search (numpy's over
    the strided rows copied them first, O(n))."""
    lo, hi = 0, len(posting) >> 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if posting[mid << 1] < row:
            lo = mid + 1
        else:
            hi = mid
    return lo << 1


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
