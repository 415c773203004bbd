"""Plain-numpy twins of the kernels in ``kernels.py``: same names, signatures and results.

They exist to be obviously correct (full sorts, whole-array expressions), not fast; the
property tests hold the kernels to them. The formulas are documented on the kernels.
Float results agree to float32 rounding: BLAS and the kernels sum dot products in
different orders, so bit-for-bit agreement holds only where every sum is exact.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from memoryd_native.kernels import (
    F32,
    F64,
    FUSION_PRESCORED,
    FUSION_RRF,
    I64,
    N_PARAMS,
    N_STAGES,
    P_BM25_SCALE,
    P_DECAY_FLOOR,
    P_DECAY_HALF_LIFE,
    P_IMPORTANCE_WEIGHT,
    P_LENGTH_ANCHOR,
    P_LENGTH_WEIGHT,
    P_MIN_SCORE,
    P_MODE,
    P_RECENCY_HALF_LIFE,
    P_RECENCY_WEIGHT,
    P_REINFORCEMENT,
    P_RRF_K,
    P_W_BM25,
    P_W_VEC,
    S_DECAY,
    S_FINAL,
    S_FUSED,
    S_IMPORTANCE,
    S_LENGTH,
    S_RECENCY,
    U8,
    Mask,
)

_LN2 = float(np.log(2.0))
_F32_MAX = float(np.finfo(np.float32).max)


def topk_dot(matrix: F32, query: F32, mask: Mask, k: int) -> tuple[I64, F32]:
    """Twin of ``kernels.topk_dot``."""
    if query.shape[0] != matrix.shape[1]:
        raise ValueError("query length differs from the matrix's row length")
    if mask.shape[0] != matrix.shape[0]:
        raise ValueError("mask length differs from the number of matrix rows")
    scores = (matrix @ query).astype(np.float32)
    return topk_scores(scores, mask, k)


def widen_rows(matrix: npt.NDArray[np.float16], rows: I64) -> F32:
    """Twin of ``kernels.widen_rows``."""
    return matrix[rows].astype(np.float32)


def ranks_desc(scores: F32, present: Mask) -> I64:
    """Twin of ``kernels.ranks_desc``."""
    if present.shape[0] != scores.shape[0]:
        raise ValueError("present differs in length from scores")
    order = np.lexsort((np.arange(len(scores)), -scores))
    out = np.full(len(scores), -1, dtype=np.int64)
    kept = order[np.asarray(present, dtype=bool)[order]]
    out[kept] = np.arange(len(kept))
    return out


def topk_dot_q8(
    matrix: F32, codes: object, scales: object, l1: object, query: F32, mask: Mask, k: int
) -> tuple[I64, F32]:
    """Twin of ``kernels.topk_dot_q8``: the codes only speed the kernel up; the answer is
    ``topk_dot``'s."""
    return topk_dot(matrix, query, mask, k)


def _bm25_term(
    rows: I64, tf: F32, weight: float, lengths: F32, avgdl: float, k1: float, b: float
) -> F32:
    """One query term's BM25 score for each of its postings, float32 (as the kernel adds)."""
    norm = k1 * (1.0 - b + b * lengths[rows].astype(np.float64) / avgdl)
    return (weight * tf.astype(np.float64) * (k1 + 1.0) / (tf + norm)).astype(np.float32)


def bm25_sparse(
    rows: I64,
    tf: F32,
    starts: I64,
    weights: F64,
    lengths: F32,
    avgdl: float,
    k1: float,
    b: float,
    scratch: F32,
) -> tuple[I64, F32]:
    """Twin of ``kernels.bm25_sparse`` (``scratch`` is not used: it scores densely)."""
    if starts.shape[0] != weights.shape[0] + 1:
        raise ValueError("starts must have one entry per term plus one")
    if np.any(weights <= 0) or np.any(tf <= 0):
        raise ValueError("term weights and counts must be > 0")
    scores = np.zeros(lengths.shape[0], dtype=np.float32)
    for t in range(weights.shape[0]):
        s, e = int(starts[t]), int(starts[t + 1])
        # one term at a time, as the kernel adds them (float32 sums depend on the order)
        terms = _bm25_term(rows[s:e], tf[s:e], float(weights[t]), lengths, avgdl, k1, b)
        np.add.at(scores, rows[s:e], terms)
    touched = np.flatnonzero(scores).astype(np.int64)
    return touched, scores[touched]


