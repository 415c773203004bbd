"""Where a memory's bytes go in the daemon's memory: the hot index, part by part.

Loads ``--memories`` LoCoMo turns (padded by repeating them with a suffix) into the hot
index the daemon uses (``storage.hot_index.HotIndex``), in one agent, the way a daemon
loads its store at start, and counts the bytes Python allocates for it with
``tracemalloc``, grouped by the line that allocated them. Vectors are random unit vectors
and token vectors random int8 rows (their bytes do not depend on their values); the
number of token vectors per memory is the real one: what the shipped model's tokenizer
makes of each turn, capped at ``recall.token_vectors_max`` (64) as the daemon does; they
go to the index's token file (``storage/token_file.py``, in a temporary directory here),
whose size is reported apart: it is on disk and in the kernel's page cache, not in the
daemon's heap. The records themselves (text, id, hash, dates) are counted apart, from
``sys.getsizeof``.

No timing: the figures are bytes, so they hold on a busy machine too.

    ./dev bench index_bytes.py                     # 10,000 memories
    ./dev bench index_bytes.py --memories 100000
    ./dev bench index_bytes.py --memories 100000 --rss   # VmRSS growth, no tracemalloc

``--rss`` reports instead what the process's resident set grew by while the records were
made and loaded (no tracemalloc, whose own bookkeeping would swell it), per memory, plus
the texts' bytes (made before): the allocator's slack included, the page cache of the
token file not (it is the kernel's).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import tempfile
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from memoryd.core.records import Category, Memory
from memoryd.inference.onnx_embedder import builtin_model_files
from memoryd.storage.hot_index import HotIndex
from memoryd.storage.repository import quantize_tokens

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"
TOKENS_MAX = 64  # recall.token_vectors_max's default

# What each allocating line holds (file:function), for the report.
PARTS = {
    "token_file.py": "token vectors' bookkeeping (the vectors are in the token file)",
    "hot_index.py": "per-row arrays (vectors, int8 codes, dates, flags, token offsets), id maps",
    "lexical.py": "BM25 postings and document lengths",
}


def turns(path: Path) -> list[str]:
    out = []
    for conv in json.loads(path.read_text()):
        for key, session in conv["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                out.extend(f"{t['speaker']}: {t['text']}" for t in session)
    return out


def records(texts: list[str], rng: np.random.Generator) -> list[Memory]:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        Memory(
            id=str(uuid.UUID(int=int(rng.integers(0, 2**63)))),
            agent_id="a",
            scope="agent:a",
            text=text,
            summary="",
            category=Category.FACT,
            importance=0.5,
            created_at=at + timedelta(seconds=i),
            updated_at=at + timedelta(seconds=i),
            content_hash=hashlib.sha256(text.encode()).hexdigest(),
            language="en",
        )
        for i, text in enumerate(texts)
    ]


def record_bytes(m: Memory) -> int:
    size = sys.getsizeof
    return (
        size(m)
        + size(m.text)
        + size(m.id)
        + size(m.content_hash)
        + size(m.created_at)
        + size(m.updated_at)
        + size(m.metadata)
        + size(m.related_ids)
    )


def vm_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def rss_run(
    texts: list[str], counts: list[int], vectors: np.ndarray, rng: np.random.Generator
) -> None:
    n = len(texts)
    token_sets = [
        quantize_tokens(rng.standard_normal((c, 384)).astype(np.float32) / 20, TOKENS_MAX)
        for c in counts[:1000]
    ]  # reused round robin: made before, so their bytes are not counted
    tmp = tempfile.TemporaryDirectory(prefix="index-bytes-")
    gc.collect()
    before = vm_rss()
    memories = records(texts, rng)
    index = HotIndex(384, token_path=Path(tmp.name) / "tokens.bin")
    with index.bulk_load():
        for i, m in enumerate(memories):
            index.put(m, vectors[i], token_sets[i % len(token_sets)])
    gc.collect()
    grown = vm_rss() - before
    text_bytes = sum(sys.getsizeof(t) for t in texts)
    per = (grown + text_bytes) / n
    print(f"## Hot index RSS per memory: {n:,} LoCoMo turns in one agent\n")
    print(f"VmRSS grew {grown / 2**20:,.1f} MiB while {n:,} records were made and loaded;")
    print(f"with the texts ({text_bytes / n:,.0f} B per memory, made before): {per:,.0f} B each.")
    print(f"\n`./dev bench index_bytes.py --memories {n} --rss`")
    index.close()
    tmp.cleanup()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000, help="memories in the index")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo's locomo10.json")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rss", action="store_true", help="report VmRSS growth instead")
    args = p.parse_args()

    base = turns(args.data)
    n = args.memories
    texts = [
        t if i < len(base) else f"{t} [{i}]"
        for i, t in enumerate((base * (n // len(base) + 1))[:n])
    ]
    tokenizer = Tokenizer.from_file(str(builtin_model_files().tokenizer))
    tokenizer.no_padding()  # its tokenizer.json pads to a fixed length; the daemon resets it too
    counts = [min(TOKENS_MAX, len(e.ids) - 2) for e in tokenizer.encode_batch(texts)]
    rng = np.random.default_rng(args.seed)
    vectors = rng.standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    if args.rss:
        rss_run(texts, counts, vectors, rng)
        return
    memories = records(texts, rng)

    tmp = tempfile.TemporaryDirectory(prefix="index-bytes-")
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    index = HotIndex(384, token_path=Path(tmp.name) / "tokens.bin")
    with index.bulk_load():
        for i, m in enumerate(memories):
            tokens = rng.standard_normal((counts[i], 384)).astype(np.float32) / 20
            index.put(m, vectors[i], quantize_tokens(tokens, TOKENS_MAX))
            del tokens
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    token_file_bytes = (Path(tmp.name) / "tokens.bin").stat().st_size

    by_file: dict[str, int] = {}
    for stat in after.compare_to(before, "filename"):
        name = Path(stat.traceback[0].filename).name
        key = name if name in PARTS else "other (Python's own structures)"
        by_file[key] = by_file.get(key, 0) + stat.size_diff
    recs = sum(record_bytes(m) for m in memories) / n
    total = sum(by_file.values()) / n + recs

    part = next(iter(index._parts.values()))
    print(f"## Hot index bytes per memory: {n:,} LoCoMo turns in one agent\n")
    print(
        f"Token vectors per memory: mean {np.mean(counts):.1f} (cap {TOKENS_MAX}); "
        f"row arrays sized for {part.vectors.shape[0]:,} rows (trimmed after the load); "
        f"token file on disk {token_file_bytes / n:,.0f} B per memory (page cache, not heap).\n"
    )
    print("| what | bytes per memory | share |")
    print("|---|---|---|")
    for key, size in sorted(by_file.items(), key=lambda kv: -kv[1]):
        label = PARTS.get(key, key)
        print(f"| {label} | {size / n:,.0f} | {size / n / total:.0%} |")
    label = "records (text, id, hash, dates; the Memory objects)"
    print(f"| {label} | {recs:,.0f} | {recs / total:.0%} |")
    print(f"| **total** | **{total:,.0f}** | |")
    print(f"\n`./dev bench index_bytes.py --memories {n}`")
    index.close()
    tmp.cleanup()


if __name__ == "__main__":
    main()
