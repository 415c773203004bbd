"""Text normalisation shared by dedupe, idempotency and validation."""

from __future__ import annotations

import hashlib
import unicodedata


def normalize_text(text: str) -> str:
    """NFC, CRLF/CR to LF, trailing spaces of each line and outer whitespace trimmed."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def content_hash(normalized: str) -> str:
    """The identity of a memory's text for exact-duplicate detection."""
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()
