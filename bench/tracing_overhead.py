"""What tracing costs, in process: with ``[tracing] exporter = "none"`` (the default)
and with spans made and kept.

Part 1, the primitives, nanoseconds per call (median of ``--batches`` batches of
``--n`` calls): an empty loop; a stage span and a ``note`` with tracing off (what every
Recall and Store pays by default); the same with a tracer installed (an SDK span into an
in-memory exporter); the Python client's trace-context hook with no active span and with
one.

Part 2, a Recall over real gRPC on loopback (this process: the daemon's servicer and
interceptors over a small LanceDB store with a word-hash embedder, so the figure is
gRPC + the pipeline, not the model), microseconds per call, median and p90 of
``--calls`` calls per round, rounds alternating: the daemon as built with tracing off
(no tracing interceptor, no tracer) and with tracing on (interceptor, stage spans, an
in-memory exporter), and the client sending a traceparent in the second case.

    python bench/tracing_overhead.py                       # defaults
    python bench/tracing_overhead.py --n 20000 --calls 200 --rounds 2   # a quick check
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
from memoryd_client import AsyncMemoryClient
from memoryd_client.tracing import trace_headers
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryd.api.interceptors import ErrorMappingInterceptor
from memoryd.api.metrics import Metrics, MetricsInterceptor
from memoryd.api.servicer import (
    HookServicer,
    MemoryServicer,
    ReviewServicer,
    add_servicers_to_server,
)
from memoryd.api.tracing import TracingInterceptor
from memoryd.core import tracing
from memoryd.core.policy import AccessPolicy
from memoryd.core.service import MemoryService, NewMemory, ServiceLimits
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository

DIM = 384


class HashEmbedder:
    model_name = "word-hash-bench"
    dim = DIM

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        return v / (np.linalg.norm(v) or 1.0)

    async def embed_query(self, text: str) -> np.ndarray:
        return self.vector(text)

    async def embed_document(self, text: str) -> np.ndarray:
        return self.vector(text)


def per_call_ns(body: Callable[[], None], n: int, batches: int) -> float:
    times = []
    for _ in range(batches):
        started = time.perf_counter_ns()
        for _ in range(n):
            body()
        times.append((time.perf_counter_ns() - started) / n)
    return statistics.median(times)


def primitives(n: int, batches: int) -> list[tuple[str, float]]:
    def empty() -> None:
        pass

    def stage() -> None:
        with tracing.span("candidates", pool=20):
            pass

    def note() -> None:
        tracing.note("cache_hit", True)

    rows = [("empty loop", per_call_ns(empty, n, batches))]
    tracing.install(None)
    rows.append(("stage span, tracing off", per_call_ns(stage, n, batches)))
    rows.append(("note, tracing off", per_call_ns(note, n, batches)))
    rows.append(("client hook, no active span", per_call_ns(trace_headers, n, batches)))
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    with tracer.start_as_current_span("app"):
        rows.append(("client hook, active span", per_call_ns(trace_headers, n, batches)))
        tracing.install(tracer)
        small = max(1, n // 10)  # kept spans pile up in memory: fewer of them
        rows.append(("stage span, tracing on", per_call_ns(stage, small, batches)))
        exporter.clear()
        rows.append(("note, tracing on", per_call_ns(note, n, batches)))
    tracing.install(None)
    provider.shutdown()
    return rows


async def recall_rounds(calls: int, rounds: int, memories: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        store = LanceStore(str(Path(tmp) / "db"), table="memories", model_name="b", dim=DIM)
        repo = Repository(store)
        repo.open()
        service = MemoryService(
            repo, HashEmbedder(), AccessPolicy(agents={}), ServiceLimits(max_chars=1000)
        )
        for i in range(memories):
            await service.store_memory(
                NewMemory(agent_id="bench", text=f"memory {i} about topic {i % 17} item {i * 7}")
            )
        provider = TracerProvider()
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("memoryd")
        app = provider.get_tracer("app")
        samples: dict[str, list[float]] = {"off": [], "on": []}
        servers = {}
        for mode in ("off", "on"):
            interceptors: list[grpc.aio.ServerInterceptor] = [MetricsInterceptor(Metrics())]
            if mode == "on":
                interceptors.append(TracingInterceptor(tracer))
            interceptors.append(ErrorMappingInterceptor())
            server = grpc.aio.server(interceptors=interceptors)
            servicer = MemoryServicer()
            servicer.set_service(service)
            add_servicers_to_server(server, servicer, HookServicer(), ReviewServicer())
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            servers[mode] = (server, f"127.0.0.1:{port}")
        try:
            for _ in range(rounds):
                for mode in ("off", "on"):
                    tracing.install(tracer if mode == "on" else None)
                    async with AsyncMemoryClient(servers[mode][1], retries=0) as client:
                        for i in range(calls // 10):  # warm the connection
                            await client.recall("bench", f"topic {i}")
                        for i in range(calls):
                            started = time.perf_counter()
                            if mode == "on":
                                with app.start_as_current_span("app"):
                                    await client.recall("bench", f"topic {i % 17}")
                            else:
                                await client.recall("bench", f"topic {i % 17}")
                            samples[mode].append((time.perf_counter() - started) * 1e6)
                    exporter.clear()
        finally:
            tracing.install(None)
            for server, _ in servers.values():
                await server.stop(None)
            repo.close()
            provider.shutdown()
        return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="calls per primitive batch")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000, help="Recalls per round and mode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memories", type=int, default=500)
    args = parser.parse_args()

    print("| primitive | ns per call |\n|---|---|")
    for name, ns in primitives(args.n, args.batches):
        print(f"| {name} | {ns:.0f} |")
    print("timing Recalls ...", file=sys.stderr)
    samples = asyncio.run(recall_rounds(args.calls, args.rounds, args.memories))
    print("\n| Recall over loopback gRPC | p50 us | p90 us | calls |\n|---|---|---|---|")
    for mode, label in (("off", "tracing off"), ("on", "tracing on (spans kept)")):
        s = sorted(samples[mode])
        p90 = s[int(0.9 * (len(s) - 1))]
        print(f"| {label} | {statistics.median(s):.0f} | {p90:.0f} | {len(s)} |")


if __name__ == "__main__":
    main()
