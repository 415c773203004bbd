"""The numba kernels of the recall hot path: exact top-k, score fusion, MMR, MaxSim.

Every kernel is ``@njit(cache=True, nogil=True)``, serial (the two cores are shared with
the embedder), and has a plain-numpy twin of the same name and signature in
``reference.py``; property tests prove the two agree. Kernels compile lazily per
argument-type signature, so ``warmup.warm_up()`` calls each one with the production
dtypes at daemon start. Passing other dtypes or layouts (int32 ranks, a strided column
view, a read-only array) still works but compiles a new specialisation on that call.

Conventions shared by all kernels:

- vectors and scores are C-contiguous float32; indices, ranks and counts are int64;
  masks are uint8 or bool (nonzero = eligible); ``k`` is a Python int;
- results are ordered best first; equal scores are ordered by lower row index;
- a negative ``k`` or mismatched shapes raise ``ValueError``; ``k`` larger than the
  number of eligible rows returns all of them;
- similarity inputs (matrix, query, vectors, tokens, scores for ranking) must be finite.
  ``fuse_and_boost`` alone accepts any float input and never outputs NaN.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.uint8] | npt.NDArray[np.bool_]

# Dot products may be reassociated (SIMD lanes, fused multiply-add): a scan runs several
# times faster than one summed strictly in order. NaN/inf semantics are kept (no
# "nnan"/"ninf"), so only rounding changes.
_DOT_FASTMATH = {"reassoc", "contract"}

# --- fuse_and_boost parameter layout (float64 array of length N_PARAMS) ----------------
P_MODE = 0  # FUSION_RRF, FUSION_WEIGHTED or FUSION_PRESCORED
P_RRF_K = 1  # RRF rank offset k (> -1)
P_W_VEC = 2  # weight of the vector leg (>= 0)
P_W_BM25 = 3  # weight of the BM25 leg (>= 0)
P_BM25_SCALE = 4  # BM25 score that maps to tanh(0.5) ~ 0.46 in weighted mode (> 0)
P_RECENCY_WEIGHT = 5  # additive recency bonus at age 0 (>= 0; 0 disables)
P_RECENCY_HALF_LIFE = 6  # days for the recency bonus to halve (> 0)
P_IMPORTANCE_WEIGHT = 7  # in [0, 1]; 0 disables
P_LENGTH_WEIGHT = 8  # >= 0; 0 disables
P_LENGTH_ANCHOR = 9  # characters below which no length penalty applies (> 0)
P_DECAY_HALF_LIFE = 10  # days; <= 0 disables time decay
P_DECAY_FLOOR = 11  # in [0, 1]: the multiplier an infinitely old memory keeps
P_REINFORCEMENT = 12  # >= 0: how much each access stretches the decay half-life
P_MIN_SCORE = 13  # candidates with final < min_score get keep = 0
N_PARAMS = 14

FUSION_RRF = 0
FUSION_WEIGHTED = 1
FUSION_PRESCORED = 2  # vec_score is already the fused score: apply the boosts only

# --- columns of fuse_and_boost's stages_out (float32 [n, N_STAGES]) ----------------------
S_FUSED = 0
S_RECENCY = 1
S_IMPORTANCE = 2
S_LENGTH = 3
S_DECAY = 4
S_FINAL = 5
N_STAGES = 6
STAGE_NAMES = ("fused", "after_recency", "after_importance", "after_length", "after_decay", "final")

_LN2 = math.log(2.0)
_F32_MAX = float(np.finfo(np.float32).max)


def make_params(
    *,
    mode: int = FUSION_RRF,
    rrf_k: float = 60.0,
    w_vec: float = 0.7,
    w_bm25: float = 0.3,
    bm25_scale: float = 5.0,
    recency_weight: float = 0.1,
    recency_half_life_days: float = 14.0,
    importance_weight: float = 0.3,
    length_weight: float = 0.5,
    length_anchor: float = 500.0,
    decay_half_life_days: float = 60.0,
    decay_floor: float = 0.5,
    reinforcement: float = 0.5,
    min_score: float = 0.0,
) -> npt.NDArray[np.float64]:
    """Validate the scoring settings and pack them into the array ``fuse_and_boost`` takes.

    The defaults are the product's documented defaults; see ``fuse_and_boost`` for what
    each one does. Raises ``ValueError`` naming the first setting out of range.
    """
    values = dict(locals())
    checks = (
        ("mode", mode in (FUSION_RRF, FUSION_WEIGHTED, FUSION_PRESCORED), "0, 1 or 2 (FUSION_*)"),
        ("rrf_k", rrf_k > -1.0, "> -1"),
        ("w_vec", w_vec >= 0.0, ">= 0"),
        ("w_bm25", w_bm25 >= 0.0, ">= 0"),
        ("bm25_scale", bm25_scale > 0.0, "> 0"),
        ("recency_weight", recency_weight >= 0.0, ">= 0"),
        ("recency_half_life_days", recency_half_life_days > 0.0, "> 0"),
        ("importance_weight", 0.0 <= importance_weight <= 1.0, "in [0, 1]"),
        ("length_weight", length_weight >= 0.0, ">= 0"),
        ("length_anchor", length_anchor > 0.0, "> 0"),
        ("decay_floor", 0.0 <= decay_floor <= 1.0, "in [0, 1]"),
        ("reinforcement", reinforcement >= 0.0, ">= 0"),
    )
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"{name} is {value!r}; it must be a finite number")
    for name, ok, rule in checks:
        if not ok:
            raise ValueError(f"{name} is {values[name]!r}; it must be {rule}")

    params = np.empty(N_PARAMS, dtype=np.float64)
    params[P_MODE] = mode
    params[P_RRF_K] = rrf_k
    params[P_W_VEC] = w_vec
    params[P_W_BM25] = w_bm25
    params[P_BM25_SCALE] = bm25_scale
    params[P_RECENCY_WEIGHT] = recency_weight
    params[P_RECENCY_HALF_LIFE] = recency_half_life_days
    params[P_IMPORTANCE_WEIGHT] = importance_weight
    params[P_LENGTH_WEIGHT] = length_weight
    params[P_LENGTH_ANCHOR] = length_anchor
    params[P_DECAY_HALF_LIFE] = decay_half_life_days
    params[P_DECAY_FLOOR] = decay_floor
    params[P_REINFORCEMENT] = reinforcement
    params[P_MIN_SCORE] = min_score
    return params


# --- helpers -----------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True, fastmath=_DOT_FASTMATH)
def _dot(a: F32, b: F32) -> np.float32:
    acc = np.float32(0.0)
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@numba.njit(cache=True, nogil=True)
def _worse(score_a: float, idx_a: int, score_b: float, idx_b: int) -> bool:
    """True if (score_a, idx_a) ranks below (score_b, idx_b): lower score, then higher index."""
    return score_a < score_b or (score_a == score_b and idx_a > idx_b)


@numba.njit(cache=True, nogil=True)
def _sift_down(heap_s: F32, heap_i: I64, size: int, pos: int) -> None:
    """Restore the min-heap (worst item at the root) below ``pos``."""
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        right = child + 1
        if right < size and _worse(heap_s[right], heap_i[right], heap_s[child], heap_i[child]):
            child = right
        if not _worse(heap_s[child], heap_i[child], heap_s[pos], heap_i[pos]):
            return
        heap_s[pos], heap_s[child] = heap_s[child], heap_s[pos]
        heap_i[pos], heap_i[child] = heap_i[child], heap_i[pos]
        pos = child


@numba.njit(cache=True, nogil=True)
def _heap_offer(heap_s: F32, heap_i: I64, size: int, score: float | np.float32, idx: int) -> int:
    """Offer one item to a heap holding at most ``heap_s.shape[0]`` items; return new size.

    Rows arrive in increasing index order, so a newcomer whose score equals the root's
    ranks below it (higher index) and is rejected: only a strictly higher score enters.

    Loops test ``size < m or score > heap_s[0]`` themselves and call this only when the
    item enters: a call costs ~20 ns even when it rejects (numba counts the references of
    the arrays passed), which made a top-k of 13,000 BM25 scores take 0.31 ms against
    0.02 ms with the test in the loop.
    """
    if size < heap_s.shape[0]:
        pos = size
        heap_s[pos] = score
        heap_i[pos] = idx
        while pos > 0:  # sift up
            parent = (pos - 1) // 2
            if not _worse(heap_s[pos], heap_i[pos], heap_s[parent], heap_i[parent]):
                break
            heap_s[pos], heap_s[parent] = heap_s[parent], heap_s[pos]
            heap_i[pos], heap_i[parent] = heap_i[parent], heap_i[pos]
            pos = parent
        return size + 1
    if score > heap_s[0]:
        heap_s[0] = score
        heap_i[0] = idx
        _sift_down(heap_s, heap_i, size, 0)
    return size


@numba.njit(cache=True, nogil=True)
def _heap_sort_best_first(heap_s: F32, heap_i: I64, size: int) -> None:
    """In-place heapsort of a full min-heap: afterwards index 0 holds the best item."""
    end = size - 1
    while end > 0:
        heap_s[0], heap_s[end] = heap_s[end], heap_s[0]
        heap_i[0], heap_i[end] = heap_i[end], heap_i[0]
        _sift_down(heap_s, heap_i, end, 0)
        end -= 1


@numba.njit(cache=True, nogil=True)
def _count_nonzero(mask: Mask) -> int:
    count = 0
    for i in range(mask.shape[0]):
        if mask[i]:
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _new_heap(mask: Mask, k: int) -> tuple[F32, I64]:
    """Empty (scores, rows) of a top-k over the rows ``mask`` allows: min(k, allowed) slots."""
    if k < 0:
        raise ValueError("k must be >= 0")
    m = min(k, _count_nonzero(mask))
    return np.empty(m, dtype=np.float32), np.empty(m, dtype=np.int64)


# --- 1. exact top-k ----------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def topk_dot(matrix: F32, query: F32, mask: Mask, k: int) -> tuple[I64, F32]:
    """Exact top-k by inner product over the rows the mask allows.

    ``matrix`` float32[n, d], ``query`` float32[d], ``mask`` uint8/bool[n], ``k`` >= 0.
    score_i = sum_j matrix[i, j] * query[j], computed only for rows with mask[i] != 0.
    Returns ``(idx int64[m], scores float32[m])`` with m = min(k, count_nonzero(mask)),
    ordered by score descending, equal scores by lower row index.

    One pass over the matrix with a size-m heap: O(n*d + n*log m) time, O(m) memory.
    """
    n = matrix.shape[0]
    if query.shape[0] != matrix.shape[1]:
        raise ValueError("query length differs from the matrix's row length")
    if mask.shape[0] != n:
        raise ValueError("mask length differs from the number of matrix rows")
    heap_s, heap_i = _new_heap(mask, k)
    m = heap_s.shape[0]
    if m == 0:
        return heap_i, heap_s
    size = 0
    for i in range(n):
        if mask[i]:
            score = _dot(matrix[i], query)
            if size < m or score > heap_s[0]:
                size = _heap_offer(heap_s, heap_i, size, score, i)
    _heap_sort_best_first(heap_s, heap_i, size)
    return heap_i, heap_s


I8 = npt.NDArray[np.int8]
Q8_SLACK = 1e-4  # absolute slack on the error bound: covers float32 rounding of scores


def quantize_rows(vectors: F32 | npt.NDArray[np.float16]) -> tuple[I8, F32, F32]:
    """Per-row int8 codes of float32 (or float16) rows, for ``topk_dot_q8`` (``_f16``).

    Row i is ``codes[i] * scales[i]`` to within ``scales[i] / 2`` per component, with
    ``scales[i] = max |vectors[i]| / 127``; ``l1[i]`` is the L1 norm of that approximation.
    """
    vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, vectors.shape[-1])
    peak = np.abs(vectors).max(axis=1) if vectors.shape[1] else np.zeros(len(vectors))
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    codes = np.clip(np.rint(vectors / safe[:, None]), -127, 127).astype(np.int8)
    l1 = (np.abs(codes).sum(axis=1, dtype=np.int64) * scales).astype(np.float32)
    return codes, scales, l1


@numba.njit(cache=True, nogil=True)
def _q8_shortlist(
    n: int, d: int, codes: I8, scales: F32, l1: F32, query: F32, mask: Mask, k: int
) -> tuple[F32, I64, F64, float]:
    """Step 1 of ``topk_dot_q8`` (and ``_f16``) over n rows of length d: check the shapes,
    bound every allowed row's score from its int8 codes, and shortlist.

    Returns ``(heap_s, heap_i, upper, floor)``: the caller's empty top-k heap (m slots, its
    contents scratch), each allowed row's upper bound, and the m-th best lower bound less
    ``Q8_SLACK``; only rows with ``upper[i] >= floor`` can be in the top k. With m = 0 the
    heap is empty and nothing else is computed.
    """
    if query.shape[0] != d:
        raise ValueError("query length differs from the matrix's row length")
    if mask.shape[0] != n or codes.shape[0] != n or scales.shape[0] != n or l1.shape[0] != n:
        raise ValueError("mask, codes, scales and l1 must have one entry per matrix row")
    if codes.shape[1] != d:
        raise ValueError("codes differ in row length from the matrix")
    heap_s, heap_i = _new_heap(mask, k)
    m = heap_s.shape[0]
    if m == 0:
        return heap_s, heap_i, np.empty(0, dtype=np.float64), 0.0
    peak = 0.0
    q_l1 = 0.0
    for j in range(d):
        a = abs(float(query[j]))
        q_l1 += a
        if a > peak:
            peak = a
    q_scale = peak / 127.0
    q8 = np.zeros(d, dtype=np.int16)
    if q_scale > 0.0:
        for j in range(d):
            q8[j] = np.int16(np.rint(query[j] / q_scale))
    # Integer dot products in a loop of their own: it vectorises; with the bookkeeping
    # below inside the same loop it does not.
    dots = np.zeros(n, dtype=np.int32)
    for i in range(n):
        if mask[i]:
            acc = np.int32(0)
            for j in range(d):
                acc += np.int32(codes[i, j]) * np.int32(q8[j])
            dots[i] = acc
    upper = np.empty(n, dtype=np.float64)
    size = 0
    for i in range(n):
        if not mask[i]:
            continue
        approx = float(dots[i]) * float(scales[i]) * q_scale
        bound = 0.5 * float(scales[i]) * q_l1 + 0.5 * q_scale * float(l1[i]) + Q8_SLACK
        upper[i] = approx + bound
        lower = approx - bound
        if size < m or lower > heap_s[0]:
            size = _heap_offer(heap_s, heap_i, size, np.float32(lower), i)
    floor = float(heap_s[0]) - Q8_SLACK  # the m-th best lower bound (float32-rounded)
    return heap_s, heap_i, upper, floor


@numba.njit(cache=True, nogil=True)
def topk_dot_q8(
    matrix: F32, codes: I8, scales: F32, l1: F32, query: F32, mask: Mask, k: int
) -> tuple[I64, F32]:
    """``topk_dot``'s exact answer, found by scanning int8 codes first.

    ``codes``, ``scales``, ``l1`` are ``quantize_rows(matrix)`` (rows beyond ``codes``
    must not exist: all four arrays have n rows). The float32 matrix is 4x the bytes of
    the codes, and at 10k+ rows the scan is bound by memory, not arithmetic; so:

    1. every allowed row gets an approximate score from integer dot products of its codes
       with the int8-quantised query, and a proven error bound
       ``|exact - approx| <= scales[i]/2 * |query|_1 + s_q/2 * l1[i]`` (+ ``Q8_SLACK``);
    2. L = the k-th best lower bound (approx - bound); only a row whose upper bound
       reaches L can be in the top k, and only those rows are scored exactly, with the same
       float32 dot product as ``topk_dot``.

    So the result is the same rows and scores as ``topk_dot`` (same tie rule), not an
    approximation; the saving depends on how many rows' bounds reach L (few, for
    embeddings whose scores spread out).
    """
    n = matrix.shape[0]
    heap_s, heap_i, upper, floor = _q8_shortlist(
        n, matrix.shape[1], codes, scales, l1, query, mask, k
    )
    if heap_s.shape[0] == 0:
        return heap_i, heap_s
    m = heap_s.shape[0]
    size = 0
    for i in range(n):
        if mask[i] and upper[i] >= floor:
            score = _dot(matrix[i], query)
            if size < m or score > heap_s[0]:
                size = _heap_offer(heap_s, heap_i, size, score, i)
    _heap_sort_best_first(heap_s, heap_i, size)
    return heap_i, heap_s


# --- 1c. exact top-k over float16 rows -----------------------------------------------------

F16 = npt.NDArray[np.float16]
# Every float16 bit pattern's float32 value (256 KB): numba has no float16 arithmetic, so
# the kernels below read float16 rows as uint16 and convert through this table.
F16_TO_F32: F32 = (
    np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
)


U16 = npt.NDArray[np.uint16]
U32 = npt.NDArray[np.uint32]


@numba.njit(cache=True, nogil=True)
def _widen_into(src: U16, lut: F32, out_bits: U32, out: F32) -> None:
    """float16 bit patterns ``src`` as float32 into ``out`` (``out_bits`` is the same memory
    as uint32): a zero, subnormal, infinite or NaN value through ``lut``, every other one
    (all but a few per row of an embedding) by moving its sign, exponent and mantissa
    into place, in a loop that vectorises (a table lookup each does not: ~3x slower)."""
    special = np.int32(0)
    for j in range(src.shape[0]):
        h = np.uint32(src[j])
        out_bits[j] = ((h & np.uint32(0x8000)) << np.uint32(16)) | (
            ((h & np.uint32(0x7FFF)) << np.uint32(13)) + np.uint32(0x38000000)
        )
        # the exponent is 0 or 31 exactly when ((h + 0x400) & 0x7C00) < 0x800
        special += np.int32(((h + np.uint32(0x400)) & np.uint32(0x7C00)) < np.uint32(0x800))
    if special:
        for j in range(src.shape[0]):
            e = src[j] & np.uint16(0x7C00)
            if e == np.uint16(0) or e == np.uint16(0x7C00):
                out[j] = lut[src[j]]


@numba.njit(cache=True, nogil=True)
def _widen(bits: U16, i: int, lut: F32, buf_bits: U32, buf: F32) -> F32:
    _widen_into(bits[i], lut, buf_bits, buf)
    return buf


@numba.njit(cache=True, nogil=True)
def _widen_rows(bits: U16, rows: I64, lut: F32) -> F32:
    n, d = rows.shape[0], bits.shape[1]
    out_bits = np.empty((n, d), dtype=np.uint32)
    out = out_bits.view(np.float32)
    for k in range(n):
        if rows[k] < 0 or rows[k] >= bits.shape[0]:
            raise IndexError("row out of range")
        _widen_into(bits[rows[k]], lut, out_bits[k], out[k])
    return out


def widen_rows(matrix: F16, rows: I64) -> F32:
    """``matrix[rows].astype(np.float32)`` (the same bits, every float16 value), ~5x
    faster than numpy's conversion here (25-30 -> 5-8 us for a Recall's 35 candidates)."""
    if matrix.dtype != np.float16:
        raise TypeError(f"widen_rows takes float16 rows, not {matrix.dtype}")
    return _widen_rows(matrix.view(np.uint16), rows, F16_TO_F32)


@numba.njit(cache=True, nogil=True)
def ranks_desc(scores: F32, present: Mask) -> I64:
    """0-based rank of each present entry by score, best first, equal scores by lower
    index; -1 where not present. Scores must be finite."""
    n = scores.shape[0]
    if present.shape[0] != n:
        raise ValueError("present differs in length from scores")
    out = np.full(n, -1, dtype=np.int64)
    order = np.argsort(-scores, kind="mergesort")  # stable: ties keep the lower index first
    rank = 0
    for i in range(n):
        j = order[i]
        if present[j]:
            out[j] = rank
            rank += 1
    return out


@numba.njit(cache=True, nogil=True)
def _topk_dot_f16(
    bits: npt.NDArray[np.uint16], lut: F32, query: F32, mask: Mask, k: int
) -> tuple[I64, F32]:
    n = bits.shape[0]
    if query.shape[0] != bits.shape[1]:
        raise ValueError("query length differs from the matrix's row length")
    if mask.shape[0] != n:
        raise ValueError("mask length differs from the number of matrix rows")
    heap_s, heap_i = _new_heap(mask, k)
    m = heap_s.shape[0]
    if m == 0:
        return heap_i, heap_s
    buf_bits = np.empty(bits.shape[1], dtype=np.uint32)
    buf = buf_bits.view(np.float32)
    size = 0
    for i in range(n):
        if mask[i]:
            score = _dot(_widen(bits, i, lut, buf_bits, buf), query)
            if size < m or score > heap_s[0]:
                size = _heap_offer(heap_s, heap_i, size, score, i)
    _heap_sort_best_first(heap_s, heap_i, size)
    return heap_i, heap_s


def topk_dot_f16(matrix: F16, query: F32, mask: Mask, k: int) -> tuple[I64, F32]:
    """``topk_dot(matrix.astype(np.float32), query, mask, k)`` exactly (same rows, same
    scores, same tie rule), reading float16 rows: half the bytes of float32 ones."""
    return _topk_dot_f16(matrix.view(np.uint16), F16_TO_F32, query, mask, k)


@numba.njit(cache=True, nogil=True)
def _topk_dot_q8_f16(
    bits: npt.NDArray[np.uint16],
    lut: F32,
    codes: I8,
    scales: F32,
    l1: F32,
    query: F32,
    mask: Mask,
    k: int,
) -> tuple[I64, F32]:
    n, d = bits.shape
    heap_s, heap_i, upper, floor = _q8_shortlist(n, d, codes, scales, l1, query, mask, k)
    if heap_s.shape[0] == 0:
        return heap_i, heap_s
    buf_bits = np.empty(d, dtype=np.uint32)
    buf = buf_bits.view(np.float32)
    m = heap_s.shape[0]
    size = 0
    for i in range(n):
        if mask[i] and upper[i] >= floor:
            score = _dot(_widen(bits, i, lut, buf_bits, buf), query)
            if size < m or score > heap_s[0]:
                size = _heap_offer(heap_s, heap_i, size, score, i)
    _heap_sort_best_first(heap_s, heap_i, size)
    return heap_i, heap_s


def topk_dot_q8_f16(
    matrix: F16, codes: I8, scales: F32, l1: F32, query: F32, mask: Mask, k: int
) -> tuple[I64, F32]:
    """``topk_dot_q8`` over float16 rows: ``topk_dot_f16``'s exact answer, found by
    scanning the int8 codes first. The codes must be ``quantize_rows`` of the float16
    rows as float32 (so the error bound holds for the rows as stored)."""
    return _topk_dot_q8_f16(matrix.view(np.uint16), F16_TO_F32, codes, scales, l1, query, mask, k)


@numba.njit(cache=True, nogil=True)
def topk_scores(scores: F32, mask: Mask, k: int) -> tuple[I64, F32]:
    """Top-k of a precomputed score vector over the entries the mask allows.

    ``scores`` float32[n], ``mask`` uint8/bool[n], ``k`` >= 0. Returns
    ``(idx int64[m], scores float32[m])`` with m = min(k, count_nonzero(mask)), ordered by
    score descending, equal scores by lower index (the same rule as ``topk_dot``).
    """
    n = scores.shape[0]
    if mask.shape[0] != n:
        raise ValueError("mask length differs from the number of scores")
    heap_s, heap_i = _new_heap(mask, k)
    m = heap_s.shape[0]
    if m == 0:
        return heap_i, heap_s
    size = 0
    for i in range(n):
        if mask[i] and (size < m or scores[i] > heap_s[0]):
            size = _heap_offer(heap_s, heap_i, size, scores[i], i)
    _heap_sort_best_first(heap_s, heap_i, size)
    return heap_i, heap_s


# --- 2. fusion and boosts ----------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _unit_clip(x: float) -> float:
    """Clip to [0, 1]; NaN becomes 0."""
    if not x > 0.0:
        return 0.0
    if x > 1.0:
        return 1.0
    return x


@numba.njit(cache=True, nogil=True)
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
    """Fuse the vector and BM25 legs of n candidates and apply the boosts, in order.

    Inputs, all of length n: ``vec_score``, ``bm25_score``, ``age_days``, ``importance``
    float32; ``vec_rank``, ``bm25_rank``, ``access_count``, ``text_len`` int64. A
    candidate absent from a leg has rank -1 (score 0); ranks are 0-based. ``params`` is
    float64[N_PARAMS] from ``make_params`` (index constants ``P_*``). Outputs written:
    ``stages_out`` float32[n, 6] (columns ``STAGE_NAMES``, indices ``S_*``) and
    ``keep_out`` uint8[n]. Returns ``(final float32[n], n_kept)``.

    With s the running score (computed in float64, each stage stored as float32):

    1. fused. RRF mode:
       s = sum over present legs of w_leg / (rrf_k + rank + 1), divided by
       (w_vec + w_bm25) / (rrf_k + 1) so s lies in [0, 1] (0 if both weights are 0).
       Weighted mode:
       s = w_vec * clip(vec_score, 0, 1) + w_bm25 * (2 * sigmoid(b / bm25_scale) - 1)
       with b = max(bm25_score, 0), i.e. w_bm25 * tanh(b / (2 * bm25_scale)) in [0, 1);
       a leg with rank < 0 contributes 0. s lies in [0, w_vec + w_bm25].
       Prescored mode (fusion, and perhaps a rerank, done by an earlier call):
       s = max(vec_score, 0) if vec_rank >= 0, else 0; +inf becomes float32's maximum.
    2. recency: s += recency_weight * exp(-ln2 * age_days / recency_half_life_days)
       (skipped if recency_weight == 0 or the half-life <= 0).
    3. importance: s *= (1 - importance_weight) + importance_weight * clip(importance, 0, 1).
    4. length: s *= 1 / (1 + length_weight * log2(max(text_len / length_anchor, 1)))
       (skipped if length_weight == 0).
    5. time decay with reinforcement (skipped if decay_half_life_days <= 0):
       h = decay_half_life_days * (1 + reinforcement * ln(1 + max(access_count, 0)));
       s *= decay_floor + (1 - decay_floor) * exp(-ln2 * age_days / h).
    6. final = s; keep = final >= min_score; n_kept = number of kept candidates.

    Negative or NaN ages count as 0, NaN scores and importance as 0, infinite ones are
    clipped like any other, so with parameters from ``make_params`` (of ordinary
    magnitude: nothing overflows float64) no output is ever NaN and every final score
    is >= 0.
    """
    n = vec_score.shape[0]
    if (
        vec_rank.shape[0] != n
        or bm25_score.shape[0] != n
        or bm25_rank.shape[0] != n
        or age_days.shape[0] != n
        or importance.shape[0] != n
        or access_count.shape[0] != n
        or text_len.shape[0] != n
        or keep_out.shape[0] != n
    ):
        raise ValueError("all candidate arrays must have the same length")
    if stages_out.shape[0] != n or stages_out.shape[1] != N_STAGES:
        raise ValueError("stages_out must have shape (n, 6)")
    if params.shape[0] != N_PARAMS:
        raise ValueError("params must come from make_params (wrong length)")

    mode = params[P_MODE]
    rrf_k = params[P_RRF_K]
    w_vec = params[P_W_VEC]
    w_bm25 = params[P_W_BM25]
    bm25_scale = params[P_BM25_SCALE]
    recency_weight = params[P_RECENCY_WEIGHT]
    recency_half_life = params[P_RECENCY_HALF_LIFE]
    importance_weight = params[P_IMPORTANCE_WEIGHT]
    length_weight = params[P_LENGTH_WEIGHT]
    length_anchor = params[P_LENGTH_ANCHOR]
    decay_half_life = params[P_DECAY_HALF_LIFE]
    decay_floor = params[P_DECAY_FLOOR]
    reinforcement = params[P_REINFORCEMENT]
    min_score = params[P_MIN_SCORE]

    rrf_norm = (w_vec + w_bm25) / (rrf_k + 1.0)
    use_recency = recency_weight != 0.0 and recency_half_life > 0.0
    use_length = length_weight > 0.0
    use_decay = decay_half_life > 0.0

    final = np.empty(n, dtype=np.float32)
    n_kept = 0
    for i in range(n):
        age = float(age_days[i])
        if not age > 0.0:
            age = 0.0

        s = 0.0
        if mode == FUSION_PRESCORED:
            if vec_rank[i] >= 0:
                s = float(vec_score[i])
                if not s > 0.0:
                    s = 0.0
                elif s > _F32_MAX:
                    s = _F32_MAX
        elif mode == FUSION_RRF:
            if rrf_norm > 0.0:
                if vec_rank[i] >= 0:
                    s += w_vec / (rrf_k + vec_rank[i] + 1.0)
                if bm25_rank[i] >= 0:
                    s += w_bm25 / (rrf_k + bm25_rank[i] + 1.0)
                s /= rrf_norm
        else:
            if vec_rank[i] >= 0:
                s += w_vec * _unit_clip(float(vec_score[i]))
            if bm25_rank[i] >= 0:
                b = float(bm25_score[i])
                if not b > 0.0:
                    b = 0.0
                s += w_bm25 * math.tanh(b / (2.0 * bm25_scale))
        stages_out[i, S_FUSED] = s

        if use_recency:
            s += recency_weight * math.exp(-_LN2 * age / recency_half_life)
        stages_out[i, S_RECENCY] = s

        s *= (1.0 - importance_weight) + importance_weight * _unit_clip(float(importance[i]))
        stages_out[i, S_IMPORTANCE] = s

        if use_length:
            ratio = float(text_len[i]) / length_anchor
            if ratio > 1.0:
                s *= 1.0 / (1.0 + length_weight * math.log2(ratio))
        stages_out[i, S_LENGTH] = s

        if use_decay:
            accesses = float(max(access_count[i], 0))
            h = decay_half_life * (1.0 + reinforcement * math.log1p(accesses))
            s *= decay_floor + (1.0 - decay_floor) * math.exp(-_LN2 * age / h)
        stages_out[i, S_DECAY] = s

        f = np.float32(s)
        stages_out[i, S_FINAL] = f
        final[i] = f
        if f >= min_score:
            keep_out[i] = 1
            n_kept += 1
        else:
            keep_out[i] = 0
    return final, n_kept


# --- 3. maximal marginal relevance -------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def mmr_select(vectors: F32, scores: F32, k: int, lam: float) -> I64:
    """Greedy Maximal Marginal Relevance: pick k relevant, mutually diverse candidates.

    ``vectors`` float32[n, d] with L2-normalised rows, ``scores`` float32[n], ``k`` >= 0,
    ``lam`` in [0, 1]. The first pick is the best score; each later pick is
        argmax over unpicked i of  lam * score_i - (1 - lam) * max_{j picked} dot(v_i, v_j)
    with ties going to the lower index (gains in float64). Returns ``idx int64[m]`` in
    pick order, m = min(k, n). lam = 1 reproduces score order; lam = 0 ignores scores
    after the first pick and only spreads out.
    """
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
    taken = np.zeros(n, dtype=np.bool_)
    max_sim = np.full(n, -np.inf)

    best = 0
    for i in range(1, n):
        if scores[i] > scores[best]:
            best = i
    for p in range(m):
        if p > 0:
            best = -1
            best_gain = -np.inf
            for i in range(n):
                if taken[i]:
                    continue
                gain = lam * float(scores[i]) - (1.0 - lam) * max_sim[i]
                if best < 0 or gain > best_gain:
                    best = i
                    best_gain = gain
        picked[p] = best
        taken[best] = True
        if p + 1 < m:
            for i in range(n):
                if not taken[i]:
                    sim = float(_dot(vectors[i], vectors[best]))
                    if sim > max_sim[i]:
                        max_sim[i] = sim
    return picked


# --- BM25 ------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
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
    """BM25 of the rows that hold at least one query term, without touching the others.

    Term t's posting is ``rows[starts[t]:starts[t+1]]`` with counts ``tf`` (> 0) and
    weight ``weights[t]`` (idf x count in the query, > 0); ``lengths[r]`` is row r's
    length. Term by term, in order, each posting adds (rounded to float32) into
    ``scratch`` (float32, at least as long as ``lengths``, all zero on entry and all zero
    again on return)
        scratch[r] += weight * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[r] / avgdl))
    Returns the touched rows ascending and their scores.

    O(postings) time and no per-query array the size of the partition: the rows come from
    the postings (sorted when few; collected by one pass over the scratch in row order when
    they are more than an eighth of the rows).
    """
    n_terms = weights.shape[0]
    if starts.shape[0] != n_terms + 1:
        raise ValueError("starts must have one entry per term plus one")
    if tf.shape[0] != rows.shape[0] or starts[0] != 0 or starts[n_terms] != rows.shape[0]:
        raise ValueError("starts must cover rows and tf exactly")
    n = lengths.shape[0]
    if scratch.shape[0] < n:
        raise ValueError("scratch is shorter than the partition")
    for t in range(n_terms):
        if not weights[t] > 0.0 or starts[t + 1] < starts[t]:
            raise ValueError("term weights must be > 0 and starts non-decreasing")
    for i in range(rows.shape[0]):
        if rows[i] < 0 or rows[i] >= n:
            raise ValueError("a posting points outside the partition")
        if not tf[i] > 0.0:
            raise ValueError("term counts must be > 0")
    touched = np.empty(rows.shape[0], dtype=np.int64)
    count = 0
    for t in range(n_terms):
        w = weights[t]
        for i in range(starts[t], starts[t + 1]):
            r = rows[i]
            if scratch[r] == 0.0:  # every term adds > 0: zero means not seen yet
                touched[count] = r
                count += 1
            norm = k1 * (1.0 - b + b * lengths[r] / avgdl)
            scratch[r] += np.float32(w * tf[i] * (k1 + 1.0) / (tf[i] + norm))
    out_rows = np.empty(count, dtype=np.int64)
    out = np.empty(count, dtype=np.float32)
    if count * 8 > n:
        c = 0
        for r in range(n):
            if scratch[r] != 0.0:
                out_rows[c] = r
                out[c] = scratch[r]
                scratch[r] = 0.0
                c += 1
    else:
        out_rows[:] = np.sort(touched[:count])
        for j in range(count):
            r = out_rows[j]
            out[j] = scratch[r]
            scratch[r] = 0.0
    return out_rows, out


# --- 4. late interaction -----------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def maxsim(query_tokens: F32, doc_tokens: F32 | I8, doc_offsets: I64) -> F32:
    """ColBERT-style late-interaction scores of n documents against one query.

    ``query_tokens`` float32[q, d]; ``doc_tokens`` float32 or int8 [t, d] holds every document's
    token vectors back to back, document i owning rows doc_offsets[i]:doc_offsets[i+1];
    ``doc_offsets`` int64[n + 1], non-decreasing, from 0 to at most t. Returns float32[n]:
        score_i = (1/q) * sum over query tokens u of max over doc-i tokens w of dot(u, w)
    (summed in float64). A document with no tokens scores 0; q = 0 gives all zeros.
    """
    if doc_offsets.shape[0] < 1:
        raise ValueError("doc_offsets must have n + 1 entries")
    if query_tokens.shape[1] != doc_tokens.shape[1]:
        raise ValueError("query and document token vectors differ in length")
    n = doc_offsets.shape[0] - 1
    if doc_offsets[0] < 0 or doc_offsets[n] > doc_tokens.shape[0]:
        raise ValueError("doc_offsets point outside doc_tokens")
    for i in range(n):
        if doc_offsets[i + 1] < doc_offsets[i]:
            raise ValueError("doc_offsets must be non-decreasing")
    q = query_tokens.shape[0]
    out = np.zeros(n, dtype=np.float32)
    if q == 0:
        return out
    for i in range(n):
        start = doc_offsets[i]
        stop = doc_offsets[i + 1]
        if stop == start:
            continue
        total = 0.0
        for u in range(q):
            best = _dot(query_tokens[u], doc_tokens[start])
            for w in range(start + 1, stop):
                sim = _dot(query_tokens[u], doc_tokens[w])
                if sim > best:
                    best = sim
            total += float(best)
        out[i] = np.float32(total / q)
    return out


# --- 5. language identification ----------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def nb_language_scores(
    text: U8,
    nextmove: npt.NDArray[np.uint32],
    rowbase: I64,
    output: npt.NDArray[np.int32],
    ptc: U16,
    lut: F32,
    pc: F32,
) -> tuple[F32, int]:
    """A naive Bayes language model's log-scores of ``text`` (bytes), one per language.

    The byte n-gram features are found by a walk of the model's automaton:
    ``state = nextmove[rowbase[state] + byte]`` from state 0, and ``output[state] >= 0``
    names a feature seen. The score of language c is
    ``pc[c] + sum over distinct features f of log1p(count_f) * ptc[f, c]`` (``ptc`` float16
    read as bits through ``lut``, as the float16 scans do). This is py3langid's
    ``_raw_score`` in one call instead of a Python step per byte and a Counter. Returns
    the scores and the number of distinct features (0: the scores are ``pc``).

    The tables are the caller's to check: ``rowbase[s] + 255 < len(nextmove)`` and
    ``nextmove[i] < len(rowbase) == len(output)``, ``output[s] < ptc.shape[0]``.
    """
    n = text.shape[0]
    found = np.empty(n, dtype=np.int64)
    m = 0
    state = 0
    for i in range(n):
        state = nextmove[rowbase[state] + text[i]]
        f = output[state]
        if f >= 0:
            found[m] = f
            m += 1
    scores = pc.copy()
    if m == 0:
        return scores, 0
    found = np.sort(found[:m])
    languages = ptc.shape[1]
    distinct = 0
    i = 0
    while i < m:
        f = found[i]
        j = i + 1
        while j < m and found[j] == f:
            j += 1
        weight = np.log1p(np.float32(j - i))
        for c in range(languages):
            scores[c] += weight * lut[ptc[f, c]]
        distinct += 1
        i = j
    return scores, distinct
