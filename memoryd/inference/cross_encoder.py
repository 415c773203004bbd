"""Cross-encoder reranker: any ONNX cross-encoder the user points at.

The directory holds ``model.onnx`` and ``tokenizer.json``. Each (query, memory text) pair
is tokenized as a pair (truncated to ``max_tokens``) and fed as ``input_ids``,
``attention_mask`` and, if the model takes it, ``token_type_ids``; the model returns one
logit per pair (shape [B] or [B, 1]), turned into a relevance in [0, 1] by a sigmoid.
No cross-encoder weights ship on PyPI, so none is built in: configure
``recall.cross_encoder_dir``. Inference runs on its own thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from memoryd.core.errors import ConfigError
from memoryd.core.records import Memory


class CrossEncoderReranker:
    def __init__(self, model_dir: Path, *, max_tokens: int = 256, intra_op_threads: int = 1):
        model, tok = model_dir / "model.onnx", model_dir / "tokenizer.json"
        for path in (model, tok):
            if not path.is_file():
                raise ConfigError(f"recall.cross_encoder_dir: {path} does not exist")
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(
                str(model), sess_options=options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(tok))
        except Exception as e:
            raise ConfigError(f"cannot load cross-encoder {model}: {e}") from e
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=pad_id if pad_id is not None else 0, pad_token="[PAD]")
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise ConfigError(
                f"cross-encoder {model} must take input_ids and attention_mask; "
                f"it takes {sorted(self._inputs)}"
            )
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memoryd-rerank")
        self.name = model_dir.name

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Blocking: relevance in [0, 1] of each text to the query."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        enc = self._tokenizer.encode_batch([(query, t) for t in texts])
        feeds = {
            "input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
        }
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.asarray([e.type_ids for e in enc], dtype=np.int64)
        (logits,) = self._session.run(None, feeds)
        logits = np.asarray(logits, dtype=np.float64).reshape(len(texts), -1)[:, 0]
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)

    async def score(self, query: str, memories: Sequence[Memory]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        texts = [m.text for m in memories]
        return await loop.run_in_executor(self._pool, self.scores, query, texts)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
