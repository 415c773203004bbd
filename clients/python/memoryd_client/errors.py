"""The client's exception tree: every failed call raises a :class:`MemorydError`, of the
subclass named after its gRPC status, so a caller catches what it can handle::

    MemorydError               .code (grpc.StatusCode), .details / .message (the daemon's
    │                          text), .retry_after (seconds, or None), .trailers
    ├── InvalidArgument        bad input; nothing was changed (the message says what to fix)
    ├── NotFound               no such memory, or not one this agent may see
    ├── PermissionDenied       the credential may not act for that agent or scope
    ├── Unauthenticated        missing or wrong credential
    ├── FailedPrecondition     valid, but the daemon's state forbids it (e.g. settings)
    ├── ResourceExhausted      a rate limit, a full queue (.retry_after set: nothing was
    │                          done, send it again then) or a full disk; alias Overloaded
    ├── Unavailable            no daemon at the address, or it is starting or stopping
    ├── DeadlineExceeded       the call did not finish within its deadline
    ├── DataLoss               stored data cannot be read
    ├── Cancelled              the call was cancelled (by this side)
    ├── Unimplemented          the daemon does not know this RPC (an older daemon)
    ├── Internal               a bug in the daemon; the message names an incident id
    └── Unknown                a status the daemon did not set (e.g. a broken proxy)

It mirrors the daemon's tree (``memoryd.core.errors``) through the status codes the
daemon maps it to (NotReady arrives as Unavailable, StorageFull and Overloaded as
ResourceExhausted, DataCorrupt as DataLoss, ConfigError as FailedPrecondition).
``MemorydError(code, message)`` still works and ``except MemorydError`` still catches
every failure; :func:`error_from_rpc` picks the subclass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

__all__ = [
    "Cancelled",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "MemorydError",
    "NotFound",
    "Overloaded",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "error_for",
    "error_from_rpc",
]


class MemorydError(Exception):
    """A failed call: ``code`` is the grpc.StatusCode, ``details`` (also ``message``) the
    daemon's text, ``retry_after`` how many seconds the daemon asked the caller to wait
    (trailer ``retry-after-ms``), ``trailers`` every trailing metadata pair it sent."""

    code: grpc.StatusCode

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        retry_after: float | None = None,
        trailers: Sequence[tuple[str, str | bytes]] = (),
    ):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.trailers = tuple(trailers)

    @property
    def details(self) -> str:
        """The daemon's message (grpc's name for it: ``RpcError.details()``)."""
        return self.message

    @classmethod
    def from_rpc(cls, error: grpc.RpcError) -> MemorydError:
        """The exception of the subclass for ``error``'s status (kept for older callers)."""
        return error_from_rpc(error)


class InvalidArgument(MemorydError):
    pass


class NotFound(MemorydError):
    pass


class PermissionDenied(MemorydError):
    pass


class Unauthenticated(MemorydError):
    pass


class FailedPrecondition(MemorydError):
    pass


class ResourceExhausted(MemorydError):
    pass


Overloaded = ResourceExhausted
"""The daemon's name for a refused call it asks to be sent again (``retry_after``)."""


class Unavailable(MemorydError):
    pass


class DeadlineExceeded(MemorydError):
    pass


class DataLoss(MemorydError):
    pass


class Cancelled(MemorydError):
    pass


class Unimplemented(MemorydError):
    pass


class Internal(MemorydError):
    pass


class Unknown(MemorydError):
    pass


# Each status code's class; a code not here (ALREADY_EXISTS, ABORTED, OUT_OF_RANGE:
# memoryd sends none of them) raises the base class.
ERROR_CLASSES: dict[grpc.StatusCode, type[MemorydError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNKNOWN: Unknown,
}


def error_for(
    code: grpc.StatusCode,
    message: str,
    *,
    retry_after: float | None = None,
    trailers: Sequence[tuple[str, str | bytes]] = (),
) -> MemorydError:
    """The exception of the class for ``code``."""
    cls = ERROR_CLASSES.get(code, MemorydError)
    return cls(code, message, retry_after=retry_after, trailers=trailers)


def error_from_rpc(error: grpc.RpcError) -> MemorydError:
    """``error`` (sync or asyncio grpc) as a MemorydError, keeping its status code, its
    message and its trailing metadata."""
    rpc: Any = error
    code = rpc.code() if hasattr(rpc, "code") else grpc.StatusCode.UNKNOWN
    details = rpc.details() if hasattr(rpc, "details") else str(error)
    trailers = tuple(_trailers(rpc))
    return error_for(
        code, details or "", retry_after=retry_after_of(code, trailers), trailers=trailers
    )


def _trailers(rpc: Any) -> list[tuple[str, str | bytes]]:
    metadata = rpc.trailing_metadata() if hasattr(rpc, "trailing_metadata") else None
    return [(str(key), value) for key, value in metadata or ()]


def retry_after_of(
    code: grpc.StatusCode, trailers: Sequence[tuple[str, str | bytes]]
) -> float | None:
    """Seconds the daemon asked the caller to wait (trailer ``retry-after-ms``, sent with
    RESOURCE_EXHAUSTED when a rate limit or a full queue refused the call before doing
    anything: such a call is safe to send again, idempotent or not), at most 30."""
    if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    for key, value in trailers:
        if key == "retry-after-ms":
            try:
                return min(30.0, max(0.0, int(value) / 1000.0))
            except ValueError:
                return None
    return None
