"""The two real rerankers: an ONNX cross-encoder (a tiny one built here, since no
cross-encoder weights ship on PyPI) and late interaction over the built-in embedder."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from memoryd.core.policy import AccessPolicy
from memoryd.core.retrieval import LateInteractionReranker, Rerank, RetrievalConfig, Retriever
from memoryd.core.service import MemoryService, NewMemory, RecallQuery, ServiceLimits
from memoryd.inference.batcher import BatchingEmbedder
from memoryd.inference.cross_encoder import CrossEncoderReranker
from memoryd.inference.onnx_embedder import OnnxEmbedder, builtin_model_files
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.repository import Repository


def build_cross_encoder(directory: Path, favoured_word: str) -> None:
    """A cross-encoder whose logit is 4 x (times the favoured word's token appears in the
    second segment of the pair) - 2: relevance ~0.12 without it, ~0.88 with it once."""
    tokenizer_json = builtin_model_files().tokenizer
    shutil.copy(tokenizer_json, directory / "tokenizer.json")
    from tokenizers import Tokenizer

    token = Tokenizer.from_file(str(tokenizer_json)).token_to_id(favoured_word)
    assert token is not None
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "S"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["B", "S"])
    types = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["B", "S"])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", 1])
    nodes = [
        helper.make_node(
            "Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.INT64, [], [token])
        ),
        helper.make_node("Equal", ["input_ids", "k"], ["hit"]),
        helper.make_node("Cast", ["hit"], ["hitf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["segf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["hitf", "segf"], ["h1"]),
        helper.make_node("Mul", ["h1", "maskf"], ["h2"]),
        helper.make_node(
            "Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])
        ),
        helper.make_node("ReduceSum", ["h2", "axes"], ["count"], keepdims=1),
        helper.make_node(
            "Constant", [], ["four"], value=helper.make_tensor("four", TensorProto.FLOAT, [], [4.0])
        ),
        helper.make_node(
            "Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
        ),
        helper.make_node("Mul", ["count", "four"], ["scaled"]),
        helper.make_node("Sub", ["scaled", "two"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny-cross-encoder", [ids, mask, types], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, directory / "model.onnx")


def test_cross_encoder_scores_pairs_with_the_model(tmp_path: Path) -> None:
    build_cross_encoder(tmp_path, "banana")
    ce = CrossEncoderReranker(tmp_path)
    try:
        scores = ce.scores("what fruit?", ["I ate an apple", "I ate a banana", "banana banana"])
        assert scores.shape == (3,)
        assert scores[0] == pytest.approx(1 / (1 + np.exp(2)), rel=1e-4)
        assert scores[1] == pytest.approx(1 / (1 + np.exp(-2)), rel=1e-4)
        assert scores[2] > scores[1]
        # The query is the first segment: the word there does not count.
        assert ce.scores("banana?", ["I ate an apple"])[0] == pytest.approx(scores[0], rel=1e-4)
    finally:
        ce.close()


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    return OnnxEmbedder(builtin_model_files())


@pytest.fixture
async def real_service(tmp_path: Path, model: OnnxEmbedder):  # type: ignore[no-untyped-def]
    embedder = BatchingEmbedder(lambda: model)
    embedder.start()
    repo = Repository(LanceStore(str(tmp_path), table="m", model_name=model.name, dim=model.dim))
    repo.open()
    ce_dir = tmp_path / "ce"
    ce_dir.mkdir()
    build_cross_encoder(ce_dir, "banana")
    ce = CrossEncoderReranker(ce_dir)
    rerankers = {
        Rerank.LATE_INTERACTION: LateInteractionReranker(repo, embedder),
        Rerank.CROSS_ENCODER: ce,
    }
    service = MemoryService(
        repo,
        embedder,
        AccessPolicy(),
        ServiceLimits(token_vectors=True),
        retriever=Retriever(repo, RetrievalConfig(), rerankers),  # type: ignore[arg-type]
    )
    yield service
    ce.close()
    repo.close()
    embedder.close()


FRUIT = [
    "I had an apple for breakfast today",
    "Pears are my favourite fruit in autumn",
    "I bought a banana at the market",
    "Oranges were on sale at the grocery",
]


async def test_cross_encoder_reorders_recall_through_the_service(
    real_service: MemoryService,
) -> None:
    for text in FRUIT:
        await real_service.store_memory(NewMemory(agent_id="a", text=text))
    q = RecallQuery(agent_id="a", query="which fruit did I eat?", limit=4, explain=True)
    plain = await real_service.recall(q)
    reranked = await real_service.recall(
        RecallQuery(
            agent_id="a", query=q.query, limit=4, explain=True,
            options={"rerank": "cross-encoder", "rerank_weight": 0.9},
        )
    )  # fmt: skip
    assert reranked[0].memory.text == "I bought a banana at the market"
    assert plain[0].memory.text != reranked[0].memory.text or plain[0].explain.reranker == ""
    assert reranked[0].explain.reranker == "cross-encoder"


async def test_late_interaction_uses_stored_token_vectors(real_service: MemoryService) -> None:
    for text in FRUIT:
        await real_service.store_memory(NewMemory(agent_id="a", text=text))
    ids = [m.id for m in real_service.list("a").memories]
    assert all(real_service.store.tokens_of(i) is not None for i in ids)
    hits = await real_service.recall(
        RecallQuery(
            agent_id="a", query="banana from the market", limit=4, explain=True,
            options={"rerank": "late-interaction", "rerank_weight": 0.5},
        )
    )  # fmt: skip
    assert hits[0].memory.text == "I bought a banana at the market"
    assert {h.explain.reranker for h in hits} == {"late-interaction"}
    assert all(0.0 <= h.explain.reranked <= 1.0 for h in hits)
    # A memory stored while token vectors were off cannot be scored: fused order, no error.
    real_service.limits = ServiceLimits(token_vectors=False)
    await real_service.store_memory(NewMemory(agent_id="a", text="Bananas ripen fast in summer"))
    hits = await real_service.recall(
        RecallQuery(
            agent_id="a", query="banana", limit=5, explain=True,
            options={"rerank": "late-interaction"},
        )
    )  # fmt: skip
    assert {h.explain.reranker for h in hits} == {"fallback:no-token-vectors"}
