"""Routing over a fleet of daemons: which daemon serves an agent, and when to try another.

Agent affinity is rendezvous (highest random weight) hashing, the same rule in every
memoryd client (Python, TypeScript, Go, Rust, Java; checked against
``tests/data/routing_vectors.json``), so a host mixing languages sends one agent to one
daemon and that daemon's caches stay warm:

- an address is taken as given, without a leading ``http://`` or ``https://`` and a
  trailing ``/`` (``"http://10.0.0.5:50051/"`` and ``"10.0.0.5:50051"`` are one daemon);
- its weight for an agent is the first 8 bytes of
  ``SHA-256(address UTF-8 || 0x00 || agent_id UTF-8)``, read as a big-endian unsigned
  64-bit integer;
- the agent's order is every address by weight, highest first (ties: the smaller address
  first, by UTF-8 bytes). The agent goes to the first daemon of its order that is up, and
  fails over along it.

Adding or removing a daemon moves only the agents whose first choice it is or was.

What fails over (``Fleet`` keeps the down marks, the clients apply the rule):

- a daemon that cannot be reached (connection refused, no connection within
  ``connect_timeout``): every call moves on, since nothing was sent;
- ``UNAVAILABLE`` answered by a call: an idempotent call moves on (reads, Store and Capture
  with an idempotency key, which the client makes up when there is none); any other call
  (Update, Forget, BuildContext) raises it, because the request may have reached the daemon;
- nothing else: ``INVALID_ARGUMENT``, ``NOT_FOUND``, ``PERMISSION_DENIED``,
  ``DEADLINE_EXCEEDED`` after sending, ... are the answer and are raised.

A daemon that failed is marked down for ``down_for`` seconds: calls skip it (no connect
timeout paid on every call) unless every daemon is down; after that the next call that
prefers it tries it again (the re-probe), and an agent returns to its first choice as soon
as that daemon answers.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Sequence

__all__ = ["Fleet", "new_idempotency_key", "normal_address", "rendezvous_order", "weight"]


def normal_address(address: str) -> str:
    """The address as hashed: without an ``http://``/``https://`` prefix or trailing ``/``."""
    lower = address[:8].lower()
    for scheme in ("http://", "https://"):
        if lower.startswith(scheme):
            address = address[len(scheme) :]
            break
    return address.rstrip("/")


def weight(address: str, agent_id: str) -> bytes:
    """The 8-byte rendezvous weight of ``address`` for ``agent_id`` (compare as bytes)."""
    data = normal_address(address).encode() + b"\x00" + agent_id.encode()
    return hashlib.sha256(data).digest()[:8]


def rendezvous_order(addresses: Sequence[str], agent_id: str) -> list[int]:
    """Indexes into ``addresses``: the agent's order, first choice first."""
    keyed = [(weight(a, agent_id), normal_address(a).encode(), i) for i, a in enumerate(addresses)]
    # Highest weight first; on a tie the smaller address first.
    keyed.sort(key=lambda k: (_invert(k[0]), k[1]))
    return [i for _, _, i in keyed]


def _invert(b: bytes) -> bytes:
    return bytes(255 - x for x in b)


def new_idempotency_key() -> str:
    """A fresh key for a Store or Capture that has none: a random UUID (36 chars)."""
    return str(uuid.uuid4())


def check_addresses(addresses: Sequence[str]) -> list[str]:
    """The list, refused when empty or when two entries name one daemon."""
    if isinstance(addresses, str):
        return [addresses]
    out = list(addresses)
    if not out:
        raise ValueError("give at least one daemon address")
    seen: dict[str, str] = {}
    for a in out:
        n = normal_address(a)
        if n in seen:
            raise ValueError(f"addresses {seen[n]!r} and {a!r} name the same daemon")
        seen[n] = a
    return out


class Fleet:
    """The addresses, and which of them failed lately (thread-safe)."""

    def __init__(self, addresses: Sequence[str], *, down_for: float):
        self.addresses = check_addresses(addresses)
        self.down_for = down_for
        self._down_until = [0.0] * len(self.addresses)
        self._lock = threading.Lock()

    def order(self, agent_id: str) -> list[int]:
        """The agent's order with the daemons marked down moved to the end (still tried,
        in order, when every daemon is down)."""
        now = time.monotonic()
        order = rendezvous_order(self.addresses, agent_id)
        with self._lock:
            up = [i for i in order if self._down_until[i] <= now]
        return up + [i for i in order if i not in up]

    def is_down(self, index: int) -> bool:
        with self._lock:
            return self._down_until[index] > time.monotonic()

    def mark_down(self, index: int) -> None:
        with self._lock:
            self._down_until[index] = time.monotonic() + self.down_for

    def mark_up(self, index: int) -> None:
        with self._lock:
            self._down_until[index] = 0.0
