"""Python client for memoryd: a thin, typed wrapper over the generated gRPC stubs.

    from memoryd_client import MemoryClient
    with MemoryClient("127.0.0.1:50051") as client:
        client.store("main", "The user prefers dark mode")
        for hit in client.recall("main", "which theme?").results:
            print(hit.score, hit.memory.text)

``AsyncMemoryClient`` is the same API for asyncio, plus ``stream()`` for the
bidirectional Stream RPC. Responses are the generated protobuf messages (``pb``).
Every failed call raises a ``MemorydError`` of the subclass named after its gRPC status
(``NotFound``, ``InvalidArgument``, ``Unavailable``, ...; the tree is drawn in
``memoryd_client.errors``), all importable from here::

    from memoryd_client import NotFound
    try:
        client.get("main", memory_id)
    except NotFound:
        ...

Both clients also take a list of daemon addresses (a fleet serving one store): each call
goes to its agent's daemon and fails over to the next (``routing`` has the rule).

Submodules: ``errors`` (the exception tree), ``routing`` (agent affinity and failover over
several daemons; standard library only), ``untrusted`` (escaping recalled text for a
model; standard library only),
``mcp_server`` (``memoryd mcp``, needs the ``mcp`` extra). The names above are loaded on
first use, so importing ``memoryd_client.untrusted`` does not load grpc.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
    from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
    from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
    from memoryd_client.client import AsyncMemoryClient, MemoryClient, tls_credentials
    from memoryd_client.errors import (
        Cancelled,
        DataLoss,
        DeadlineExceeded,
        FailedPrecondition,
        Internal,
        InvalidArgument,
        MemorydError,
        NotFound,
        Overloaded,
        PermissionDenied,
        ResourceExhausted,
        Unauthenticated,
        Unavailable,
        Unimplemented,
        Unknown,
    )

__all__ = [
    "AsyncMemoryClient",
    "Cancelled",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "MemoryClient",
    "MemorydError",
    "NotFound",
    "Overloaded",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "hooks_pb",
    "pb",
    "review_pb",
    "tls_credentials",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    value: Any
    if name == "pb":
        from memoryd_client._gen.memoryd.v1 import memory_pb2 as value
    elif name == "hooks_pb":
        from memoryd_client._gen.memoryd.v1 import hooks_pb2 as value
    elif name == "review_pb":
        from memoryd_client._gen.memoryd.v1 import review_pb2 as value
    elif name in ("AsyncMemoryClient", "MemoryClient", "tls_credentials"):
        from memoryd_client import client

        value = getattr(client, name)
    else:
        errors = importlib.import_module("memoryd_client.errors")  # not "from . import":
        if name not in errors.__all__:  # that would ask this function for "errors"
            raise AttributeError(f"module 'memoryd_client' has no attribute {name!r}")
        value = getattr(errors, name)
    globals()[name] = value  # loaded once; later lookups do not come here
    return value
