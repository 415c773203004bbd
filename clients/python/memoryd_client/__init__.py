"""Python client for memoryd: a thin, typed wrapper over the generated gRPC stubs.

    from memoryd_client import MemoryClient
    with MemoryClient("127.0.0.1:50051") as client:
        client.store("main", "The user prefers dark mode")
        for hit in client.recall("main", "which theme?").results:
            print(hit.score, hit.memory.text)

``AsyncMemoryClient`` is the same API for asyncio, plus ``stream()`` for the
bidirectional Stream RPC. Responses are the generated protobuf messages (``pb``).
"""

from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
from memoryd_client.client import AsyncMemoryClient, MemoryClient, MemorydError, tls_credentials

__all__ = [
    "AsyncMemoryClient",
    "MemoryClient",
    "MemorydError",
    "pb",
    "review_pb",
    "tls_credentials",
]
__version__ = "0.1.0"
