"""One daemon at a million memories (issue 17): time to SERVING, RSS per memory, Recall.

Storing a million memories through the daemon would take about two hours (it embeds
every text: ~150 stores/s on an idle machine), so this script writes the store directly,
in memoryd's own LanceDB table (``lance_store.make_schema`` and ``to_arrow``, the rows
built as ``core.ingest`` builds a Store's: normalised text, content hash, detected
category, extractive summary, default importance, ``agent:<id>`` scope), then starts the
daemon on it and measures it:

- texts: distinct synthetic memories (``corpus.memories``), one per row, so every row's
  text and its BM25 postings are its own;
- vectors and token vectors: from a pool of ``--pool`` texts (LoCoMo's turns, then
  synthetic memories of another seed) really embedded once with the shipped model, as
  the daemon embeds a Store (pooled vector, token vectors int8 capped at
  ``recall.token_vectors_max``), cached under ``bench/out/``, and given to the rows at
  random: the vectors' distribution is the real one, repeated, and a row's vector is not
  its text's (fine for timings and bytes; this is not a quality benchmark).

Per ``--layouts`` entry (``AxM``: A agents of M memories; ``N``: one agent of N): the
build time and disk size of the store, the daemon's "SERVING after" and its breakdown,
spawn to serving, VmRSS after the start and after the queries (and per memory), the
daemon's own Stats.index_bytes, the HNSW build of a scope of ``recall.ann_threshold`` rows
or more (the Recalls wait for it), Recall p50/p99 with a cache miss (every query a
distinct question; in the agents layout each goes to one agent, spread over all of
them). An empty store gives the daemon's own baseline RSS (model, runtime). Then, for
an agents layout, the cost of the cold-scope policy of bench/RESULTS.md, in this process
(the daemon loads every scope at start today): ``--cold-scopes`` agents' rows read from
the table by scope, with and without a BITMAP index, then put into a hot index.

The daemon's RSS grows with the rows it holds (20.6 KiB per memory at 200k before the
hot-index work of issue 17, bench/RESULTS.md "One daemon at 1M memories"): a layout is
refused when ``--expect-bytes-per-memory`` x its rows is more than a third of
MemAvailable, so a run cannot take the machine down; ``--build-only`` writes the store
and runs the cold-scope probe without a daemon.

    ./dev bench million.py --layouts 100x100,1x20000 --pool 1000 --queries 50  # smoke
    ./dev bench million.py --layouts 2000x100,1x200000                         # 200k
    ./dev bench million.py --layouts 10000x100,1x1000000 --expect-bytes-per-memory 4500
    ./dev bench million.py --layouts 10000x100 --build-only                    # no daemon
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import corpus
import harness
import locomo
import numpy as np
import peers
import pyarrow as pa
from memoryd_client import MemoryClient
from store_size import disk_bytes

from memoryd.config import Settings, load_settings
from memoryd.core.categorize import detect_category
from memoryd.core.policy import agent_scope
from memoryd.core.records import Memory
from memoryd.core.summarize import extractive_summary
from memoryd.core.text import content_hash, normalize_text
from memoryd.storage.lance_store import from_arrow, make_schema, to_arrow
from memoryd.storage.repository import quantize_tokens

OUT = Path(__file__).resolve().parent / "out"
CHUNK = 10_000  # rows per Arrow batch written (a batch of token vectors is ~140 MB)
ANN_READY = "approximate index of {n} rows ready in"
ANN_READ = "approximate index of {n} rows read as it was saved"
MAP_SAVED_RE = re.compile(r"saved the token file's map while serving \((\d+) rows\) in ([\d.]+)s")
MAP_SAVED_AT_RE = re.compile(  # the line's time: the log's asctime, local time
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?saved the token file's map while serving "
    r"\((\d+) rows\) in ([\d.]+)s",
    re.M,
)
TOKEN_START_RE = re.compile(r"token file (reused|rewritten) \(([^)]*)\)")
ROWS_READ_RE = re.compile(r"(\d+) rows read from the table")
ANN_SAVED_RE = re.compile(
    r"saved (\d+) approximate index\(es\) of (\d+) rows \((\d+) MB\) in ([0-9.]+)s"
)
K = 10


# -- the pool of embedded texts -------------------------------------------------------


@dataclass
class Pool:
    """``n`` embedded texts: pooled vectors [n, dim] and int8 token vectors, row i's being
    ``tokens[offsets[i]:offsets[i + 1]]``."""

    vectors: np.ndarray
    offsets: np.ndarray
    tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.vectors)

    def tokens_of(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]


def pool_texts(n: int, seed: int) -> list[str]:
    turns = peers.locomo_turn_texts(locomo.load(peers.default_data(), None))
    synthetic = corpus.take(corpus.memories(seed + 7), max(0, n - len(turns)))
    return [*turns, *synthetic][:n]


def load_pool(n: int, seed: int, settings: Settings, cache: Path) -> Pool:
    """The pool, embedded now or read from its cache (keyed on the model and the texts)."""
    embedder = peers.query_embedder()
    texts = pool_texts(n, seed)
    max_tokens = settings.recall.token_vectors_max
    key = hashlib.sha256("\n".join([embedder.name, str(max_tokens), *texts]).encode())
    path = cache / f"million-pool-{n}-{key.hexdigest()[:12]}.npz"
    if path.exists():
        with np.load(path) as z:
            harness.log(f"pool of {n} embedded texts from {path}")
            return Pool(z["vectors"], z["offsets"], z["tokens"])
    harness.log(f"embedding a pool of {n} texts with {embedder.name} (cached at {path})")
    vectors = np.empty((n, embedder.dim), np.float32)
    parts: list[np.ndarray] = []
    started = time.perf_counter()
    for i in range(0, n, 32):
        v, toks = embedder.embed_full(texts[i : i + 32], tokens=True)
        vectors[i : i + len(v)] = v
        parts += [quantize_tokens(t, max_tokens) for t in toks]
        if i and i % 1024 == 0:
            harness.log(f"embedded {i}/{n} ({i / (time.perf_counter() - started):.0f}/s)")
    offsets = np.zeros(n + 1, np.int64)
    offsets[1:] = np.cumsum([len(t) for t in parts])
    tokens = np.concatenate(parts).astype(np.int8)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=vectors, offsets=offsets, tokens=tokens)
    return Pool(vectors, offsets, tokens)


# -- writing the store ------------------------------------------------------------------


def rows(
    layout: peers.Layout, pool: Pool, settings: Settings, seed: int
) -> Iterator[tuple[Memory, np.ndarray, np.ndarray]]:
    """The layout's rows as a Store makes them (core.ingest), row r in agent r % agents."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(pool), layout.total)
    ids = random.Random(seed)
    texts = corpus.memories(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    importance = settings.store.default_importance
    words = settings.store.summary_max_words
    for r in range(layout.total):
        text = normalize_text(next(texts))
        agent = layout.agent_of_row(r)
        at = start + timedelta(seconds=r)
        memory = Memory(
            id=str(uuid.UUID(int=ids.getrandbits(128), version=4)),
            agent_id=agent,
            scope=agent_scope(agent),
            text=text,
            summary=extractive_summary(text, words),
            category=detect_category(text),
            importance=importance,
            created_at=at,
            updated_at=at,
            content_hash=content_hash(text),
            language="en",
        )
        p = int(picks[r])
        yield memory, pool.vectors[p], pool.tokens_of(p)


def build_store(
    data_dir: Path, layout: peers.Layout, pool: Pool, settings: Settings, seed: int
) -> tuple[float, int]:
    """Write the layout's rows into ``data_dir``'s table in one commit; (seconds, token
    vector bytes written)."""
    import lancedb

    model = peers.model_files()[1].name  # the daemon's embedding model (its identity)
    schema = make_schema(model, pool.vectors.shape[1])
    token_bytes = 0

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal token_bytes
        chunk: list[Any] = []
        done = 0
        for row in rows(layout, pool, settings, seed):
            chunk.append(row)
            token_bytes += row[2].nbytes
            if len(chunk) == CHUNK:
                done += len(chunk)
                yield from to_arrow(schema, chunk).to_batches()
                chunk = []
                harness.log(f"written {done:,}/{layout.total:,}")
        if chunk:
            yield from to_arrow(schema, chunk).to_batches()

    started = time.perf_counter()
    db = lancedb.connect(str(data_dir / "lancedb"))
    table = db.create_table(settings.storage.table, schema=schema)
    table.add(pa.RecordBatchReader.from_batches(schema, batches()))
    return time.perf_counter() - started, token_bytes


# -- the daemon on it -------------------------------------------------------------------


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def wait_for_ann(
    daemon: harness.Daemon,
    agent: str,
    n: int,
    timeout: float,
    *,
    needles: Sequence[str] = (ANN_READY,),
) -> float | None:
    """Seconds from now until the daemon logs its HNSW graph of ``n`` rows ready (or any
    of ``needles``), one Recall a second meanwhile (traffic, answered by an exact scan
    until the graph serves; a finished graph is handed over at once)."""
    started = time.perf_counter()
    wanted = [needle.format(n=n) for needle in needles]
    with MemoryClient(daemon.address, timeout=60.0) as client:
        while time.perf_counter() - started < timeout:
            text = daemon.log_text()
            if any(needle in text for needle in wanted):
                return time.perf_counter() - started
            client.recall(agent, "what did we decide about the launch", limit=K)
            time.sleep(1.0)
    harness.log(f"no HNSW graph of {n} rows after {timeout:.0f}s; measuring the exact scan")
    return None


def recalls(
    address: str, layout: peers.Layout, queries: Sequence[str], warmup: int
) -> tuple[list[float], int]:
    """Each query once (distinct strings: the query-embedding cache misses), one at a time:
    the timed ones' seconds, and how many Recalls found the agent's memories (any)."""
    out, found = [], 0
    with MemoryClient(address, timeout=60.0) as client:
        for n, q in enumerate(queries):
            agent = layout.agent_of_query(n)
            t0 = time.perf_counter()
            answer = client.recall(agent, q, limit=K)
            if n >= warmup:
                out.append(time.perf_counter() - t0)
            found += any(r.memory.agent_id == agent for r in answer.results)
    return out, found


def measure(
    args: argparse.Namespace,
    layout: peers.Layout | None,
    pool: Pool,
    settings: Settings,
    queries: Sequence[str],
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="memoryd-bench-million-", dir=args.tmp))
    label = "empty store" if layout is None else layout.label
    out: dict[str, Any] = {"layout": label, "memories": 0 if layout is None else layout.total}
    try:
        data_dir = base / "data"
        if layout is not None:
            harness.log(f"{label}: writing the store in {data_dir}")
            out["build_s"], token_bytes = build_store(data_dir, layout, pool, settings, args.seed)
            out["disk"] = disk_bytes(data_dir)
            out["token_bytes"] = token_bytes
        if not args.build_only:
            out.update(serve(data_dir, base / "stderr.log", layout, settings, queries, args))
            if layout is not None and args.load_split:
                harness.log(f"{label}: the daemon's load, split, in process")
                out["load_split"] = load_split(data_dir, settings)
        if layout is not None and layout.agents > 1 and args.cold_scopes:
            harness.log(f"{label}: loading {args.cold_scopes} scopes cold, in process")
            out["cold"] = cold_scopes(data_dir, layout, settings, args.cold_scopes, args.seed)
    finally:
        if args.keep_data:
            harness.log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return out


