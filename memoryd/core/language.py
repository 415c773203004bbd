"""Which language a text is written in, and how each language's words are analysed.

``detect(text)`` returns an ISO 639-1 code. Scripts that name their language settle it
without a model (kana: ja, Hangul: ko, Han alone: zh, Thai: th, Greek: el); everything
else goes to py3langid (a naive Bayes model over byte n-grams, 4.5 MB, shipped in its
wheel; its scores summed by a numba kernel, 13-24 us a question here, ~100 us cold) restricted to
the languages memoryd can analyse. A text the model is unsure of (probability under
``MIN_CONFIDENCE``, which short chat lines like "Bye!" are) gets the script's default:
the configured default language for Latin script, Russian for Cyrillic, Arabic for
Arabic script.

Measured on 300 XQuAD questions per language (py3langid 0.4, all its languages): 0.98-1.0
accuracy in en, es, ru, ar, th, vi; lingua-language-detector 2.2 was no more accurate on
them, needed 96 MB and 42 s to load, and 1-10 ms per English or Spanish question. On the
5,882 LoCoMo chat turns and 1,986 questions, restricted to ``LANGUAGES`` and with the
confidence floor, every one is English.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from memoryd_native import nb_language_scores
from memoryd_native.kernels import F16_TO_F32

from memoryd.core.text import HAN_CHARS, HANGUL_CHARS, KANA_CHARS

# ISO 639-1 -> Snowball stemmer (PyStemmer) for the languages that have one.
SNOWBALL = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german",
    "el": "greek", "en": "english", "eo": "esperanto", "es": "spanish", "et": "estonian",
    "eu": "basque", "fa": "persian", "fi": "finnish", "fr": "french", "ga": "irish",
    "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian",
    "lt": "lithuanian", "ne": "nepali", "nl": "dutch", "no": "norwegian", "pl": "polish",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish",
    "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}  # fmt: skip
# Analysed without a stemmer: CJK and Thai by character n-grams, the others by words.
UNSTEMMED = frozenset({"zh", "ja", "ko", "th", "vi", "uk", "bg", "he", "sk", "sl", "hr"})
LANGUAGES = frozenset(SNOWBALL) | UNSTEMMED
MIN_CONFIDENCE = 0.5

# Script of a character, by ranges (the first match wins).
LATIN, CYRILLIC, ARABIC, GREEK, HAN, KANA, HANGUL, THAI, OTHER = range(9)
_SCRIPT_RANGES = (
    (re.compile(f"[{KANA_CHARS}]"), KANA),
    (re.compile(f"[{HANGUL_CHARS}]"), HANGUL),
    (re.compile(f"[{HAN_CHARS}]"), HAN),
    (re.compile(r"[\u0e00-\u0e7f]"), THAI),
    (re.compile(r"[\u0400-\u04ff]"), CYRILLIC),
    (re.compile(r"[\u0600-\u06ff\u0750-\u077f]"), ARABIC),
    (re.compile(r"[\u0370-\u03ff]"), GREEK),
    (re.compile(r"[A-Za-z\u00c0-\u024f]"), LATIN),
)
# The language a script's words are analysed as when the text's own language is written
# in another script (a Latin brand name in Russian text is stemmed as English).
SCRIPT_DEFAULT = {CYRILLIC: "ru", ARABIC: "ar", GREEK: "el", THAI: "th", HAN: "zh", KANA: "ja"}
LANGUAGE_SCRIPT = {
    "ru": CYRILLIC, "uk": CYRILLIC, "bg": CYRILLIC, "sr": CYRILLIC,
    "ar": ARABIC, "fa": ARABIC, "el": GREEK, "th": THAI, "zh": HAN, "ja": KANA, "ko": HANGUL,
    "hy": OTHER, "hi": OTHER, "ne": OTHER, "ta": OTHER, "yi": OTHER, "he": OTHER,
}  # fmt: skip


def script_of_language(language: str) -> int:
    return LANGUAGE_SCRIPT.get(language, LATIN)


@lru_cache(maxsize=4096)
def script_of_char(ch: str) -> int:
    for pattern, script in _SCRIPT_RANGES:
        if pattern.match(ch):
            return script
    return OTHER


def script_counts(text: str) -> dict[int, int]:
    if text.isascii():  # every ASCII letter is Latin: no per-character lookup
        letters = sum(map(str.isalpha, text))
        return {LATIN: letters} if letters else {}
    counts: dict[int, int] = {}
    for ch in text:
        if ch.isalpha():
            s = script_of_char(ch)
            counts[s] = counts.get(s, 0) + 1
    return counts


_identifier = None
_identifier_lock = threading.Lock()


def _model() -> Any:
    global _identifier
    if _identifier is None:
        with _identifier_lock:
            if _identifier is None:
                from py3langid.langid import (  # type: ignore[import-untyped]
                    MODEL_FILE,
                    LanguageIdentifier,
                )

                ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                ident.set_languages(sorted(LANGUAGES & set(ident.nb_classes)))
                global _tables
                _tables = _Tables.of(ident)
                _identifier = ident
    return _identifier


@dataclass(frozen=True, slots=True)
class _Tables:
    """The model's automaton and naive Bayes tables as the numba kernel reads them."""

    nextmove: np.ndarray  # uint32: state = nextmove[rowbase[state] + byte]
    rowbase: np.ndarray  # int64, per state
    output: np.ndarray  # int32, per state: the feature it names, or -1
    ptc: np.ndarray  # uint16 (float16 bits) [feature, language]
    pc: np.ndarray  # float32 [language]

    @classmethod
    def of(cls, ident: Any) -> _Tables | None:
        """The tables of a py3langid identifier, checked so that no walk can read outside
        them; None (the identifier's own ``classify`` is used) when its fields are not
        what py3langid 0.4 has."""
        try:
            # one C-ordered copy of the restricted table, shared with the identifier
            ident.nb_ptc = np.ascontiguousarray(ident.nb_ptc)
            if ident.nb_ptc.dtype != np.float16 or not ident._norm_probs:
                return None
            tables = cls(
                nextmove=np.asarray(ident.tk_nextmove, dtype=np.uint32),
                rowbase=np.asarray(ident._rowbase, dtype=np.int64),
                output=np.asarray(ident.tk_output, dtype=np.int32),
                ptc=ident.nb_ptc.view(np.uint16),
                pc=np.ascontiguousarray(ident.nb_pc, dtype=np.float32),
            )
        except (AttributeError, TypeError, ValueError, OverflowError):
            return None
        states = tables.rowbase.size
        if not (
            states
            and tables.ptc.ndim == 2
            and tables.output.size == states
            and tables.rowbase.min() >= 0
            and tables.nextmove.size >= 256
            and tables.rowbase.max() <= tables.nextmove.size - 256  # (no overflow)
            and tables.nextmove.max() < states
            and tables.output.max() < tables.ptc.shape[0]
            and tables.pc.size == tables.ptc.shape[1] == len(ident.nb_classes)
        ):
            return None
        return tables


