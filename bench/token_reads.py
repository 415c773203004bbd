"""What reading a Recall's rerank candidates' token vectors from the token file costs.

The hot index keeps token vectors in a local file (``storage/token_file.py``) and the
late-interaction reranker reads the ``recall.rerank_top`` (20) candidates' with one
``os.pread`` each. This loads ``--memories`` memories with 35 int8 token vectors each
(LoCoMo's mean) and times, per simulated Recall of 20 random candidates: the reads
(``HotIndex.tokens_of``, page cache warm), the same from a dict of arrays in memory (what
the index did before), and the MaxSim kernel over them (what the rerank does next), so the
read is seen against the work it feeds. Medians of ``--rounds``.

    ./dev bench token_reads.py
    ./dev bench token_reads.py --memories 100000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from memoryd_native import maxsim

from memoryd.core.records import Category, Memory
from memoryd.storage.hot_index import HotIndex

DIM = 384
TOKENS = 35
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--candidates", type=int, default=20)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    pool = [rng.integers(-127, 128, (TOKENS, DIM)).astype(np.int8) for _ in range(256)]
    with tempfile.TemporaryDirectory(prefix="token-reads-") as tmp:
        index = HotIndex(DIM, token_path=Path(tmp) / "tokens.bin")
        held: dict[str, np.ndarray] = {}
        vector = np.zeros(DIM, np.float32)
        vector[0] = 1.0
        with index.bulk_load():
            for i in range(args.memories):
                memory_id = f"m{i:08d}"
                m = Memory(
                    id=memory_id,
                    agent_id="a",
                    scope="agent:a",
                    text=f"t{i}",
                    summary="",
                    category=Category.FACT,
                    importance=0.5,
                    created_at=NOW,
                    updated_at=NOW,
                    language="en",
                )
                index.put(m, vector, pool[i % len(pool)])
                held[memory_id] = pool[i % len(pool)]
        for i in range(args.memories):  # warm the page cache, as a serving daemon's is
            index.tokens_of(f"m{i:08d}")
        q = rng.standard_normal((8, DIM)).astype(np.float32) / 127.0
        from_file, from_dict, kernel = [], [], []
        for _ in range(args.rounds):
            ids = [f"m{int(i):08d}" for i in rng.integers(0, args.memories, args.candidates)]
            t0 = time.perf_counter()
            docs = [index.tokens_of(i) for i in ids]
            t1 = time.perf_counter()
            same = [held[i] for i in ids]
            t2 = time.perf_counter()
            flat = np.concatenate([d for d in docs if d is not None])
            offsets = np.arange(0, (len(ids) + 1) * TOKENS, TOKENS, dtype=np.int64)
            maxsim(q, flat, offsets)
            t3 = time.perf_counter()
            assert all(
                d is not None and np.array_equal(d, s) for d, s in zip(docs, same, strict=True)
            )
            from_file.append(t1 - t0)
            from_dict.append(t2 - t1)
            kernel.append(t3 - t2)
        index.close()
    us = 1e6
    print(
        f"{args.candidates} candidates' token vectors ({TOKENS} x {DIM} int8 each), "
        f"{args.memories:,} memories, medians of {args.rounds:,}, microseconds:"
    )
    print(
        f"  read from the token file (pread, page cache): {statistics.median(from_file) * us:,.1f}"
    )
    print(
        f"  from a dict in memory (before):               {statistics.median(from_dict) * us:,.1f}"
    )
    print(f"  concatenate + MaxSim over them (the rerank):  {statistics.median(kernel) * us:,.1f}")
    print(f"\n`./dev bench token_reads.py --memories {args.memories}`")


if __name__ == "__main__":
    main()
