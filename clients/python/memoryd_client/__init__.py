"""Python client for memoryd: a thin, typed wrapper over the generated gRPC stubs.

    from memoryd_client import MemoryClient
    with MemoryClient("127.0.0.1:50051") as client:
        client.store("main", "The user prefers dark mode")
        for hit in client.recall("main", "which theme?").results:
            print(hit.score, hit.memory.text)

``AsyncMemoryClient`` is the same API for asyncio, plus ``stream()`` for the
bidirectional Stream RPC. Responses are the generated protobuf messages (``pb``).
"""

from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client.client import AsyncMemoryClient, MemoryClient, MemorydError

__all__ = ["AsyncMemoryClient", "MemoryClient", "MemorydError", "hooks_pb", "pb"]
__version__ = "0.1.0"