_tables: _Tables | None = None


def _classify(text: str) -> tuple[str, float]:
    """py3langid's ``classify`` (probabilities, its label aliases folded) with the walk
    and the sum in one numba call: 13-24 us a question against 35-63 us back to back,
    97-134 us against 156-223 us with the caches cold (``bench/language_id.py``), and the
    same language as the library's on each of 6,000 questions in six languages (a test
    holds them to it on sentences in 19). The probabilities differ from the library's by
    float32 rounding (a few millionths), so a text whose confidence is that close to
    ``MIN_CONFIDENCE`` may fall on the other side of it (helper-59's review found such
    strings of random letters; none among real questions)."""
    ident = _model()
    tables = _tables
    if tables is None:
        language, confidence = ident.classify(text)
        return str(language), float(confidence)
    data = ident._encode(text)
    scores, distinct = nb_language_scores(
        np.frombuffer(data, dtype=np.uint8),
        tables.nextmove,
        tables.rowbase,
        tables.output,
        tables.ptc,
        F16_TO_F32,
        tables.pc,
    )
    if not distinct:  # no features: uniform, as the library's
        scores = np.zeros_like(scores)
    scores *= 1.0 / math.sqrt(len(data) or 1)
    np.exp(scores - scores.max(), out=scores)
    scores /= scores.sum()
    for i, j in ident._alias_pairs:
        scores[i] += scores[j]
        scores[j] = 0.0
    best = int(scores.argmax())
    return str(ident.nb_classes[best]), float(scores[best])


def warm_up() -> None:
    """Load the model (~0.3 s) before the first request needs it."""
    _classify("warm up")


def detect(text: str, default: str = "en") -> str:
    """The ISO 639-1 code of the language ``text`` is mostly written in."""
    counts = script_counts(text)
    if not counts:
        return default
    if counts.get(KANA):  # kana is Japanese alone; Japanese text mixes it with Han
        return "ja"
    main = max(counts, key=lambda s: (counts[s], -s))
    if main in (HAN, HANGUL, THAI, GREEK):
        return {HAN: "zh", HANGUL: "ko", THAI: "th", GREEK: "el"}[main]
    language, confidence = _classify(text)
    if confidence >= MIN_CONFIDENCE and script_of_language(language) == main:
        return str(language)
    if main == LATIN:
        return default
    return SCRIPT_DEFAULT.get(main, default)
