"""List's page tokens: an opaque name for the last row a page showed.

A token holds that row's (created_at, id), so the next page starts right after it however
others write meanwhile: pages never repeat or skip rows. A token a caller forged or
garbled is refused as InvalidArgument, never a crash.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

from memoryd.core.errors import InvalidArgument
from memoryd.core.records import Memory

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def encode(last: Memory) -> str:
    """The token of the page that follows ``last``."""
    raw = json.dumps([(last.created_at - _EPOCH) // _MICROSECOND, last.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str) -> tuple[datetime, str]:
    """The (created_at, id) of the row a token names."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        micros, memory_id = json.loads(raw)
        return _EPOCH + int(micros) * _MICROSECOND, str(memory_id)
    except (ValueError, TypeError, OverflowError, RecursionError):
        # RecursionError: json.loads of a deeply nested forged token.
        raise InvalidArgument("page_token is invalid; pass next_page_token as returned") from None
