"""The built-in ONNX embedder (real model from the PyPI packages) and its batching front."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from memoryd.core.errors import ConfigError
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.inference.onnx_embedder import OnnxEmbedder, builtin_model_files, model_files_from_dir


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    return OnnxEmbedder(builtin_model_files(), max_tokens=256, intra_op_threads=1)


def test_vectors_are_384d_and_unit_length(model: OnnxEmbedder) -> None:
    v = model.embed(["hello world", "a much longer sentence about cooking pasta at home"])
    assert v.shape == (2, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


PAIRS = [
    ("The user prefers dark mode in the editor", "They like a dark theme for coding"),
    ("My flight to Tokyo leaves on Monday", "I am flying to Japan at the start of the week"),
    ("The cat is sleeping on the sofa", "A kitten naps on the couch"),
]
UNRELATED = [
    ("The user prefers dark mode in the editor", "Quarterly tax filings are due in April"),
    ("My flight to Tokyo leaves on Monday", "Add two cups of flour to the dough"),
    ("The cat is sleeping on the sofa", "The database migration failed on step 3"),
]


def test_similar_pairs_score_far_above_unrelated(model: OnnxEmbedder) -> None:
    def cos(a: str, b: str) -> float:
        x, y = model.embed([a, b])
        return float(x @ y)

    similar = [cos(a, b) for a, b in PAIRS]
    unrelated = [cos(a, b) for a, b in UNRELATED]
    assert min(similar) > 0.4, similar
    assert max(unrelated) < 0.2, unrelated
    assert min(similar) - max(unrelated) > 0.3


def test_batch_equals_one_by_one_and_padding_does_not_leak(model: OnnxEmbedder) -> None:
    texts = ["short", "a considerably longer sentence that needs many more tokens than the first"]
    batch = model.embed(texts)
    single = np.stack([model.embed([t])[0] for t in texts])
    assert np.allclose(batch, single, atol=1e-4)


def test_text_longer_than_the_token_limit_is_truncated_not_refused(model: OnnxEmbedder) -> None:
    v = model.embed(["word " * 2000])
    assert v.shape == (1, 384) and np.isfinite(v).all()


def test_model_dir_must_hold_model_and_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.onnx"):
        model_files_from_dir(tmp_path)


async def test_batcher_shares_runs_dedupes_and_caches(model: OnnxEmbedder) -> None:
    embedder = BatchingEmbedder(lambda: model, workers=1, max_batch=16, cache_size=100)
    embedder.start()
    try:
        texts = [f"note number {i}" for i in range(20)] + ["note number 3"] * 5
        vectors = await asyncio.gather(*(embedder.embed_one(t) for t in texts))
        assert np.allclose(vectors[3], vectors[-1])
        assert np.allclose(vectors[0], model.embed(["note number 0"])[0], atol=1e-4)
        # 25 requests, 20 distinct texts, fewer model runs than texts.
        assert embedder.batched_texts == 20
        assert embedder.batches < 20
        await embedder.embed_query("cached query")
        runs = embedder.batches
        again = await embedder.embed_query("cached query")
        assert embedder.batches == runs and again.shape == (384,)
        assert embedder.cache_stats()[0] >= 1
    finally:
        embedder.close()
