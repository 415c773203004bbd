"""Python client for memoryd: a thin, typed wrapper over the generated gRPC stubs.

    from memoryd_client import MemoryClient
    with MemoryClient("127.0.0.1:50051") as client:
        client.store("main", "The user prefers dark mode")
        for hit in client.recall("main", "which theme?").results:
            print(hit.score, hit.memory.text)

``AsyncMemoryClient`` is the same API for asyncio, plus ``stream()`` for the
bidirectional Stream RPC. Responses are the generated protobuf messages (``pb``).

Submodules: ``untrusted`` (escaping recalled text for a model; standard library only),
``mcp_server`` (``memoryd mcp``, needs the ``mcp`` extra). The names above are loaded on
first use, so importing ``memoryd_client.untrusted`` does not load grpc.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
    from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
    from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
    from memoryd_client.client import (
        AsyncMemoryClient,
        MemoryClient,
        MemorydError,
        tls_credentials,
    )

__all__ = [
    "AsyncMemoryClient",
    "MemoryClient",
    "MemorydError",
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
    elif name in ("AsyncMemoryClient", "MemoryClient", "MemorydError", "tls_credentials"):
        from memoryd_client import client

        value = getattr(client, name)
    else:
        raise AttributeError(f"module 'memoryd_client' has no attribute {name!r}")
    globals()[name] = value  # loaded once; later lookups do not come here
    return value