def serve(
    data_dir: Path,
    log_path: Path,
    layout: peers.Layout | None,
    settings: Settings,
    queries: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The daemon on the store: its start, RSS, index bytes, then the Recalls."""
    out: dict[str, Any] = {}
    daemon = harness.Daemon(data_dir, log_path)
    daemon.start_timeout = daemon.stop_timeout = args.serve_timeout
    if layout is None:  # once first, so that numba's cache is warm (a cold compile
        daemon.start()  # also leaves the empty daemon's RSS higher)
        daemon.stop()
    t0 = time.perf_counter()
    daemon.start()
    out["spawn_s"] = time.perf_counter() - t0
    try:
        out.update(daemon.startup())
        out["rss_start"] = harness.proc_status(daemon.pid).get("VmRSS")
        out["index_bytes"] = harness.stats(daemon.address, "bench").index_bytes
        harness.log(f"serving: {out}")
        if layout is not None:
            if layout.per_agent >= settings.recall.ann_threshold > 0:
                out["ann_s"] = wait_for_ann(
                    daemon, layout.agent(0), layout.per_agent, args.ann_wait
                )
            lat, out["recalls_found"] = recalls(daemon.address, layout, queries, args.warmup)
            out["recall"] = harness.summary_ms(lat)
        status = harness.proc_status(daemon.pid)
        out["rss_end"], out["rss_peak"] = status.get("VmRSS"), status.get("VmHWM")
        out["io_start"] = proc_io(daemon.pid)
        if layout is not None and args.save_recalls:
            out["save_recalls"] = recalls_beside_save(daemon, layout, queries, args)
        if layout is not None and args.crash is not None:
            out["crash"] = crash(daemon, layout, settings, queries, args)
    finally:
        out.update(timed_stop(daemon))
    if layout is not None and args.restart:
        out["restart"] = restart(daemon, layout, settings, queries, args)
    return out


def timed_stop(daemon: harness.Daemon) -> dict[str, Any]:
    """SIGTERM to exit, and what the stop's log says it saved of the HNSW graphs."""
    t0 = time.perf_counter()
    code = daemon.stop()
    out: dict[str, Any] = {"stop_s": time.perf_counter() - t0}
    if code not in (0, None):
        harness.log(f"memoryd exited {code}:\n{daemon.log_tail()}")
    if m := ANN_SAVED_RE.search(daemon.log_text()):
        out["graph_saved"] = {"rows": int(m.group(2)), "mb": int(m.group(3))}
        out["graph_saved"]["s"] = float(m.group(4))
    return out


def proc_io(pid: int) -> dict[str, int]:
    """The process's I/O so far (/proc/PID/io: rchar, wchar are read and write system
    calls' bytes, page-cache hits included; read_bytes what came from the disk)."""
    out = {}
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = int(value)
    return out


def restart(
    daemon: harness.Daemon,
    layout: peers.Layout,
    settings: Settings,
    queries: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The daemon started again on the store its clean stop just left (``--restart``): its
    token file reused (storage/token_map.py), so the table is read without the token
    vectors: time to SERVING and the bytes it read and wrote until then. A layout with an
    HNSW scope: the time from SERVING until its graph serves (read as the stop saved it,
    storage/ann_map.py, or built again), then the Recalls again."""
    t0 = time.perf_counter()
    daemon.start()
    out: dict[str, Any] = {"spawn_s": time.perf_counter() - t0}
    try:
        out.update(daemon.startup())
        out["io_start"] = proc_io(daemon.pid)
        out["rss_start"] = harness.proc_status(daemon.pid).get("VmRSS")
        text = daemon.log_text()
        out["token_file"] = "reused" if "token file reused" in text else "rewritten"
        harness.log(f"restarted: {out}")
        if layout.per_agent >= settings.recall.ann_threshold > 0:
            out.update(graph_back(daemon, layout, queries, args))
    finally:
        out.update(timed_stop(daemon))
    return out


def graph_back(
    daemon: harness.Daemon,
    layout: peers.Layout,
    queries: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """After a start on a store a daemon left: the time from SERVING until the big scope's
    HNSW graph serves (read as it was saved, or built again), then the Recalls and VmRSS."""
    n = layout.per_agent
    out: dict[str, Any] = {
        "ann_s": wait_for_ann(
            daemon, layout.agent(0), n, args.ann_wait, needles=(ANN_READ, ANN_READY)
        )
    }
    out["graph"] = "read" if ANN_READ.format(n=n) in daemon.log_text() else "built"
    lat, out["recalls_found"] = recalls(daemon.address, layout, queries, args.warmup)
    out["recall"] = harness.summary_ms(lat)
    out["rss_end"] = harness.proc_status(daemon.pid).get("VmRSS")
    return out


def recalls_beside_save(
    daemon: harness.Daemon,
    layout: peers.Layout,
    queries: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """``--save-recalls``: once the daemon has saved its token file's map while serving,
    Store a few memories past it and send Recalls one after another (each query made
    distinct: cache misses) until it saves the map again (at its first quiet upkeep a
    minute on); the Recalls that overlapped that save's span (the log's time of its line,
    less the seconds it took) against the others."""
    t0 = time.perf_counter()
    while not MAP_SAVED_AT_RE.search(daemon.log_text()):
        if time.perf_counter() - t0 > args.serve_timeout:
            raise SystemExit(f"no map saved while serving:\n{daemon.log_tail()}")
        time.sleep(1.0)
    saves = len(MAP_SAVED_AT_RE.findall(daemon.log_text()))
    texts = corpus.take(corpus.memories(args.seed + 11), 10)
    timed: list[tuple[float, float]] = []  # (wall-clock start, seconds)
    saved_at = None
    with MemoryClient(daemon.address, timeout=60.0) as client:
        for n, text in enumerate(texts):
            client.store(layout.agent(n % layout.agents), f"{text} (beside a save, {n})")
        t1 = time.perf_counter()
        n = 0
        while saved_at is None or time.time() < saved_at + 3.0:
            if time.perf_counter() - t1 > args.serve_timeout:
                raise SystemExit(f"the map was not saved again:\n{daemon.log_tail()}")
            q = f"{queries[n % len(queries)]} ({n})"
            start = time.time()
            client.recall(layout.agent_of_query(n), q, limit=K)
            timed.append((start, time.time() - start))
            n += 1
            if saved_at is None and n % 20 == 0:
                found = MAP_SAVED_AT_RE.findall(daemon.log_text())
                if len(found) > saves:
                    saved_at = time.time()
    stamp, rows, took = MAP_SAVED_AT_RE.findall(daemon.log_text())[saves]
    end = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time
    begin = end - float(took)
    during = [s for at, s in timed if at + s >= begin and at <= end]
    others = [s for at, s in timed if at + s < begin or at > end]
    return {
        "map_rows": int(rows),
        "save_s": float(took),
        "during": harness.summary_ms(during),
        "others": harness.summary_ms(others),
    }


def crash(
    daemon: harness.Daemon,
    layout: peers.Layout,
    settings: Settings,
    queries: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """``--crash N``: wait until the daemon has saved its token file's map while serving
    (and, with an HNSW scope, its graph), Store N more memories (through gRPC, embedded),
    kill -9 it, and start it again: time to SERVING and how its token file came back
    (storage/token_map.py: the rows the map holds taken from the file, the others read
    from the table), the I/O until SERVING; with an HNSW scope, the time until its graph
    serves again (read as saved, or built), then the Recalls."""
    out: dict[str, Any] = {}
    graph = layout.per_agent >= settings.recall.ann_threshold > 0
    t0 = time.perf_counter()
    while not (m := MAP_SAVED_RE.search(daemon.log_text())) or (
        graph and not ANN_SAVED_RE.search(daemon.log_text())
    ):
        if time.perf_counter() - t0 > args.serve_timeout:
            raise SystemExit(f"no map (or graph) saved while serving:\n{daemon.log_tail()}")
        time.sleep(1.0)
    m = list(MAP_SAVED_RE.finditer(daemon.log_text()))[-1]
    out["map_rows"], out["map_s"] = int(m.group(1)), float(m.group(2))
    if graph and (g := ANN_SAVED_RE.search(daemon.log_text())):
        out["graph_saved"] = {
            "rows": int(g.group(2)),
            "mb": int(g.group(3)),
            "s": float(g.group(4)),
        }
    texts = corpus.take(corpus.memories(args.seed + 7), args.crash)
    with MemoryClient(daemon.address, timeout=60.0) as client:
        t1 = time.perf_counter()
        for n, text in enumerate(texts):
            client.store(layout.agent(n % layout.agents), f"{text} (after the map, {n})")
        out["stores_s"] = time.perf_counter() - t1
    harness.log(f"kill -9 after {args.crash} Stores past the map")
    daemon.kill()
    t2 = time.perf_counter()
    daemon.start()
    out["spawn_s"] = time.perf_counter() - t2
    out.update(daemon.startup())
    out["io_start"] = proc_io(daemon.pid)
    out["rss_start"] = harness.proc_status(daemon.pid).get("VmRSS")
    text = daemon.log_text()
    if m := TOKEN_START_RE.search(text):
        out["token_file"], out["why"] = m.group(1), m.group(2)
    if m := ROWS_READ_RE.search(text):
        out["rows_read"] = int(m.group(1))
    harness.log(f"after the crash: {out}")
    if graph:
        out.update(graph_back(daemon, layout, queries, args))
        harness.log(f"after the crash, the graph {out['graph']}: {out}")
    return out


def load_split(data_dir: Path, settings: Settings) -> dict[str, float]:
    """Where the start's "store + index" time goes, in this process, as
    ``Repository.open`` does it (``LanceStore.scan``): the whole table read with one
    ``to_arrow()``, each row made a record with its vector and token vectors
    (``from_arrow``), then ``HotIndex.put`` per row in one bulk load (no HNSW build: that
    runs after SERVING). Seconds."""
    import lancedb

    from memoryd.storage.hot_index import HotIndex
    from memoryd.storage.lexical import Analyzer

    t0 = time.perf_counter()
    table = lancedb.connect(str(data_dir / "lancedb")).open_table(settings.storage.table)
    data = table.to_arrow()
    t1 = time.perf_counter()
    rows = [row for batch in data.to_batches(max_chunksize=8192) for row in from_arrow(batch)]
    t2 = time.perf_counter()
    dim = data.schema.field("vector").type.list_size
    index = HotIndex(dim, Analyzer(settings.recall.analyzer_language), ann_threshold=0)
    with index.bulk_load():
        for memory, vector, tokens in rows:
            index.put(memory, vector, tokens)
    t3 = time.perf_counter()
    return {"arrow_s": t1 - t0, "records_s": t2 - t1, "index_s": t3 - t2, "rows": len(rows)}


def cold_scopes(
    data_dir: Path, layout: peers.Layout, settings: Settings, count: int, seed: int
) -> dict[str, Any]:
    """What loading one agent's scope on its first use would cost (the cold-scope policy
    of bench/RESULTS.md, not the daemon's way today): ``count`` agents' rows read from the
    table with ``scope = ...`` (with a BITMAP index on scope, as that policy would make),
    then put into a hot index of their own, in this process. Seconds per agent. Beside
    it, 5 agents each read without the index, with it but without the token vectors
    (which the hot-index work moves out of memory), and their ids only (the lookup)."""
    import lancedb

    from memoryd.storage.hot_index import HotIndex
    from memoryd.storage.lexical import Analyzer

    table = lancedb.connect(str(data_dir / "lancedb")).open_table(settings.storage.table)
    picked = random.Random(seed).sample(range(layout.agents), min(count, layout.agents))

    def read_scope(a: int, columns: list[str] | None = None) -> pa.Table:
        scope = agent_scope(layout.agent(a))
        query = table.search().where(f"scope = '{scope}'").limit(None)
        return (query if columns is None else query.select(columns)).to_arrow()

    def timed(agents: Sequence[int], columns: list[str] | None = None) -> dict[str, float]:
        seconds = []
        for a in agents:
            t0 = time.perf_counter()
            read_scope(a, columns)
            seconds.append(time.perf_counter() - t0)
        return harness.summary_ms(seconds)

    # Each variant reads agents of its own, so none finds another's pages freshly read.
    unindexed = timed(picked[-5:])
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # deprecated for create_index(config=Bitmap()), which
        warnings.simplefilter("ignore")  # the sync LanceTable takes for vector columns only
        table.create_scalar_index("scope", index_type="BITMAP")
    index_s = time.perf_counter() - t0
    analyzer = Analyzer(settings.recall.analyzer_language)
    no_tokens = [n for n in table.schema.names if n != "token_vectors"]
    slim = timed(picked[-10:-5], no_tokens)  # the rows without their token vectors
    ids_only = timed(picked[-15:-10], ["id"])  # the index lookup and one narrow column
    read, build, rows_read = [], [], 0
    loaded = picked[:-15] or picked
    for a in loaded:
        t0 = time.perf_counter()
        data = read_scope(a)
        t1 = time.perf_counter()
        index = HotIndex(data.schema.field("vector").type.list_size, analyzer)
        with index.bulk_load():
            for batch in data.to_batches():
                for memory, vector, tokens in from_arrow(batch):
                    index.put(memory, vector, tokens)
        t2 = time.perf_counter()
        rows_read += data.num_rows
        read.append(t1 - t0)
        build.append(t2 - t1)
    return {
        "scopes": len(loaded),
        "rows_per_scope": rows_read / max(1, len(loaded)),
        "index_s": index_s,
        "unindexed": unindexed,
        "no_tokens": slim,
        "ids_only": ids_only,
        "read": harness.summary_ms(read),
        "build": harness.summary_ms(build),
        "total": harness.summary_ms([r + b for r, b in zip(read, build, strict=True)]),
    }


# -- the report -------------------------------------------------------------------------


def per_memory(value: float | None, n: int) -> str:
    return "n/a" if value is None or not n else f"{value / n / 1024:.1f}"


RESTART_HEADERS = (
    "layout", "start", "SERVING after s", "store + index s", "read syscalls GiB",
    "write syscalls GiB", "RSS after start MiB",
)  # fmt: skip


CRASH_HEADERS = (
    "layout", "map rows", "map saved in s", "Stores after it", "token file at the start",
    "SERVING after s", "store + index s", "read syscalls GiB", "write syscalls GiB",
    "RSS after start MiB", "graph", "serving after SERVING s", "Recall p50 ms", "Recall p99 ms",
)  # fmt: skip


GRAPH_HEADERS = (
    "layout", "graph saved MB", "saved in s", "stop s", "after restart", "serving after SERVING s",
    "Recall p50 ms", "Recall p99 ms", "RSS after Recalls MiB",
)  # fmt: skip


def gib(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 2**30:.2f}"


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    nan = float("nan")
    base_rss = next((r.get("rss_end") for r in results if r["memories"] == 0), None)
    headers = (
        "layout", "memories", "store built s", "disk KiB/memory", "SERVING after s",
        "store + index s", "spawn to serving s", "RSS after start MiB", "RSS after queries MiB",
        "peak RSS MiB", "RSS above empty KiB/memory", "index_bytes KiB/memory",
        "token vectors KiB/memory", "HNSW wait s", "Recall miss p50 ms", "Recall miss p99 ms",
        "Recalls with results",
    )  # fmt: skip
    table = []
    for r in results:
        n = r["memories"]
        rec = r.get("recall", {})
        above = None if base_rss is None or r.get("rss_end") is None else r["rss_end"] - base_rss
        table.append(
            [r["layout"], n, r.get("build_s", nan), per_memory(r.get("disk"), n),
             r.get("serving_s", nan), r.get("store_s", nan), r.get("spawn_s", nan),
             harness.mib(r.get("rss_start")), harness.mib(r.get("rss_end")),
             harness.mib(r.get("rss_peak")), per_memory(above, n),
             per_memory(r.get("index_bytes"), n), per_memory(r.get("token_bytes"), n),
             r.get("ann_s") if r.get("ann_s") is not None else "n/a",
             rec.get("p50", nan), rec.get("p99", nan),
             f"{r['recalls_found']}/{args.warmup + args.queries}" if n and rec else "n/a"]
        )  # fmt: skip
    note = (
        f"Pool of {args.pool} really embedded texts (vectors and token vectors reused at "
        f"random across rows; texts distinct); {args.queries} timed Recalls (limit {K}) after "
        f"{args.warmup} warm-up, one at a time, every query a distinct question."
    )
    cold_headers = (
        "layout", "scopes loaded", "rows per scope", "read without an index p50 ms",
        "BITMAP index on scope s", "read of ids only p50 ms",
        "read without token vectors p50 ms", "read p50 ms", "read p99 ms", "index build p50 ms",
        "index build p99 ms",
        "first-use load p50 ms", "first-use load p99 ms",
    )  # fmt: skip
    cold = [
        [r["layout"], c["scopes"], f"{c['rows_per_scope']:.0f}", c["unindexed"]["p50"],
         c["index_s"], c["ids_only"]["p50"], c["no_tokens"]["p50"],
         c["read"]["p50"], c["read"]["p99"], c["build"]["p50"], c["build"]["p99"],
         c["total"]["p50"], c["total"]["p99"]]
        for r in results
        if (c := r.get("cold"))
    ]  # fmt: skip
    sections = [note, harness.table(headers, table)]
    split = [
        [r["layout"], r.get("store_s", nan), (x := r["load_split"])["arrow_s"],
         x["records_s"], x["index_s"]]
        for r in results
        if "load_split" in r
    ]  # fmt: skip
    if split:
        sections += [
            "The daemon's load split, in process after its run (`--load-split`): the table "
            "read whole, the rows made records, the hot index built:",
            harness.table(
                ("layout", "daemon's store + index s", "to_arrow s", "records s", "put s"),
                split,
            ),
        ]
    restarts = [
        [r["layout"], "first (token file written)", r.get("serving_s", nan),
         r.get("store_s", nan), gib(r.get("io_start", {}).get("rchar")),
         gib(r.get("io_start", {}).get("wchar")), harness.mib(r.get("rss_start"))]
        for r in results
        if "restart" in r
    ] + [
        [r["layout"], f"restart (token file {x['token_file']})", x.get("serving_s", nan),
         x.get("store_s", nan), gib(x.get("io_start", {}).get("rchar")),
         gib(x.get("io_start", {}).get("wchar")), harness.mib(x.get("rss_start"))]
        for r in results
        if (x := r.get("restart"))
    ]  # fmt: skip
    if restarts:
        sections += [
            "The same store started again after a clean stop (`--restart`): the token file "
            "reused, the table read without its token vectors; I/O until SERVING "
            "(/proc/PID/io, page-cache hits included):",
            harness.table(RESTART_HEADERS, restarts),
        ]
    graphs = [
        [r["layout"], (g := r.get("graph_saved", {})).get("mb", nan), g.get("s", nan),
         r.get("stop_s", nan), x.get("graph", "n/a"), x.get("ann_s") or nan,
         x.get("recall", {}).get("p50", nan), x.get("recall", {}).get("p99", nan),
         harness.mib(x.get("rss_end"))]
        for r in results
        if (x := r.get("restart")) and "graph" in x
    ]  # fmt: skip
    if graphs:
        sections += [
            "The HNSW graph across that restart: saved by the clean stop (storage/ann_map.py), "
            "then served again after SERVING (read back, or built if it could not be):",
            harness.table(GRAPH_HEADERS, graphs),
        ]
    crashes = [
        [r["layout"], x.get("map_rows", nan), x.get("map_s", nan), args.crash,
         f"{x.get('token_file', 'n/a')}: {x.get('why', '')}", x.get("serving_s", nan),
         x.get("store_s", nan), gib(x.get("io_start", {}).get("rchar")),
         gib(x.get("io_start", {}).get("wchar")), harness.mib(x.get("rss_start")),
         x.get("graph", "n/a"), x.get("ann_s") or nan, x.get("recall", {}).get("p50", nan),
         x.get("recall", {}).get("p99", nan)]
        for r in results
        if (x := r.get("crash"))
    ]  # fmt: skip
    if crashes:
        sections += [
            "A kill -9 after the map saved while serving and more Stores (`--crash N`), then "
            "the start on what it left (the token file from that map and the table):",
            harness.table(CRASH_HEADERS, crashes),
        ]
    beside = [
        [r["layout"], x["map_rows"], x["save_s"], x["during"]["n"], x["during"]["p50"],
         x["during"]["p99"], x["during"]["max"], x["others"]["n"], x["others"]["p50"],
         x["others"]["p99"]]
        for r in results
        if (x := r.get("save_recalls"))
    ]  # fmt: skip
    if beside:
        sections += [
            "Recalls beside a save of the token map while serving (`--save-recalls`): those "
            "that overlapped the save against the others (ms):",
            harness.table(
                (
                    "layout",
                    "map rows",
                    "save s",
                    "n during",
                    "p50",
                    "p99",
                    "max",
                    "n others",
                    "p50",
                    "p99",
                ),
                beside,
            ),
        ]
    if cold:
        sections += [
            "A cold scope's load, in process (the proposed policy's cost before its first "
            "Recall: its rows read from LanceDB by scope, then put into a hot index):",
            harness.table(cold_headers, cold),
        ]
    return sections


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layouts", default="2000x100,1x200000", help="AxM (A agents of M) or N")
    p.add_argument("--pool", type=int, default=8000, help="texts embedded for the vectors")
    p.add_argument("--queries", type=int, default=300, help="timed Recalls per layout")
    p.add_argument("--warmup", type=int, default=20, help="untimed Recalls first")
    p.add_argument("--ann-wait", type=float, default=1800, help="seconds to wait for HNSW")
    p.add_argument(
        "--cold-scopes", type=int, default=65, help="agents loaded cold in process (0: none)"
    )
    p.add_argument(
        "--load-split",
        action="store_true",
        help="after the daemon's run, time its load's parts in process (as much memory)",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the empty store's RSS")
    p.add_argument(
        "--restart",
        action="store_true",
        help="start each store's daemon once more after its clean stop (token file reused)",
    )
    p.add_argument(
        "--crash",
        type=int,
        metavar="N",
        help="after the Recalls, wait for the map saved while serving, Store N more, kill -9 "
        "and start again (the token file reused from that map)",
    )
    p.add_argument(
        "--save-recalls",
        action="store_true",
        help="after the Recalls, Recalls one after another until the map is saved while "
        "serving again: those that overlapped the save against the others",
    )
    p.add_argument(
        "--expect-bytes-per-memory",
        type=int,
        default=20_000,
        help="daemon RSS per memory assumed by the memory guard (19 KB before issue 17's work)",
    )
    p.add_argument(
        "--serve-timeout",
        type=float,
        default=1800.0,
        help="seconds the daemon may take to serve (and to stop)",
    )
    p.add_argument("--build-only", action="store_true", help="write the stores, no daemon")
    p.add_argument("--tmp", type=Path, help="where the stores are written (default: $TMPDIR)")
    p.add_argument("--keep-data", action="store_true", help="keep the stores written")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=OUT, help="where the embedded pool is kept")
    p.add_argument("--json", type=Path, help="also write every figure to this file")
    p.add_argument("--out", type=Path, help="also append the markdown report to this file")
    args = p.parse_args()

    layouts = peers.parse_layouts(args.layouts)
    settings = load_settings(None, {})
    if not args.build_only:
        room = mem_available() // 3
        for layout in layouts:
            if layout.total * args.expect_bytes_per_memory > room:
                p.error(
                    f"{layout.label}: {layout.total:,} memories x "
                    f"{args.expect_bytes_per_memory:,} B is more than a third of the "
                    f"{mem_available() >> 20:,} MiB available; refusing to start a daemon on it "
                    "(--build-only writes the store alone)"
                )
    pool = load_pool(args.pool, args.seed, settings, args.cache)
    queries = corpus.take(corpus.queries(args.seed), args.warmup + args.queries)
    baseline = not (args.no_baseline or args.build_only)
    todo: list[peers.Layout | None] = [*([None] if baseline else []), *layouts]
    results = [measure(args, layout, pool, settings, queries) for layout in todo]
    harness.report(args, "One daemon at a million memories", report(results, args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
