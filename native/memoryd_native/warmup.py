"""Compile (or load from numba's on-disk cache) every kernel before the daemon serves.

Numba compiles one specialisation per argument-type signature on its first call: ~1-1.6 s
each cold, ~0.2 s from cache. ``warm_up`` makes those first calls at start-up, with the
dtypes and layouts production passes, so no user request ever pays for compilation.
A caller passing anything else (int32 ranks, a strided view, a read-only buffer) gets a
fresh compile on that request: convert at the boundary instead.
"""

from __future__ import annotations

import time

import numpy as np

from memoryd_native import kernels as K


def warm_up() -> float:
    """Call every kernel once per production signature; return the seconds it took."""
    start = time.perf_counter()
    n, d = 4, 8
    matrix = np.ones((n, d), dtype=np.float32)
    query = np.ones(d, dtype=np.float32)
    scores = np.ones(n, dtype=np.float32)
    k = 2

    for mask in (np.ones(n, dtype=np.uint8), np.ones(n, dtype=np.bool_)):
        K.topk_dot(matrix, query, mask, k)
        K.topk_dot_q8(matrix, *K.quantize_rows(matrix), query, mask, k)
        half = matrix.astype(np.float16)
        K.topk_dot_f16(half, query, mask, k)
        K.topk_dot_q8_f16(half, *K.quantize_rows(half), query, mask, k)
        K.topk_scores(scores, mask, k)

    ranks = np.arange(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    K.fuse_and_boost(
        scores,
        ranks,
        scores,
        ranks,
        scores,
        scores,
        counts,
        counts,
        K.make_params(),
        np.empty((n, K.N_STAGES), dtype=np.float32),
        np.empty(n, dtype=np.uint8),
    )

    K.mmr_select(matrix, scores, k, 0.5)
    # the candidates' rows (float16 in the hot index) and their ranks by each leg
    K.widen_rows(matrix.astype(np.float16), np.arange(n, dtype=np.int64))
    K.ranks_desc(scores, np.ones(n, dtype=np.bool_))
    rows = np.arange(n, dtype=np.int64)
    starts = np.array([0, n], dtype=np.int64)
    K.bm25_sparse(rows, scores, starts, np.ones(1), scores, 1.0, 1.2, 0.75, np.zeros(n, np.float32))
    K.maxsim(matrix, matrix, np.array([0, 2, 4], dtype=np.int64))
    K.maxsim(matrix, (matrix * 127).astype(np.int8), np.array([0, 2, 4], dtype=np.int64))
    # language identification: the text as production passes it (read-only bytes)
    K.nb_language_scores(
        np.frombuffer(b"warm up", dtype=np.uint8),
        np.zeros(256, dtype=np.uint32),
        np.zeros(1, dtype=np.int64),
        np.full(1, -1, dtype=np.int32),
        np.zeros((1, 2), dtype=np.uint16),
        K.F16_TO_F32,
        np.zeros(2, dtype=np.float32),
    )
    return time.perf_counter() - start
