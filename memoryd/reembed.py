"""``memoryd reembed``: copy a store into a new one, embedded with another model.

Offline (no daemon may hold either data dir): reads every row of the old store with the
identity it was made with, embeds each text with the configured model (the built-in one
unless ``embedder.model_dir`` says otherwise), and writes the rows (ids, times, metadata,
links kept) to the new store in large batches. The old store is left as it was.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from memoryd.config import Settings
from memoryd.core.errors import ConfigError
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.server import build_embedder
from memoryd.storage.lance_store import LanceStore, Row, store_identity
from memoryd.storage.repository import quantize_tokens

log = logging.getLogger("memoryd.reembed")

BATCH = 256


def reembed(settings: Settings, source: Path, target: Path) -> int:
    """Copy the store under ``source`` into ``target``; returns how many memories."""
    r = settings.retrieval
    token_vectors = r.token_vectors or r.rerank == "late-interaction"
    table = settings.storage.table
    old_uri, new_uri = str(source / "lancedb"), str(target / "lancedb")
    identity = store_identity(old_uri, table)
    if identity is None:
        raise ConfigError(f"no memoryd store at {source}")
    if store_identity(new_uri, table) is not None:
        raise ConfigError(f"{target} already holds a store; reembed writes into an empty one")
    old = LanceStore(old_uri, table=table, model_name=identity[0], dim=identity[1])
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
            return asyncio.run(_copy(old, new, embedder, token_vectors, r.token_vectors_max))
        finally:
            new.close()
    finally:
        embedder.close()


async def _copy(
    old: LanceStore, new: LanceStore, embedder: BatchingEmbedder, tokens: bool, max_tokens: int
) -> int:
    rows = list(old.scan())
    done = 0
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        if tokens:
            pairs = await asyncio.gather(
                *(embedder.embed_one_with_tokens(m.text) for m, _, _ in chunk)
            )
            batch: list[Row] = [
                (m, v, quantize_tokens(t, max_tokens))
                for (m, _, _), (v, t) in zip(chunk, pairs, strict=True)
            ]
        else:
            vecs = await asyncio.gather(*(embedder.embed_one(m.text) for m, _, _ in chunk))
            batch = [(m, v, None) for (m, _, _), v in zip(chunk, vecs, strict=True)]
        await new.add(batch)
        done += len(batch)
        log.info("re-embedded %d of %d memories", done, len(rows))
    return done
