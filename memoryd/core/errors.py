"""The one exception tree of memoryd.

Every error the domain raises on purpose is a :class:`MemorydError`; the gRPC edge maps
each class to a status code in one table (``memoryd.api.errors``). Anything else that
escapes is a bug and is answered as INTERNAL with a generic message.

    MemorydError
    ├── InvalidArgument      bad input; nothing was changed
    ├── NotFound             no such memory, or not one the caller may see
    ├── PermissionDenied     the caller may not touch that scope
    ├── Unauthenticated      missing or wrong credentials on the wire
    ├── FailedPrecondition   the request is valid but the state forbids it
    ├── Overloaded           too much work queued; retry later
    ├── NotReady             the daemon is still starting (models, index)
    ├── DeadlineExceeded     the work did not finish within its budget
    ├── DataCorrupt          stored data cannot be read or does not match this daemon
    ├── StorageFull          the disk holding the data is full; nothing was written
    ├── StoreUnavailable     the object store holding the data cannot be reached; retry later
    └── ConfigError          settings are invalid (raised at start, names the field)

There is no AlreadyExists: no call creates a record under a key the caller chooses and
could collide on (Import skips an id it already holds and counts it; Store answers a
duplicate text with its outcome, DUPLICATE).
"""

from __future__ import annotations

from collections.abc import Iterable


class MemorydError(Exception):
    """Base of every error memoryd raises on purpose. ``str(e)`` is safe to show a caller."""


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


class Overloaded(MemorydError):
    """``retry_after``: seconds after which the same call may succeed, when known (the
    gRPC edge sends it as the trailer ``retry-after-ms``; the clients wait that long)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class NotReady(MemorydError):
    pass


class DeadlineExceeded(MemorydError):
    pass


class DataCorrupt(MemorydError):
    pass


class StorageFull(MemorydError):
    pass


class StoreUnavailable(MemorydError):
    """The object store (storage.uri = s3://...) did not answer a write; nothing of it is
    acknowledged. Reads go on from memory; writes resume by themselves once it answers."""


class ConfigError(MemorydError):
    pass


ALL_ERRORS: tuple[type[MemorydError], ...] = (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    FailedPrecondition,
    Overloaded,
    NotReady,
    DeadlineExceeded,
    DataCorrupt,
    StorageFull,
    StoreUnavailable,
    ConfigError,
)


def name_few(items: Iterable[str], few: int = 5) -> str:
    """``items`` for a message: the first ``few``, then "and N more" (a caller may send
    thousands: a message naming each one outgrows the status trailer)."""
    listed = list(items)
    if len(listed) <= few:
        return ", ".join(listed)
    return f"{', '.join(listed[:few])} and {len(listed) - few} more"
