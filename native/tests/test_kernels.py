"""The numba kernels agree with their numpy twins, and behave as the docs promise.

Where the data makes every sum exact (small integers, multiples of 1/4), the two must agree
bit for bit, ties included; on general floats they agree to float32 rounding, because BLAS
and the kernels add up dot products in different orders.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from memoryd_native import kernels, reference
from memoryd_native.kernels import (
    FUSION_PRESCORED,
    FUSION_RRF,
    FUSION_WEIGHTED,
    N_STAGES,
    S_FINAL,
    make_params,
)

NATIVE_ROOT = Path(__file__).resolve().parents[1]  # native/: the package, importable alone
FAST = settings(max_examples=100, deadline=None)


def _mask(draw: st.DrawFn, n: int) -> np.ndarray[Any, Any]:
    mask = draw(hnp.arrays(np.bool_, n))
    return mask.astype(draw(st.sampled_from([np.uint8, np.bool_])))


def _quarters(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray[Any, Any]]:
    """float32 arrays of multiples of 1/4 in [-1, 1]: small dot products are exact."""
    return hnp.arrays(np.int8, shape, elements=st.integers(-4, 4)).map(
        lambda a: (a / 4).astype(np.float32)
    )


# --- topk_dot / topk_scores ----------------------------------------------------------------


@st.composite
def integer_topk_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    n = draw(st.integers(0, 40))
    d = draw(st.integers(1, 6))
    # Few distinct values, so equal scores (ties) are common.
    matrix = draw(hnp.arrays(np.int8, (n, d), elements=st.integers(-2, 2))).astype(np.float32)
    query = draw(hnp.arrays(np.int8, d, elements=st.integers(-2, 2))).astype(np.float32)
    return matrix, query, _mask(draw, n), draw(st.integers(0, n + 3))


@FAST
@given(integer_topk_cases())
def test_topk_dot_matches_twin_exactly_including_ties(case: tuple[Any, ...]) -> None:
    matrix, query, mask, k = case
    idx, scores = kernels.topk_dot(matrix, query, mask, k)
    ref_idx, ref_scores = reference.topk_dot(matrix, query, mask, k)
    assert idx.dtype == np.int64 and scores.dtype == np.float32
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(scores, ref_scores)
    assert len(idx) == min(k, int(np.count_nonzero(mask)))
    assert all(mask[i] for i in idx)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300), d=st.sampled_from([1, 7, 384]))
def test_topk_dot_matches_twin_on_random_floats(seed: int, n: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n, d)).astype(np.float32)
    query = rng.standard_normal(d).astype(np.float32)
    mask = (rng.random(n) < rng.random()).astype(np.uint8)
    k = int(rng.integers(0, 25))
    idx, scores = kernels.topk_dot(matrix, query, mask, k)
    ref_idx, ref_scores = reference.topk_dot(matrix, query, mask, k)
    tol = 1e-4 * math.sqrt(d)
    assert len(idx) == len(ref_idx)
    np.testing.assert_allclose(scores, ref_scores, atol=tol)
    # Each returned score is that row's true score, and no excluded row clearly beats it.
    exact = matrix.astype(np.float64) @ query.astype(np.float64)
    np.testing.assert_allclose(scores, exact[idx], atol=tol)
    assert len(set(idx.tolist())) == len(idx)
    if len(idx):
        assert all(mask[i] for i in idx)
        outside = np.ones(n, dtype=bool)
        outside[idx] = False
        outside &= mask.astype(bool)
        assert not np.any(exact[outside] > scores[-1] + tol)


@FAST
@given(integer_topk_cases())
def test_topk_dot_q8_is_topk_dot_exactly_including_ties(case: tuple[Any, ...]) -> None:
    matrix, query, mask, k = case
    want = kernels.topk_dot(matrix, query, mask, k)
    got = kernels.topk_dot_q8(matrix, *kernels.quantize_rows(matrix), query, mask, k)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 400),
    d=st.sampled_from([1, 7, 384]),
    spread=st.sampled_from([0.05, 0.5, 2.0]),
)
def test_topk_dot_q8_is_topk_dot_exactly_on_embeddings(
    seed: int, n: int, d: int, spread: float
) -> None:
    # Unit vectors around a few centres (like sentence embeddings), near-duplicates included:
    # the int8 shortlist must never lose a row the exact scan ranks in the top k.
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, d)).astype(np.float32)
    matrix = centres[rng.integers(0, 4, n)] + spread * rng.standard_normal((n, d))
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    if n:
        matrix[rng.integers(0, n)] = 0.0  # a zero row quantises to zero codes
    query = (centres[0] + spread * rng.standard_normal(d)).astype(np.float32)
    query /= np.float32(np.linalg.norm(query))
    mask = (rng.random(n) < 0.8).astype(np.bool_)
    k = int(rng.integers(0, 60))
    want = kernels.topk_dot(matrix, query, mask, k)
    got = kernels.topk_dot_q8(matrix, *kernels.quantize_rows(matrix), query, mask, k)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 400),
    d=st.sampled_from([1, 7, 384]),
    spread=st.sampled_from([0.05, 0.5, 2.0]),
)
def test_float16_scans_are_topk_dot_of_the_widened_rows(
    seed: int, n: int, d: int, spread: float
) -> None:
    # The hot index keeps float16 rows: both scans over them give exactly topk_dot's
    # answer over the same rows as float32 (rows, scores, ties), near-duplicates included.
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, d)).astype(np.float32)
    matrix = centres[rng.integers(0, 4, n)] + spread * rng.standard_normal((n, d))
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float16)
    if n > 1:
        matrix[rng.integers(0, n)] = 0.0
        matrix[-1] = matrix[0]  # an exact tie
    query = (centres[0] + spread * rng.standard_normal(d)).astype(np.float32)
    query /= np.float32(np.linalg.norm(query))
    mask = (rng.random(n) < 0.8).astype(np.uint8)
    k = int(rng.integers(0, 60))
    want = kernels.topk_dot(matrix.astype(np.float32), query, mask, k)
    for got in (
        kernels.topk_dot_f16(matrix, query, mask, k),
        kernels.topk_dot_q8_f16(matrix, *kernels.quantize_rows(matrix), query, mask, k),
    ):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400), d=st.sampled_from([1, 7, 384]))
def test_both_int8_scans_shortlist_alike_and_answer_alike_on_random_rows(
    seed: int, n: int, d: int
) -> None:
    # topk_dot_q8 over float16 rows widened to float32 and topk_dot_q8_f16 over the rows as
    # stored: the same codes, so the same shortlist (every allowed row's upper bound at or
    # above its exact score, every top-k row's upper bound at or above the floor), and the
    # same rows and scores.
    rng = np.random.default_rng(seed)
    half = rng.standard_normal((n, d)).astype(np.float16)
    if n > 1:
        half[-1] = half[0]  # an exact tie
    wide = half.astype(np.float32)
    query = rng.standard_normal(d).astype(np.float32)
    mask = (rng.random(n) < 0.7).astype(np.uint8)
    k = int(rng.integers(0, 40))
    codes = kernels.quantize_rows(half)
    got = kernels.topk_dot_q8_f16(half, *codes, query, mask, k)
    want = kernels.topk_dot_q8(wide, *codes, query, mask, k)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])

    heap, _, upper, floor = kernels._q8_shortlist(n, d, *codes, query, mask, k)
    assert len(heap) == len(got[0])
    if len(heap):
        allowed = mask.astype(bool)
        rows, scores = kernels.topk_dot(wide, query, np.ones(n, dtype=np.uint8), n)
        exact = np.empty(n, dtype=np.float32)
        exact[rows] = scores  # every row's float32 score, as the kernels compute it
        assert (exact[allowed] <= upper[allowed]).all()
        assert (upper[got[0]] >= floor).all()
        assert floor <= got[1][-1]


def test_quantize_rows_error_is_within_half_a_step() -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((50, 384)).astype(np.float32)
    codes, scales, l1 = kernels.quantize_rows(rows)
    approx = codes.astype(np.float32) * scales[:, None]
    assert codes.dtype == np.int8 and np.abs(codes).max() == 127
    assert (np.abs(rows - approx) <= scales[:, None] / 2 + 1e-7).all()
    np.testing.assert_allclose(l1, np.abs(approx).sum(axis=1), rtol=1e-5)


@st.composite
def topk_scores_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    n = draw(st.integers(0, 60))
    values = st.sampled_from([-1.5, 0.0, -0.0, 0.25, 0.25, 3.0]) | st.floats(-1e6, 1e6, width=32)
    scores = draw(hnp.arrays(np.float32, n, elements=values))
    return scores, _mask(draw, n), draw(st.integers(0, n + 3))


@FAST
@given(topk_scores_cases())
def test_topk_scores_matches_twin_exactly(case: tuple[Any, ...]) -> None:
    scores, mask, k = case
    idx, top = kernels.topk_scores(scores, mask, k)
    ref_idx, ref_top = reference.topk_scores(scores, mask, k)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(top, ref_top)
    assert len(idx) == min(k, int(np.count_nonzero(mask)))


def test_topk_orders_best_first_breaks_ties_by_lower_row_and_skips_masked_rows() -> None:
    matrix = np.array([[1, 0], [3, 0], [2, 0], [3, 0], [9, 0], [2, 0]], dtype=np.float32)
    query = np.array([1, 5], dtype=np.float32)
    mask = np.array([1, 1, 1, 1, 0, 1], dtype=np.uint8)  # row 4 is best but out of scope
    for impl in (kernels, reference):
        idx, scores = impl.topk_dot(matrix, query, mask, 4)
        assert idx.tolist() == [1, 3, 2, 5]
        assert scores.tolist() == [3.0, 3.0, 2.0, 2.0]


@pytest.mark.parametrize("impl", [kernels, reference])
def test_topk_edge_sizes(impl: Any) -> None:
    matrix = np.ones((3, 4), dtype=np.float32)
    query = np.ones(4, dtype=np.float32)
    ones = np.ones(3, dtype=np.uint8)
    assert impl.topk_dot(matrix, query, ones, 0)[0].shape == (0,)
    assert impl.topk_dot(matrix, query, np.zeros(3, np.uint8), 5)[0].shape == (0,)
    assert impl.topk_dot(matrix, query, ones, 10)[0].tolist() == [0, 1, 2]
    empty = np.empty((0, 4), dtype=np.float32)
    assert impl.topk_dot(empty, query, np.empty(0, np.uint8), 3)[0].shape == (0,)
    with pytest.raises(ValueError):
        impl.topk_dot(matrix, query, ones, -1)
    with pytest.raises(ValueError):
        impl.topk_dot(matrix, query[:3], ones, 1)
    with pytest.raises(ValueError):
        impl.topk_scores(query, ones, 1)


# --- fuse_and_boost --------------------------------------------------------------------------

any_float32 = st.floats(width=32, allow_nan=True, allow_infinity=True)

# Ordinary magnitudes for every setting (see the kernel's docstring), every mode and the
# "disabled" values of each boost.
params_strategy = (
    st.builds(
        make_params,
        mode=st.sampled_from([FUSION_RRF, FUSION_WEIGHTED, FUSION_PRESCORED]),
        rrf_k=st.floats(0, 100),
        w_vec=st.floats(0, 2),
        w_bm25=st.floats(0, 2),
        bm25_scale=st.floats(0.1, 50),
        recency_weight=st.just(0.0) | st.floats(0, 1),
        recency_half_life_days=st.floats(0.1, 1e4),
        importance_weight=st.floats(0, 1),
        length_weight=st.just(0.0) | st.floats(0, 2),
        length_anchor=st.floats(1, 1e5),
        decay_half_life_days=st.just(0.0) | st.floats(-10, 1e4),
        decay_floor=st.floats(0, 1),
        reinforcement=st.floats(0, 5),
        min_score=st.floats(-0.5, 2),
    )
    | st.just(make_params())
    | st.just(make_params(mode=FUSION_WEIGHTED))
)


@st.composite
def fuse_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    n = draw(st.integers(0, 30))

    def f32() -> Any:
        return draw(hnp.arrays(np.float32, n, elements=any_float32))

    def i64(lo: int, hi: int) -> Any:
        return draw(hnp.arrays(np.int64, n, elements=st.integers(lo, hi)))

    return (
        f32(),  # vec_score
        i64(-1, 200),  # vec_rank
        f32(),  # bm25_score
        i64(-1, 200),  # bm25_rank
        f32(),  # age_days
        f32(),  # importance
        i64(-3, 10**9),  # access_count
        i64(0, 10**8),  # text_len
        draw(params_strategy),
    )


def _run_fuse(impl: Any, case: tuple[Any, ...]) -> tuple[Any, int, Any, Any]:
    n = case[0].shape[0]
    stages = np.full((n, N_STAGES), np.nan, dtype=np.float32)
    keep = np.full(n, 7, dtype=np.uint8)
    final, n_kept = impl.fuse_and_boost(*case, stages, keep)
    return final, n_kept, stages, keep


@settings(max_examples=150, deadline=None)
@given(fuse_cases())
def test_fuse_and_boost_matches_twin_and_never_outputs_nan(case: tuple[Any, ...]) -> None:
    final, n_kept, stages, keep = _run_fuse(kernels, case)
    ref_final, ref_kept, ref_stages, ref_keep = _run_fuse(reference, case)
    min_score = case[-1][kernels.P_MIN_SCORE]

    assert final.dtype == np.float32
    assert np.all(np.isfinite(stages)) and np.all(final >= 0)
    np.testing.assert_array_equal(final, stages[:, S_FINAL])
    np.testing.assert_allclose(stages, ref_stages, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(final, ref_final, rtol=1e-6, atol=1e-30)
    # keep is exactly "final >= min_score", counted; the twins differ only on a knife edge.
    np.testing.assert_array_equal(keep, final.astype(np.float64) >= min_score)
    assert n_kept == int(keep.sum()) and ref_kept == int(ref_keep.sum())
    clear = np.abs(final.astype(np.float64) - min_score) > 1e-6 * max(1.0, abs(min_score))
    np.testing.assert_array_equal(keep[clear], ref_keep[clear])


def _one(impl: Any, params: Any, **fields: Any) -> tuple[list[float], bool]:
    """Fuse a single candidate; unspecified fields default to a plain, fresh memory."""
    values = {
        "vec_score": 0.0,
        "vec_rank": -1,
        "bm25_score": 0.0,
        "bm25_rank": -1,
        "age_days": 0.0,
        "importance": 1.0,
        "access_count": 0,
        "text_len": 100,
    } | fields
    f32 = ("vec_score", "bm25_score", "age_days", "importance")
    arrays = [
        np.array([v], dtype=np.float32 if name in f32 else np.int64) for name, v in values.items()
    ]
    _, _, stages, keep = _run_fuse(impl, (*arrays, params))
    return stages[0].tolist(), bool(keep[0])


@pytest.mark.parametrize("impl", [kernels, reference])
def test_fuse_stages_by_hand(impl: Any) -> None:
    # RRF, vector rank 0 only: 0.7/61 normalised by 1/61 -> 0.7. Age 14 d = the recency
    # half-life: +0.1/2. Importance 1: x1. 2000 chars = 4 anchors: x 1/(1 + 0.5*2).
    # Decay half-life set to 14 d, never accessed: x (0.5 + 0.5/2).
    params = make_params(decay_half_life_days=14.0)
    stages, keep = _one(impl, params, vec_rank=0, age_days=14.0, text_len=2000)
    assert stages == pytest.approx([0.7, 0.75, 0.75, 0.375, 0.28125, 0.28125], rel=1e-6)
    assert keep

    # Found first by both legs: the maximum fused score, 1.
    stages, _ = _one(impl, params, vec_rank=0, bm25_rank=0)
    assert stages[0] == pytest.approx(1.0)

    # Weighted: 0.7*clip(0.8) + 0.3*(2*sigmoid(5 ln3 / 5) - 1) = 0.56 + 0.3*0.5.
    weighted = make_params(mode=FUSION_WEIGHTED)
    stages, _ = _one(
        impl, weighted, vec_score=0.8, vec_rank=3, bm25_score=5 * math.log(3), bm25_rank=0
    )
    assert stages[0] == pytest.approx(0.71, rel=1e-6)
    # A BM25 score of 0 adds nothing (not sigmoid(0) = 0.5); an absent leg's score is ignored.
    stages, _ = _one(impl, weighted, vec_score=0.8, vec_rank=0, bm25_score=0.0, bm25_rank=0)
    assert stages[0] == pytest.approx(0.56, rel=1e-6)
    stages, _ = _one(impl, weighted, vec_score=0.8, vec_rank=-1, bm25_score=9.0, bm25_rank=-1)
    assert stages[0] == 0.0

    # Prescored: a score fused (and reranked) elsewhere passes through, boosts still apply.
    prescored = make_params(mode=FUSION_PRESCORED, decay_half_life_days=14.0)
    stages, _ = _one(impl, prescored, vec_score=0.7, vec_rank=0, age_days=14.0, text_len=2000)
    assert stages == pytest.approx([0.7, 0.75, 0.75, 0.375, 0.28125, 0.28125], rel=1e-6)


@pytest.mark.parametrize("impl", [kernels, reference])
def test_fuse_boosts_a_user_would_notice(impl: Any) -> None:
    params = make_params(min_score=0.5)
    base = {"vec_rank": 0, "age_days": 30.0}

    def final(**fields: Any) -> float:
        return _one(impl, params, **(base | fields))[0][S_FINAL]

    assert final(access_count=50) > final(access_count=0)  # recall reinforces a memory
    assert final(age_days=1.0) > final(age_days=30.0) > final(age_days=300.0)
    assert final(importance=0.9) > final(importance=0.1)
    assert final(text_len=5000) < final(text_len=500) == final(text_len=20)
    assert final(age_days=-3.0) == final(age_days=0.0)  # a future timestamp is "now"
    # An old, unimportant memory found by one leg falls below min_score; a fresh one does not.
    assert _one(impl, params, vec_rank=40, age_days=400.0, importance=0.0)[1] is False
    assert _one(impl, params, vec_rank=0, bm25_rank=0)[1] is True


def test_make_params_rejects_bad_settings_by_name() -> None:
    with pytest.raises(ValueError, match="importance_weight"):
        make_params(importance_weight=1.5)
    with pytest.raises(ValueError, match="mode"):
        make_params(mode=3)
    with pytest.raises(ValueError, match="recency_half_life_days"):
        make_params(recency_half_life_days=0.0)
    with pytest.raises(ValueError, match="min_score"):
        make_params(min_score=float("nan"))


@pytest.mark.parametrize("impl", [kernels, reference])
def test_fuse_rejects_mismatched_shapes(impl: Any) -> None:
    f = np.zeros(3, dtype=np.float32)
    i = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError):
        impl.fuse_and_boost(
            f,
            i,
            f,
            i[:2],
            f,
            f,
            i,
            i,
            make_params(),
            np.empty((3, 6), np.float32),
            np.empty(3, np.uint8),
        )
    with pytest.raises(ValueError):
        impl.fuse_and_boost(
            f,
            i,
            f,
            i,
            f,
            f,
            i,
            i,
            make_params(),
            np.empty((3, 5), np.float32),
            np.empty(3, np.uint8),
        )


# --- mmr_select ------------------------------------------------------------------------------


@st.composite
def mmr_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    n = draw(st.integers(0, 15))
    d = draw(st.integers(1, 4))
    scores = draw(hnp.arrays(np.int8, n, elements=st.integers(-8, 8))).astype(np.float32) / 8
    lam = draw(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]))
    return draw(_quarters((n, d))), scores, draw(st.integers(0, n + 2)), lam


@FAST
@given(mmr_cases())
def test_mmr_matches_twin_exactly_including_ties(case: tuple[Any, ...]) -> None:
    vectors, scores, k, lam = case
    picked = kernels.mmr_select(vectors, scores, k, lam)
    np.testing.assert_array_equal(picked, reference.mmr_select(vectors, scores, k, lam))
    assert picked.dtype == np.int64 and len(picked) == min(k, len(scores))
    assert len(set(picked.tolist())) == len(picked)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), k=st.integers(0, 45))
def test_mmr_with_lambda_one_is_score_order(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = rng.choice(np.linspace(0, 1, 7, dtype=np.float32), n)  # with ties
    expected, _ = reference.topk_scores(scores, np.ones(n, np.uint8), k)
    np.testing.assert_array_equal(kernels.mmr_select(vectors, scores, k, 1.0), expected)


@pytest.mark.parametrize("impl", [kernels, reference])
def test_mmr_skips_a_near_duplicate_for_a_diverse_runner_up(impl: Any) -> None:
    a = np.array([1.0, 0.0, 0.0])
    near_dup = np.array([0.99, math.sqrt(1 - 0.99**2), 0.0])  # cos(a, near_dup) = 0.99
    diverse = np.array([0.1, 0.0, math.sqrt(1 - 0.01)])  # cos(a, diverse) = 0.1
    vectors = np.stack([near_dup, a, diverse]).astype(np.float32)
    scores = np.array([0.89, 0.90, 0.85], dtype=np.float32)
    assert impl.mmr_select(vectors, scores, 2, 0.5).tolist() == [1, 2]
    assert impl.mmr_select(vectors, scores, 3, 1.0).tolist() == [1, 0, 2]
    assert impl.mmr_select(vectors, scores, 0, 0.5).tolist() == []
    assert impl.mmr_select(vectors[:0], scores[:0], 3, 0.5).tolist() == []
    with pytest.raises(ValueError):
        impl.mmr_select(vectors, scores, 2, 1.5)


# --- maxsim ----------------------------------------------------------------------------------


@st.composite
def maxsim_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    d = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(0, 4), max_size=6))
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    query = draw(_quarters((draw(st.integers(0, 4)), d)))
    return query, draw(_quarters((int(offsets[-1]), d))), offsets


@FAST
@given(maxsim_cases())
def test_maxsim_matches_twin_exactly(case: tuple[Any, ...]) -> None:
    query, tokens, offsets = case
    scores = kernels.maxsim(query, tokens, offsets)
    np.testing.assert_array_equal(scores, reference.maxsim(query, tokens, offsets))
    assert scores.dtype == np.float32 and scores.shape == (len(offsets) - 1,)
    assert np.all(scores[np.diff(offsets) == 0] == 0)


@FAST
@given(seed=st.integers(0, 2**32 - 1), d=st.sampled_from([3, 128]))
def test_maxsim_matches_twin_on_random_floats(seed: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 20, 8))]).astype(np.int64)
    query = rng.standard_normal((int(rng.integers(0, 12)), d)).astype(np.float32)
    tokens = rng.standard_normal((int(offsets[-1]), d)).astype(np.float32)
    np.testing.assert_allclose(
        kernels.maxsim(query, tokens, offsets), reference.maxsim(query, tokens, offsets), atol=1e-4
    )


@pytest.mark.parametrize("impl", [kernels, reference])
def test_maxsim_by_hand(impl: Any) -> None:
    query = np.array([[1, 0], [0, 1]], dtype=np.float32)
    tokens = np.array([[1, 0], [0.5, 0.5], [0, 1], [-1, 0]], dtype=np.float32)
    offsets = np.array([0, 2, 2, 4], dtype=np.int64)  # doc 1 has no tokens
    # doc 0: q0 -> max(1, .5) = 1, q1 -> max(0, .5) = .5; doc 2: q0 -> 0, q1 -> 1.
    assert impl.maxsim(query, tokens, offsets).tolist() == [0.75, 0.0, 0.5]
    assert impl.maxsim(query[:0], tokens, offsets).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        impl.maxsim(query, tokens, np.array([0, 3, 2], dtype=np.int64))
    with pytest.raises(ValueError):
        impl.maxsim(query, tokens, np.array([0, 5], dtype=np.int64))


# --- the candidates' rows and ranks ----------------------------------------------------------


def test_widen_rows_gives_every_float16_value_exactly() -> None:
    # all 65,536 bit patterns: zeros of both signs, subnormals, infinities and NaNs too
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    matrix = every.reshape(-1, 256)
    rows = np.arange(matrix.shape[0], dtype=np.int64)[::-1].copy()
    got = kernels.widen_rows(matrix, rows)
    assert got.dtype == np.float32 and got.shape == (256, 256)
    np.testing.assert_array_equal(
        got.view(np.uint32), reference.widen_rows(matrix, rows).view(np.uint32)
    )


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 60), d=st.sampled_from([1, 7, 384]))
def test_widen_rows_of_embeddings_are_numpys_conversion(seed: int, n: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = (rng.standard_normal((100, d)) * 0.05).astype(np.float16)
    matrix[rng.integers(0, 100, 5), rng.integers(0, d, 5)] = np.float16(3e-6)  # subnormal
    rows = rng.integers(0, 100, n).astype(np.int64)  # repeats allowed
    np.testing.assert_array_equal(
        kernels.widen_rows(matrix, rows), reference.widen_rows(matrix, rows)
    )
    with pytest.raises(IndexError):
        kernels.widen_rows(matrix, np.array([100], dtype=np.int64))


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 200), distinct=st.integers(1, 20))
def test_ranks_desc_is_the_stable_order_of_the_present_entries(
    seed: int, n: int, distinct: int
) -> None:
    # few distinct scores: many ties, which go by the lower index; zeros of both signs tie
    rng = np.random.default_rng(seed)
    scores = rng.integers(-distinct, distinct, n).astype(np.float32) / np.float32(distinct)
    scores[rng.random(n) < 0.1] = -0.0
    for present in (rng.random(n) < 0.7, np.ones(n, dtype=bool), np.zeros(n, dtype=bool)):
        got = kernels.ranks_desc(scores, present)
        np.testing.assert_array_equal(got, reference.ranks_desc(scores, present))
        kept = np.flatnonzero(present)
        assert sorted(got[kept].tolist()) == list(range(kept.size))


# --- warm-up ---------------------------------------------------------------------------------

_PRODUCTION_CALLS = """
import json
import numpy as np
from memoryd_native import kernels as K, warm_up

