"""The daemon's resident memory per memory after loading its store: the real load path.

Writes ``--memories`` LoCoMo turns (padded with a suffix past the real ones) with random
unit vectors and random int8 token vectors (LoCoMo's real count per turn, capped at 64)
into a LanceDB store in a temporary directory, then, in a fresh process, measures VmRSS
before and after ``Repository.open`` (what ``memoryd serve`` does at start: the scan of
the table, the token file written, the hot index built) and reports the growth per
memory. The model and the gRPC server are not loaded: they cost the same at any size.
The token file's page cache is the kernel's and not in VmRSS.

    ./dev bench load_rss.py --memories 100000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import hashlib
import subprocess
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent.parent / "shared" / "datasets" / "locomo" / "locomo10.json"


def vm_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def write_store(path: Path, n: int, data: Path) -> None:
    from index_bytes import TOKENS_MAX, turns
    from tokenizers import Tokenizer

    from memoryd.core.records import Category, Memory
    from memoryd.inference.onnx_embedder import builtin_model_files
    from memoryd.storage.lance_store import LanceStore

    base = turns(data)
    texts = [
        t if i < len(base) else f"{t} [{i}]"
        for i, t in enumerate((base * (n // len(base) + 1))[:n])
    ]
    tokenizer = Tokenizer.from_file(str(builtin_model_files().tokenizer))
    tokenizer.no_padding()
    counts = [min(TOKENS_MAX, len(e.ids) - 2) for e in tokenizer.encode_batch(texts)]
    rng = np.random.default_rng(0)
    store = LanceStore(str(path), table="m", model_name="x", dim=384, compact_every=10**9)
    store.start()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    batch = 5000
    for start in range(0, n, batch):
        rows = []
        for i in range(start, min(n, start + batch)):
            v = rng.standard_normal(384).astype(np.float32)
            v /= np.linalg.norm(v)
            tokens = rng.integers(-127, 128, (counts[i], 384)).astype(np.int8)
            m = Memory(
                id=str(uuid.UUID(int=int(rng.integers(0, 2**63)))),
                agent_id="a",
                scope="agent:a",
                text=texts[i],
                summary="",
                category=Category.FACT,
                importance=0.5,
                created_at=at + timedelta(seconds=i),
                updated_at=at + timedelta(seconds=i),
                content_hash=hashlib.sha256(texts[i].encode()).hexdigest(),
                language="en",
            )
            rows.append((m, v, tokens))
        await store.add(rows)
    store.close()


def measure(path: Path, arena_max: int) -> None:
    if arena_max:  # glibc's M_ARENA_MAX, set before LanceDB's threads first allocate
        ctypes.CDLL("libc.so.6").mallopt(-8, arena_max)
    from memoryd.storage.lance_store import LanceStore
    from memoryd.storage.repository import Repository

    # An empty store opened and closed first: what any start costs (imports, the kernels'
    # compiled code, LanceDB's runtime) is then in ``before``, not in the growth.
    empty = Repository(
        LanceStore(str(path / "empty"), table="m", model_name="x", dim=384),
        token_path=path / "data" / "empty-tokens.bin",
    )
    empty.open()
    empty.search(np.ones(384, np.float32), ["agent:a"], 5, now=datetime.now(UTC))
    empty.close()
    gc.collect()
    before = vm_rss()
    # The start that rewrites the token file (as after a crash, or the first start): a map
    # left by an earlier run's clean close would make it reuse the file (token_map.py;
    # bench/token_reuse.py measures that start).
    from memoryd.storage import token_map

    token_map.remove(token_map.map_path(path / "data" / "tokens.bin"))
    repo = Repository(
        LanceStore(str(path / "lancedb"), table="m", model_name="x", dim=384),
        token_path=path / "data" / "tokens.bin",
    )
    repo.open()
    gc.collect()
    after = vm_rss()
    trimmed = after
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        trimmed = vm_rss()
    n = len(repo)
    tokens = (path / "data" / "tokens.bin").stat().st_size
    print(f"## Daemon load RSS: {n:,} memories\n")
    print(f"VmRSS {before / 2**20:,.0f} MiB before Repository.open, {after / 2**20:,.0f} after:")
    print(f"{(after - before) / n:,.0f} B per memory; token file {tokens / n:,.0f} B per memory")
    print(
        f"(on disk and in the page cache, not in VmRSS); index_bytes {repo.index_bytes() / n:,.0f}"
    )
    print(f"after malloc_trim(0): {trimmed / 2**20:,.0f} MiB, {(trimmed - before) / n:,.0f} B each")
    repo.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo's locomo10.json")
    p.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--keep", type=Path, help="write the store here once and reuse it")
    p.add_argument("--arena-max", type=int, default=0, help="glibc M_ARENA_MAX (0: default)")
    args = p.parse_args()
    if args.measure:
        measure(args.measure, args.arena_max)
        return
    if args.keep:
        if not (args.keep / "lancedb").exists():
            asyncio.run(write_store(args.keep / "lancedb", args.memories, args.data))
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--measure",
                str(args.keep),
                "--arena-max",
                str(args.arena_max),
            ],
            check=True,
        )
        return
    with tempfile.TemporaryDirectory(prefix="load-rss-") as tmp:
        asyncio.run(write_store(Path(tmp) / "lancedb", args.memories, args.data))
        subprocess.run(
            [sys.executable, __file__, "--measure", tmp, "--arena-max", str(args.arena_max)],
            check=True,
        )
    print(f"\n`./dev bench load_rss.py --memories {args.memories}`")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
