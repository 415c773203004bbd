"""Text normalisation shared by dedupe, idempotency and validation."""

from __future__ import annotations

import hashlib
import unicodedata


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
