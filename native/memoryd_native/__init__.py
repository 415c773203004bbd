"""Hot-path numerical kernels (numba) with a plain-numpy twin of each in ``reference``.

Imports numpy and numba only. Call ``warm_up()`` once at daemon start, before reporting
SERVING, so that no request pays for JIT compilation. Formulas and conventions are
documented in ``kernels``.
"""

from memoryd_native.kernels import (
    FUSION_PRESCORED,
    FUSION_RRF,
    FUSION_WEIGHTED,
    N_STAGES,
    S_DECAY,
    S_FINAL,
    S_FUSED,
    S_IMPORTANCE,
    S_LENGTH,
    S_RECENCY,
    STAGE_NAMES,
    bm25_sparse,
    fuse_and_boost,
    make_params,
    maxsim,
    mmr_select,
    nb_language_scores,
    quantize_rows,
    ranks_desc,
    topk_dot,
    topk_dot_f16,
    topk_dot_q8,
    topk_dot_q8_f16,
    topk_scores,
    widen_rows,
)
from memoryd_native.warmup import warm_up

__all__ = [
    "FUSION_PRESCORED",
    "FUSION_RRF",
    "FUSION_WEIGHTED",
    "N_STAGES",
    "STAGE_NAMES",
    "S_DECAY",
    "S_FINAL",
    "S_FUSED",
    "S_IMPORTANCE",
    "S_LENGTH",
    "S_RECENCY",
    "bm25_sparse",
    "fuse_and_boost",
    "make_params",
    "maxsim",
    "mmr_select",
    "nb_language_scores",
    "quantize_rows",
    "ranks_desc",
    "topk_dot",
    "topk_dot_f16",
    "topk_dot_q8",
    "topk_dot_q8_f16",
    "topk_scores",
    "warm_up",
    "widen_rows",
]