def topk_scores(scores: F32, mask: Mask, k: int) -> tuple[I64, F32]:
    """Twin of ``kernels.topk_scores``."""
    if k < 0:
        raise ValueError("k must be >= 0")
    if mask.shape[0] != scores.shape[0]:
        raise ValueError("mask length differs from the number of scores")
    eligible = np.flatnonzero(mask)
    # lexsort sorts by the last key first: score descending, then row index ascending.
    order = np.lexsort((eligible, -scores[eligible]))[:k]
    idx = eligible[order].astype(np.int64)
    return idx, scores[idx].astype(np.float32)


def _unit_clip(x: F64) -> F64:
    """Clip to [0, 1]; NaN becomes 0."""
    return np.where(x > 0.0, np.minimum(x, 1.0), 0.0)


def _halvings(age: F64, half_life: float | F64) -> F64:
    """exp(-ln2 * age / half_life): 1 at age 0, halving every half_life."""
    # A tiny half-life overflows age / half_life to inf, and exp(-inf) = 0 is the answer.
    with np.errstate(over="ignore"):
        return np.exp(-_LN2 * age / half_life)


def fuse_and_boost(
    vec_score: F32,
    vec_rank: I64,
    bm25_score: F32,
    bm25_rank: I64,
    age_days: F32,
    importance: F32,
    access_count: I64,
    text_len: I64,
    params: F64,
    stages_out: F32,
    keep_out: U8,
) -> tuple[F32, int]:
    """Twin of ``kernels.fuse_and_boost``."""
    n = vec_score.shape[0]
    arrays = (vec_rank, bm25_score, bm25_rank, age_days, importance, access_count, text_len)
    if any(a.shape[0] != n for a in (*arrays, keep_out)):
        raise ValueError("all candidate arrays must have the same length")
    if stages_out.shape != (n, N_STAGES):
        raise ValueError("stages_out must have shape (n, 6)")
    if params.shape[0] != N_PARAMS:
        raise ValueError("params must come from make_params (wrong length)")
    p = [float(x) for x in params]
    rrf_k, w_vec, w_bm25 = p[P_RRF_K], p[P_W_VEC], p[P_W_BM25]

    age = age_days.astype(np.float64)
    age = np.where(age > 0.0, age, 0.0)
    vec_present = vec_rank >= 0
    bm25_present = bm25_rank >= 0

    s = np.zeros(n, dtype=np.float64)
    if p[P_MODE] == FUSION_PRESCORED:
        v = vec_score.astype(np.float64)
        s += np.where(vec_present & (v > 0.0), np.minimum(v, _F32_MAX), 0.0)
    elif p[P_MODE] == FUSION_RRF:
        rrf_norm = (w_vec + w_bm25) / (rrf_k + 1.0)
        if rrf_norm > 0.0:
            # Absent legs (rank -1) are computed at rank 0 and then discarded.
            s += np.where(vec_present, w_vec / (rrf_k + np.maximum(vec_rank, 0) + 1.0), 0.0)
            s += np.where(bm25_present, w_bm25 / (rrf_k + np.maximum(bm25_rank, 0) + 1.0), 0.0)
            s /= rrf_norm
    else:
        s += np.where(vec_present, w_vec * _unit_clip(vec_score.astype(np.float64)), 0.0)
        b = bm25_score.astype(np.float64)
        b = np.where(b > 0.0, b, 0.0)
        s += np.where(bm25_present, w_bm25 * np.tanh(b / (2.0 * p[P_BM25_SCALE])), 0.0)
    stages_out[:, S_FUSED] = s

    if p[P_RECENCY_WEIGHT] != 0.0 and p[P_RECENCY_HALF_LIFE] > 0.0:
        s = s + p[P_RECENCY_WEIGHT] * _halvings(age, p[P_RECENCY_HALF_LIFE])
    stages_out[:, S_RECENCY] = s

    iw = p[P_IMPORTANCE_WEIGHT]
    s = s * ((1.0 - iw) + iw * _unit_clip(importance.astype(np.float64)))
    stages_out[:, S_IMPORTANCE] = s

    if p[P_LENGTH_WEIGHT] > 0.0:
        ratio = np.maximum(text_len.astype(np.float64) / p[P_LENGTH_ANCHOR], 1.0)
        s = s * (1.0 / (1.0 + p[P_LENGTH_WEIGHT] * np.log2(ratio)))
    stages_out[:, S_LENGTH] = s

    if p[P_DECAY_HALF_LIFE] > 0.0:
        accesses = np.maximum(access_count, 0).astype(np.float64)
        h = p[P_DECAY_HALF_LIFE] * (1.0 + p[P_REINFORCEMENT] * np.log1p(accesses))
        floor = p[P_DECAY_FLOOR]
        s = s * (floor + (1.0 - floor) * _halvings(age, h))
    stages_out[:, S_DECAY] = s

    final = s.astype(np.float32)
    stages_out[:, S_FINAL] = final
    # Compare in float64 like the kernel: a float32 comparison would round min_score.
    keep = final.astype(np.float64) >= p[P_MIN_SCORE]
    keep_out[:] = keep
    return final, int(keep.sum())


