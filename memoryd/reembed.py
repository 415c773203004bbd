"""``memoryd reembed`` and ``memoryd restore``: build a new store from an old store or a
backup file, embedding every text with the configured model.

Offline (no daemon may hold either data dir): reads every row of the old store with the
identity it was made with, embeds each text with the configured model (the built-in one
unless ``embedder.model_dir`` says otherwise), and writes the rows (ids, times, metadata,
links kept) to the new store in large batches. The old store is left as it was.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
from pathlib import Path

from memoryd.api.backup import read_backup
from memoryd.config import Settings
from memoryd.core.errors import ConfigError
from memoryd.core.records import Memory
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.server import build_embedder
from memoryd.storage.lance_store import LanceStore, Row, store_identity
from memoryd.storage.repository import quantize_tokens

log = logging.getLogger("memoryd.reembed")

BATCH = 256


def reembed(settings: Settings, source: Path, target: Path) -> int:
    """Copy the store under ``source`` into ``target``; returns how many memories."""
    table = settings.storage.table
    identity = store_identity(str(source / "lancedb"), table)
    if identity is None:
        raise ConfigError(f"no memoryd store at {source}")
    _refuse_if_served(source)
    old = LanceStore(
        str(source / "lancedb"),
        table=table,
        model_name=identity[0],
        dim=identity[1],
        read_only=True,
    )
    return _write_new_store(settings, target, [m for m, _, _ in old.scan()])


def _refuse_if_served(data_dir: Path) -> None:
    """A daemon holds ``memoryd.lock`` in its data dir while it runs: its store is copied
    at rest or not at all (writes made during the copy would be missing from it)."""
    try:
        lock = (data_dir / "memoryd.lock").open("r")
    except OSError:
        return  # no lock file: no daemon has it open
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = lock.read().strip()
            raise ConfigError(
                f"a memoryd is serving {data_dir}"
                + (f" (pid {pid})" if pid else "")
                + ": stop it first; reembed copies a store at rest"
            ) from None


def restore(settings: Settings, backup: Path, target: Path) -> int:
    """Load a backup file (``api.backup``) into an empty store under ``target``."""
    if not backup.is_file():
        raise ConfigError(f"no backup file at {backup}")
    return _write_new_store(settings, target, list(read_backup(backup)))


def _write_new_store(settings: Settings, target: Path, memories: list[Memory]) -> int:
    r = settings.recall
    token_vectors = r.token_vectors or r.rerank == "late-interaction"
    table = settings.storage.table
    new_uri = str(target / "lancedb")
    if store_identity(new_uri, table) is not None:
        raise ConfigError(f"{target} already holds a store; write into an empty data dir")
    embedder = build_embedder(settings)
    embedder.start()
    try:
        new = LanceStore(
            new_uri,
            table=table,
            model_name=embedder.model_name,
            dim=embedder.dim,
            max_batch=BATCH,
        )
        new.start()
        try:
            return asyncio.run(_copy(memories, new, embedder, token_vectors, r.token_vectors_max))
        finally:
            new.close()
    finally:
        embedder.close()


async def _copy(
    rows: list[Memory], new: LanceStore, embedder: BatchingEmbedder, tokens: bool, max_tokens: int
) -> int:
    done = 0
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        if tokens:
            pairs = await asyncio.gather(
                *(embedder.embed_document_with_tokens(m.text) for m in chunk)
            )
            batch: list[Row] = [
                (m, v, quantize_tokens(t, max_tokens))
                for m, (v, t) in zip(chunk, pairs, strict=True)
            ]
        else:
            vecs = await asyncio.gather(*(embedder.embed_document(m.text) for m in chunk))
            batch = [(m, v, None) for m, v in zip(chunk, vecs, strict=True)]
        await new.add(batch)
        done += len(batch)
        log.info("re-embedded %d of %d memories", done, len(rows))
    return done
