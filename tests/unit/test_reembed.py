"""memoryd reembed: a store made by another model is copied into a new store with the
configured model; the old one is untouched."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memoryd.config import load_settings
from memoryd.core.errors import ConfigError
from memoryd.core.records import Memory
from memoryd.reembed import reembed
from memoryd.storage.lance_store import LanceStore, store_identity

from .conftest import record


def old_store(root: Path) -> list[Memory]:
    store = LanceStore(str(root / "lancedb"), table="memories", model_name="old-model", dim=8)
    rows = [
        record(
            i,
            text=t,
            summary=t,
            created_at=datetime(2024, 1, i + 1, tzinfo=UTC),
            updated_at=datetime(2024, 2, 1, tzinfo=UTC),
            metadata={"n": str(i)},
            language=language,
            content_hash="",
        )
        for i, (t, language) in enumerate(
            [("the cat sleeps on the sofa", "en"), ("quarterly taxes are due in april", "fr")]
        )
    ]
    store.start()
    asyncio.run(store.add([(m, np.ones(8, np.float32) / np.sqrt(8), None) for m in rows]))
    store.close()
    return rows


def test_reembed_copies_every_memory_with_the_new_model(tmp_path: Path) -> None:
    rows = old_store(tmp_path / "old")
    settings = load_settings(None, {"data_dir": tmp_path / "new"})
    assert reembed(settings, tmp_path / "old", tmp_path / "new") == 2
    assert store_identity(str(tmp_path / "new" / "lancedb"), "memories") == (
        "all-MiniLM-L6-v2-int8-dynq8",
        384,
    )
    assert store_identity(str(tmp_path / "old" / "lancedb"), "memories") == ("old-model", 8)
    new = LanceStore(
        str(tmp_path / "new" / "lancedb"),
        table="memories",
        model_name="all-MiniLM-L6-v2-int8-dynq8",
        dim=384,
    )
    copied = {m.id: (m, v, t) for m, v, t in new.scan()}
    for m in rows:
        got, vector, tokens = copied[m.id]
        assert (got.text, got.created_at, got.metadata) == (m.text, m.created_at, m.metadata)
        assert got.language == m.language  # carried over as stored, not detected again
        assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-3
        assert tokens is not None and tokens.dtype == np.int8  # late interaction is on by default
    cat, tax = (copied[m.id][1] for m in rows)
    assert float(cat @ tax) < 0.3  # real embeddings, not the old constant vectors
    with pytest.raises(ConfigError, match="already holds a store"):
        reembed(settings, tmp_path / "old", tmp_path / "new")
    with pytest.raises(ConfigError, match="no memoryd store"):
        reembed(settings, tmp_path / "missing", tmp_path / "other")
