"""The memory's language: stored in its own column, read back, and added to old stores."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import lancedb
import numpy as np

from memoryd.core.records import Memory
from memoryd.storage.lance_store import LanceStore, make_schema, to_arrow
from memoryd.storage.repository import Repository

from ..conftest import record

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def mem(i: int, text: str) -> Memory:
    return record(i, text=text, summary=text, created_at=NOW, updated_at=NOW)


def vec(i: int) -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[i % 8] = 1.0
    return v


async def test_languages_are_detected_stored_and_read_back(tmp_path: Path) -> None:
    repo = Repository(LanceStore(str(tmp_path), table="m", model_name="x", dim=8))
    repo.open()
    texts = {
        "en": "The user prefers dark mode in every editor they use",
        "de": "Der Nutzer bevorzugt in jedem Editor den dunklen Modus",
        "zh": "用户在每个编辑器里都喜欢深色模式",
        "ja": "ユーザーはどのエディタでもダークモードが好きです",
        "ko": "사용자는 모든 편집기에서 다크 모드를 선호합니다",
        "cs": "Uživatel dává přednost tmavému režimu v každém editoru",
    }
    for i, text in enumerate(texts.values()):
        await repo.add(mem(i, text), vec(i))
    repo.close()
    again = Repository(LanceStore(str(tmp_path), table="m", model_name="x", dim=8))
    again.open()
    try:
        got = {m.language for m in again.visible(["agent:a"], now=NOW)}
        assert got == set(texts)
    finally:
        again.close()


async def test_a_store_without_the_language_column_opens_and_gets_it(tmp_path: Path) -> None:
    old_schema = make_schema("x", 8)
    old_schema = old_schema.remove(old_schema.get_field_index("language"))
    db = lancedb.connect(str(tmp_path))
    table = db.create_table("m", schema=old_schema)
    old = to_arrow(
        make_schema("x", 8), [(mem(0, "Der Zug nach Berlin fährt um acht Uhr ab"), vec(0), None)]
    )
    table.add(old.drop(["language"]))
    repo = Repository(LanceStore(str(tmp_path), table="m", model_name="x", dim=8))
    repo.open()
    try:
        first = repo.get(mem(0, "").id)
        assert first is not None and first.language == "de"  # detected on load
        await repo.add(mem(1, "Le train pour Paris part à huit heures du matin"), vec(1))
    finally:
        repo.close()
    reopened = lancedb.connect(str(tmp_path)).open_table("m")
    assert "language" in reopened.schema.names
    assert reopened.schema.metadata[b"memoryd.embedding_model"] == b"x"
    rows = reopened.to_arrow().sort_by("id")
    assert rows.column("language").to_pylist() == [None, "fr"]