def mmr_select(vectors: F32, scores: F32, k: int, lam: float) -> I64:
    """Twin of ``kernels.mmr_select``."""
    n = vectors.shape[0]
    if k < 0:
        raise ValueError("k must be >= 0")
    if not 0.0 <= lam <= 1.0:
        raise ValueError("lam must be in [0, 1]")
    if scores.shape[0] != n:
        raise ValueError("scores length differs from the number of vectors")
    m = min(k, n)
    picked = np.empty(m, dtype=np.int64)
    if m == 0:
        return picked
    s64 = scores.astype(np.float64)
    taken = np.zeros(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    best = int(np.argmax(scores))  # argmax returns the first of equal maxima
    for p in range(m):
        if p > 0:
            gain = lam * s64 - (1.0 - lam) * max_sim
            gain[taken] = -np.inf
            best = int(np.argmax(gain))
        picked[p] = best
        taken[best] = True
        max_sim = np.maximum(max_sim, (vectors @ vectors[best]).astype(np.float64))
    return picked


def maxsim(query_tokens: F32, doc_tokens: F32, doc_offsets: I64) -> F32:
    """Twin of ``kernels.maxsim``."""
    if doc_offsets.shape[0] < 1:
        raise ValueError("doc_offsets must have n + 1 entries")
    if query_tokens.shape[1] != doc_tokens.shape[1]:
        raise ValueError("query and document token vectors differ in length")
    n = doc_offsets.shape[0] - 1
    if doc_offsets[0] < 0 or doc_offsets[n] > doc_tokens.shape[0]:
        raise ValueError("doc_offsets point outside doc_tokens")
    if np.any(np.diff(doc_offsets) < 0):
        raise ValueError("doc_offsets must be non-decreasing")
    q = query_tokens.shape[0]
    out = np.zeros(n, dtype=np.float32)
    if q == 0:
        return out
    for i in range(n):
        tokens = doc_tokens[doc_offsets[i] : doc_offsets[i + 1]]
        if tokens.shape[0] == 0:
            continue
        best = (query_tokens @ tokens.T).max(axis=1).astype(np.float64)
        out[i] = np.float32(best.sum() / q)
    return out


def nb_language_scores(
    text: U8,
    nextmove: npt.NDArray[np.uint32],
    rowbase: I64,
    output: npt.NDArray[np.int32],
    ptc: npt.NDArray[np.uint16],
    lut: F32,
    pc: F32,
) -> tuple[F32, int]:
    counts: dict[int, int] = {}
    state = 0
    for byte in text.tolist():
        state = int(nextmove[rowbase[state] + byte])
        if output[state] >= 0:
            counts[int(output[state])] = counts.get(int(output[state]), 0) + 1
    if not counts:
        return pc.copy(), 0
    idx = np.array(sorted(counts), dtype=np.int64)
    weights = np.log1p(np.array([counts[int(f)] for f in idx], dtype=np.float32))
    return (weights @ lut[ptc[idx]] + pc).astype(np.float32), len(counts)