assert warm_up() >= 0.0
names = [
    "topk_dot", "topk_scores", "fuse_and_boost", "mmr_select", "maxsim", "nb_language_scores",
    "_widen_rows", "ranks_desc",
]
before = {name: len(getattr(K, name).signatures) for name in names}

rng = np.random.default_rng(0)
matrix = rng.standard_normal((1000, 384)).astype(np.float32)
query = matrix[3]
for mask in (np.ones(1000, dtype=bool), np.ones(1000, dtype=np.uint8)):
    K.topk_dot(matrix, query, mask, 20)
    K.topk_scores(matrix @ query, mask, 20)
idx = np.arange(20)
n = len(idx)
K.fuse_and_boost(
    np.linspace(0, 1, n, dtype=np.float32), idx, np.zeros(n, np.float32), idx - 1,
    np.full(n, 3.5, np.float32), np.full(n, 0.5, np.float32),
    np.zeros(n, np.int64), np.full(n, 300, np.int64), K.make_params(),
    np.empty((n, K.N_STAGES), np.float32), np.empty(n, np.uint8),
)
K.mmr_select(matrix[idx], (matrix @ query)[idx], 5, 0.7)
half = matrix.astype(np.float16)
vec = K.widen_rows(half, np.array([5, 1, 900], dtype=np.int64)) @ query
K.ranks_desc(vec.astype(np.float32), np.full(3, True))
K.ranks_desc(vec.astype(np.float32), vec > 0)
K.maxsim(matrix[:4], matrix[4:40], np.cumsum([0, 10, 0, 26]))
states = 3
K.nb_language_scores(
    np.frombuffer("Grüße aus Köln".encode(), dtype=np.uint8),
    rng.integers(0, states, states * 256).astype(np.uint32),
    np.arange(states, dtype=np.int64) * 256,
    np.array([-1, 0, 1], dtype=np.int32),
    rng.standard_normal((2, 44)).astype(np.float16).view(np.uint16),
    K.F16_TO_F32,
    np.zeros(44, dtype=np.float32),
)
print(json.dumps([name for name in names if len(getattr(K, name).signatures) != before[name]]))
"""


def test_warm_up_compiles_every_signature_production_uses() -> None:
    # A fresh process, so that signatures compiled by the other tests cannot hide a gap.
    env = os.environ | {"PYTHONPATH": str(NATIVE_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", _PRODUCTION_CALLS],
        capture_output=True,
        text=True,
        env=env,
        cwd=NATIVE_ROOT,
        timeout=120,
        check=True,
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


# --- bm25_sparse ---------------------------------------------------------------------------


def _postings(rng: np.random.Generator, n: int, per_term: list[int]) -> tuple[Any, ...]:
    """Terms' postings back to back, each in a random row order (as a dict keeps them)."""
    rows, tf, starts = [], [], [0]
    for size in per_term:
        rows.append(rng.permutation(n)[: min(n, size)].astype(np.int64))
        tf.append(rng.integers(1, 5, rows[-1].size).astype(np.float32))
        starts.append(starts[-1] + rows[-1].size)
    return (
        np.concatenate(rows) if rows else np.zeros(0, np.int64),
        np.concatenate(tf) if tf else np.zeros(0, np.float32),
        np.array(starts, dtype=np.int64),
        rng.uniform(0.1, 5.0, len(per_term)),
    )


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 300),
    per_term=st.lists(st.integers(0, 300), max_size=4),
)
def test_bm25_sparse_scores_the_touched_rows_as_the_dense_twin_does(
    seed: int, n: int, per_term: list[int]
) -> None:
    """Few or many touched rows (both of the kernel's ways of listing them), postings in
    any order: the same rows ascending and the same float32 sums, and the scratch is left
    all zero for the next query."""
    rng = np.random.default_rng(seed)
    rows, tf, starts, weights = _postings(rng, n, per_term)
    lengths = rng.integers(1, 40, n).astype(np.float32)
    scratch = np.zeros(n + 3, np.float32)
    got_rows, got = kernels.bm25_sparse(rows, tf, starts, weights, lengths, 9.5, 1.2, 0.75, scratch)
    want_rows, want = reference.bm25_sparse(
        rows, tf, starts, weights, lengths, 9.5, 1.2, 0.75, scratch
    )
    np.testing.assert_array_equal(got_rows, want_rows)
    np.testing.assert_array_equal(got, want)
    assert not scratch.any()
    assert set(got_rows.tolist()) == set(rows.tolist())


