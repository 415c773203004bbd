"""Extractive summaries of memory text, and the script-aware word count they rest on.

A memory's ``summary`` is what auto-recall injects (PLUR1BUS injects summaries, not full
text, and caps them at ``summaryMaxWords`` = 150). memoryd makes it without an LLM: it
keeps whole sentences of the original, so a summary never says anything the user did not.

Words are counted so that languages written without spaces are not one giant "word":
every Han character and every kana counts as one word; other text (Latin, Cyrillic,
Korean Hangul, which separates words with spaces) counts whitespace-separated runs that
contain a letter or digit. Punctuation alone is not a word.

Sentences end at ``. ! ? …`` followed by whitespace (common abbreviations such as "e.g."
or "z. B." and single initials do not end a sentence), at ``。！？`` with or without
whitespace, and at line breaks.
"""

from __future__ import annotations

import re
from collections import Counter

from memoryd.core.errors import InvalidArgument
from memoryd.core.text import HAN_CHARS as _HAN
from memoryd.core.text import KANA_CHARS as _KANA

__all__ = ["count_words", "extractive_summary"]

ELLIPSIS = "…"

# One Han/kana character, or a run of anything else that is not whitespace.
_TOKEN = re.compile(rf"[{_HAN}{_KANA}]|[^\s{_HAN}{_KANA}]+")
_SPACELESS = re.compile(rf"[{_HAN}{_KANA}]")

# A sentence end: Western terminators (with closing quotes/brackets) before whitespace,
# CJK terminators anywhere, or a line break.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)" r"|[。！？]+[」』”’)）\"']*" r"|\n")
_ABBREVIATIONS = frozenset(
    {
        "e.g",
        "i.e",
        "cf",
        "vs",
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "no",
        "approx",
        "ca",
        "jr",
        "sr",
        "z",
        "z.b",
        "b",
        "d.h",
        "bzw",
        "usw",
        "ggf",
        "evtl",
        "nr",
        "tj",
        "atd",
        "např",
        "resp",
    }
)
_LAST_WORD = re.compile(r"([\w.]+)\.$")

# Words too common to say what a sentence is about (English, German, Czech); for
# Chinese/Japanese, particles and the most frequent function characters.
_STOPWORD_LIST = """
    a an the and or but if then so of to in on at by for with from as into about over
    is are was were be been being am do does did have has had i me my we our you your he
    she it its they them their this that these those there here not no yes can could
    will would should just also very more most some any all what which who whom when
    where why how than too only own same such
    der die das den dem des ein eine einer eines einem einen und oder aber wenn dann
    ist sind war waren sein bin bist hat haben ich du er sie es wir ihr mich mir dich
    dir uns nicht auch nur noch schon sehr mit von zu im am an auf für aus bei nach
    um als wie so dass da
    a i je jsou byl byla bylo to ten ta se si na v ve z ze do od po pro s k o u že ale
    jak tak jen už ještě
"""
_STOPWORDS = frozenset(_STOPWORD_LIST.split()) | frozenset(
    "的了是在和也就都而及与着或一不这那我你他她它们之をにがはでともへやかなのよねだです"
)


def count_words(text: str) -> int:
    """Words in ``text``: each Han character and kana is one, other runs split on spaces."""
    return sum(1 for _ in _word_spans(text))


def _word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _TOKEN.finditer(text) if any(ch.isalnum() for ch in m.group())]


def _split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.group().startswith(".") and _is_abbreviation(text[start : m.end()]):
            continue
        piece = text[start : m.end()].strip()
        if piece:
            sentences.append(piece)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _is_abbreviation(candidate: str) -> bool:
    """Whether the "." closing ``candidate`` belongs to an abbreviation or an initial."""
    m = _LAST_WORD.search(candidate.rstrip())
    if m is None:
        return False
    word = m.group(1).lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _informative_tokens(sentence: str) -> set[str]:
    tokens: set[str] = set()
    for start, end in _word_spans(sentence):
        token = sentence[start:end].lower().strip(".,;:!?\"'()[]{}“”‘’«»„")
        if not token or token in _STOPWORDS:
            continue
        if _SPACELESS.fullmatch(token) or len(token) >= 3 or any(c.isdigit() for c in token):
            tokens.add(token)
    return tokens


def _truncate(sentence: str, max_words: int) -> str:
    spans = _word_spans(sentence)
    cut = sentence[: spans[max_words - 1][1]].rstrip(" ,;:、，；：-–—")
    return cut + ELLIPSIS


def _join(sentences: list[str]) -> str:
    out = sentences[0]
    for sentence in sentences[1:]:
        # Chinese and Japanese sentences follow each other without a space.
        glue = "" if _SPACELESS.match(out[-1]) or out[-1] in "。！？」』）" else " "
        out += glue + sentence
    return out


def extractive_summary(text: str, max_words: int = 150) -> str:
    """A summary of ``text`` in at most ``max_words`` words, made of its own sentences.

    Text within the limit is returned unchanged apart from trimmed whitespace. Longer
    text keeps its first sentence, then adds the sentences richest in informative words
    (words that are not stopwords, weighted by how often the text repeats them) while
    they fit, and prints the kept sentences in their original order. If the first
    sentence alone is over the limit, it is cut at a word boundary and ends in "…".
    The result is empty only when ``text`` is blank.
    """
    if max_words < 1:
        raise InvalidArgument(f"max_words is {max_words}; it must be at least 1")
    text = text.strip()
    # A word is at least one character: a text this short is within the limit.
    if len(text) <= max_words or count_words(text) <= max_words:
        return text

    sentences = [s for s in _split_sentences(text) if count_words(s) > 0]
    sizes = [count_words(s) for s in sentences]
    if sizes[0] > max_words:
        return _truncate(sentences[0], max_words)

    token_sets = [_informative_tokens(s) for s in sentences]
    frequency: Counter[str] = Counter(t for tokens in token_sets for t in tokens)
    scores = [sum(frequency[t] for t in tokens) for tokens in token_sets]

    chosen = {0}
    budget = max_words - sizes[0]
    for i in sorted(range(1, len(sentences)), key=lambda i: (-scores[i], i)):
        if sizes[i] <= budget:
            chosen.add(i)
            budget -= sizes[i]
    return _join([sentences[i] for i in sorted(chosen)])
