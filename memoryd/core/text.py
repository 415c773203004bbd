"""Text helpers shared by the domain: normalisation (dedupe, idempotency, validation),
blank detection, the content hash, and which script a text is written in."""

from __future__ import annotations

import hashlib
import re
import unicodedata

# Character classes (for a regex [...]) of the CJK scripts.
HAN_CHARS = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
KANA_CHARS = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
HANGUL_CHARS = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_CJK = re.compile(f"[{HAN_CHARS}{KANA_CHARS}{HANGUL_CHARS}]")


def normalize_text(text: str) -> str:
    """NFC, CRLF/CR to LF, trailing spaces of each line and outer whitespace trimmed."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


# Unicode categories that show nothing: controls (NUL ...), format characters (zero-width
# space, BOM ...), surrogates and separators (spaces, lines). Not unassigned code points:
# an emoji newer than Python's Unicode tables is unassigned to it, yet visible.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"})


def is_blank(text: str) -> bool:
    """Whether ``text`` has no visible character (empty, or only spaces, NUL, controls
    or invisible format characters such as U+200B): a text a person could not read."""
    return all(unicodedata.category(ch) in _INVISIBLE for ch in text)


def content_hash(normalized: str) -> str:
    """The identity of a memory's text for exact-duplicate detection."""
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def contains_cjk(text: str) -> bool:
    """True if the text contains Han, kana or Hangul characters.

    Length thresholds use it: a few CJK characters say as much as a Latin sentence.
    """
    return _CJK.search(text) is not None