def test_bm25_sparse_refuses_bad_postings_and_keeps_the_scratch_clean() -> None:
    one = np.ones(1, np.float32)
    scratch = np.zeros(1, np.float32)
    starts = np.array([0, 1], dtype=np.int64)
    cases = [
        (np.array([3]), one, starts, np.ones(1), one),  # row outside the partition
        (np.array([0]), one, starts, np.zeros(1), one),  # weight 0 would hide the row
        (np.array([0]), np.zeros(1, np.float32), starts, np.ones(1), one),  # tf 0
        (np.array([0]), one, np.array([0, 2]), np.ones(1), one),  # starts overrun
        (np.array([0]), one, starts, np.ones(1), np.ones(2, np.float32)),  # scratch short
    ]
    for rows, tf, st_, weights, lengths in cases:
        with pytest.raises(ValueError):
            kernels.bm25_sparse(rows, tf, st_, weights, lengths, 1.0, 1.2, 0.75, scratch)
        assert not scratch.any()


# --- nb_language_scores ----------------------------------------------------------------------


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    states=st.integers(1, 12),
    features=st.integers(1, 30),
    languages=st.integers(1, 8),
    text=st.binary(max_size=300),
)
def test_nb_language_scores_match_the_twin_on_random_automata(
    seed: int, states: int, features: int, languages: int, text: bytes
) -> None:
    """Any automaton and text: the same number of distinct features, and the same scores
    to float32 rounding (the twin sums with BLAS, in another order)."""
    rng = np.random.default_rng(seed)
    tables = (
        np.frombuffer(text, dtype=np.uint8),
        rng.integers(0, states, states * 256).astype(np.uint32),
        np.arange(states, dtype=np.int64) * 256,
        rng.integers(-1, features, states).astype(np.int32),
        rng.standard_normal((features, languages)).astype(np.float16).view(np.uint16),
        kernels.F16_TO_F32,
        rng.standard_normal(languages).astype(np.float32),
    )
    got, got_distinct = kernels.nb_language_scores(*tables)
    want, want_distinct = reference.nb_language_scores(*tables)
    assert got_distinct == want_distinct
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_nb_language_scores_by_hand() -> None:
    # two states: byte "a" leads to state 1 (feature 0), anything else to state 0 (none)
    nextmove = np.zeros(512, dtype=np.uint32)
    nextmove[ord("a")] = nextmove[256 + ord("a")] = 1
    tables = (
        np.arange(2, dtype=np.int64) * 256,
        np.array([-1, 0], dtype=np.int32),
        np.array([[1.0, -2.0]], dtype=np.float16).view(np.uint16),
        kernels.F16_TO_F32,
        np.array([0.5, 0.25], dtype=np.float32),
    )
    for impl in (kernels, reference):
        scores, distinct = impl.nb_language_scores(
            np.frombuffer(b"xaxa", np.uint8), nextmove, *tables
        )
        assert distinct == 1  # one feature, seen twice: weight log1p(2)
        np.testing.assert_allclose(
            scores, [0.5 + math.log1p(2), 0.25 - 2 * math.log1p(2)], rtol=1e-6
        )
        scores, distinct = impl.nb_language_scores(
            np.frombuffer(b"xyz", np.uint8), nextmove, *tables
        )
        assert distinct == 0 and scores.tolist() == [0.5, 0.25]
