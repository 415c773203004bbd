"""Who asserted a memory, and who may say so.

The metadata key ``asserted_by`` (``core.records.PROVENANCE_KEY``) is what the review's
trust rule reads: only a memory asserted by ``user`` or ``operator`` may be promoted to a
shared or global scope (``core.review``). A caller's claim is only as good as its
credential: an operator credential (an API key with ``operator = true``, the single
``MEMORYD_AUTH_TOKEN``, or the trusted local caller with auth off) may store any value; from
any other credential a ``user`` or ``operator`` claim is recorded as ``assistant``. The call
still succeeds (a host storing on a person's word with an agent's key keeps working, and the
memory in its reply says what was recorded). Capture (HookService) sets ``user`` itself: it
keeps user messages only.
"""

from __future__ import annotations

from collections.abc import Mapping

from memoryd.core import principals
from memoryd.core.records import PROVENANCE_KEY, TRUSTED_ASSERTERS


def vouched(metadata: Mapping[str, str]) -> dict[str, str]:
    """``metadata`` as the calling credential may assert it (see the module docstring)."""
    meta = dict(metadata)
    if meta.get(PROVENANCE_KEY) in TRUSTED_ASSERTERS and not principals.current().operator:
        meta[PROVENANCE_KEY] = "assistant"
    return meta
