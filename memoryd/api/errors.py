"""The one table from domain errors to gRPC status codes, and the translation of an
exception into what the caller receives (status code, capped message, trailers).

Servicers raise ``core.errors`` exceptions and never call ``context.abort`` themselves;
the interceptor in ``memoryd.api.interceptors`` applies this translation. Anything
unexpected becomes INTERNAL with a generic message naming an incident id; the traceback
goes to the log, never to the caller.
"""

from __future__ import annotations

import logging
import uuid

import grpc

from memoryd.core import errors as e

log = logging.getLogger("memoryd.api")

STATUS: dict[type[e.MemorydError], grpc.StatusCode] = {
    e.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    e.NotFound: grpc.StatusCode.NOT_FOUND,
    e.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    e.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    e.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    e.Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    e.NotReady: grpc.StatusCode.UNAVAILABLE,
    e.DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    e.DataCorrupt: grpc.StatusCode.DATA_LOSS,
    # gRPC's own definition: "perhaps the entire file system is out of space". Not
    # UNAVAILABLE: the clients retry that within seconds, which a full disk outlasts.
    e.StorageFull: grpc.StatusCode.RESOURCE_EXHAUSTED,
    # An outage of the object store is transient: the clients' retries of UNAVAILABLE are
    # what a caller should do (the daemon probes the store and resumes by itself).
    e.StoreUnavailable: grpc.StatusCode.UNAVAILABLE,
    e.ConfigError: grpc.StatusCode.FAILED_PRECONDITION,
}


# A status message travels in the grpc-message trailer, percent-encoded (a non-ASCII byte
# becomes 3), and trailers are limited to 16 KiB by default: past that the caller got
# RESOURCE_EXHAUSTED "Stream removed" instead of the error. 1000 chars stay far below.
MAX_MESSAGE_CHARS = 1000


def cap_message(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message``, cut to ``limit`` chars with a note of how much was left out."""
    if len(message) <= limit:
        return message
    cut = limit - 40
    return f"{message[:cut]}... ({len(message) - cut} more chars)"


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status and the caller-safe message for any exception."""
    for cls in type(error).__mro__:
        code = STATUS.get(cls)
        if code is not None:
            return code, cap_message(str(error))
    incident = uuid.uuid4().hex[:12]
    log.error("unexpected error (incident %s)", incident, exc_info=error)
    return grpc.StatusCode.INTERNAL, f"internal error (incident {incident}); see the daemon log"


def trailers_of(error: BaseException) -> tuple[tuple[str, str], ...]:
    """Trailing metadata an error carries: ``retry-after-ms`` when the caller should wait."""
    after = getattr(error, "retry_after", None)
    return (("retry-after-ms", str(max(1, round(after * 1000)))),) if after else ()
