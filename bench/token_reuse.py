"""A start with the token file rewritten or reused (issue 17): bytes read and written, time.

Writes the store of ``load_rss.py`` (``--memories`` LoCoMo turns with random unit vectors
and random int8 token vectors of the turns' real token counts, capped at 64; ``--keep DIR``
writes it once and reuses it), then opens it with ``Repository.open`` as ``memoryd serve``
does, each start in a fresh process, ``--runs`` times each way:

- rewritten: the map beside the token file removed first (a first start, or one after a
  crash), so the table is read with its token-vector column and ``tokens.bin`` written
  afresh; its clean ``close`` saves the map;
- reused: the map of the previous clean close vouches for the file, so the table is read
  without the token-vector column (``storage/token_map.py``).

Per start: the seconds ``open`` took (a timing: publish it only from a quiet machine), the
token column's bytes read (``LanceStore.token_bytes_read``), the bytes the process read and
wrote through system calls in ``open`` (``/proc/self/io`` rchar and wchar, page-cache hits
included) and read from the block device (read_bytes), its VmRSS growth (at 2 malloc
arenas by default, ``--arena-max``, as ``memoryd serve`` sets), and the seconds ``close``
took (which saves the map).

    ./dev bench token_reuse.py --memories 100000 --keep /tmp/store100k
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from load_rss import DEFAULT_DATA, vm_rss, write_store


def proc_io() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/io").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = int(value)
    return out


def measure(path: Path, mode: str, arena_max: int) -> dict[str, float]:
    if arena_max:  # glibc's M_ARENA_MAX, as memoryd serve sets it, before LanceDB's threads
        ctypes.CDLL("libc.so.6").mallopt(-8, arena_max)
    from memoryd.storage import token_map
    from memoryd.storage.lance_store import LanceStore
    from memoryd.storage.repository import Repository

    tokens = path / "data" / "tokens.bin"
    if mode == "rewritten":
        token_map.remove(token_map.map_path(tokens))
    repo = Repository(
        LanceStore(str(path / "lancedb"), table="m", model_name="x", dim=384), token_path=tokens
    )
    gc.collect()
    rss, io, t0 = vm_rss(), proc_io(), time.perf_counter()
    repo.open()
    took = time.perf_counter() - t0
    after = proc_io()
    gc.collect()
    grown = vm_rss() - rss
    assert repo.token_start is not None
    out = {
        "mode": mode,
        "reused": repo.token_start.reused,
        "why": repo.token_start.why,
        "memories": len(repo),
        "open_s": took,
        "token_column_bytes": repo._durable.token_bytes_read,
        "rchar": after["rchar"] - io["rchar"],
        "wchar": after["wchar"] - io["wchar"],
        "read_bytes": after["read_bytes"] - io["read_bytes"],
        "rss_growth": grown,
    }
    t1 = time.perf_counter()
    repo.close()
    out["close_s"] = time.perf_counter() - t1
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo's locomo10.json")
    p.add_argument("--keep", type=Path, help="write the store here once and reuse it")
    p.add_argument("--runs", type=int, default=1, help="starts each way")
    p.add_argument("--arena-max", type=int, default=2, help="glibc M_ARENA_MAX (0: default)")
    p.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=("rewritten", "reused"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.mode, args.arena_max)))
        return
    path = args.keep or Path(tempfile.mkdtemp(prefix="memoryd-bench-token-reuse-"))
    if not (path / "lancedb").exists():
        asyncio.run(write_store(path / "lancedb", args.memories, args.data))
    rows = []
    try:
        for _ in range(args.runs):
            for mode in ("rewritten", "reused"):
                cmd = [sys.executable, __file__, "--measure", str(path), "--mode", mode]
                cmd += ["--arena-max", str(args.arena_max)]
                run = subprocess.run(cmd, capture_output=True, text=True, check=True)
                rows.append(json.loads(run.stdout.strip().splitlines()[-1]))
    finally:
        if args.keep is None:
            shutil.rmtree(path, ignore_errors=True)
    mib = 2**20
    print(f"## Start with the token file rewritten or reused: {rows[0]['memories']:,} memories\n")
    print(
        "| start | token file | open s | token column read MiB | read syscalls MiB "
        "| write syscalls MiB | read from disk MiB | VmRSS growth B/memory | close s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        n = r["memories"] or 1
        print(
            f"| {r['mode']} | {'reused' if r['reused'] else 'rewritten'} | {r['open_s']:.2f} "
            f"| {r['token_column_bytes'] / mib:,.1f} | {r['rchar'] / mib:,.1f} "
            f"| {r['wchar'] / mib:,.1f} | {r['read_bytes'] / mib:,.1f} "
            f"| {r['rss_growth'] / n:,.0f} | {r['close_s']:.2f} |"
        )
    print(f"\nwhy: {rows[0]['why']!r}; {rows[1]['why']!r}")
    print(
        f"\n`./dev bench token_reuse.py --memories {args.memories} --runs {args.runs} "
        f"--arena-max {args.arena_max}`"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
