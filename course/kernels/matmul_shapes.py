"""Lesson 04, past v4 - the tile shape chosen per problem shape, and the waves it fills.

A launch of ``tiles`` blocks on ``sms`` multiprocessors that hold ``per_sm`` blocks each runs
in waves of ``sms * per_sm`` blocks; the last one may be partly empty.  :func:`waves` counts
them; :data:`TABLE` holds, for each matrix shape GPT-2 and lesson 04 use, the v5 setting
(tile, blocks per SM, split-K) that the sweep in ``course.bench.matmul.sweep_shapes``
measured fastest on the GPU (the sweeps' JSON, :data:`SWEEP_FILES`, committed beside the
report under ``assets/benchmarks/``); :func:`choose` looks a shape up, and falls back on the setting
whose last wave is fullest.  :data:`V6_TABLE` and :func:`choose_v6` do the same for
``matmul_v6`` (its settings also name the shared stages), from :data:`V6_SWEEP_FILES`.
"""
from __future__ import annotations

import math

HOST_ONLY = True                  # no kernels here: the table and its arithmetic

# (M, K, N) -> (fastest setting, fastest without split-K), a setting being (tile (BM, BN,
# BK, TM, TN), blocks per SM, split-K, k steps per loop turn): the H100 sweeps of 2026-11-26
# in SWEEP_FILES - 1: eight tiles x split-K, the loop as v4's; 2: CANDIDATES x SPLITS x steps
# 2, 4, 8 at all eleven shapes; 3: 16 steps, 3 blocks per SM and BK 8 at the T 1024 shapes
SWEEP_FILES = [f"matmul-shapes-sweep{i}-nvidia-h100-80gb-hbm3-2026-11-26.json" for i in (1, 2, 3)]
_SQ8, _SQ16, _N16 = (128, 128, 8, 8, 8), (128, 128, 16, 8, 8), (64, 128, 16, 8, 8)
TABLE: dict = {
    (4096, 4096, 4096): ((_SQ16, 2, 1, 16),) * 2,                            # 4096 cubed
    (4096, 768, 2304): ((_N16, 3, 1, 16),) * 2,                              # qkv, T 1024
    (4096, 768, 768): ((_N16, 3, 1, 16),) * 2,                               # attention proj
    (4096, 768, 3072): ((_SQ8, 2, 1, 8),) * 2,                               # MLP fc
    (4096, 3072, 768): ((_N16, 3, 1, 16),) * 2,                              # MLP proj
    (4096, 768, 50257): ((_SQ16, 2, 1, 2),) * 2,                             # logits
    (256, 768, 2304): ((_SQ8, 2, 3, 8), (_N16, 4, 1, 2)),                    # qkv, T 64
    (256, 768, 768): ((_N16, 4, 4, 2), (_N16, 4, 1, 2)),                     # attention proj
    (256, 768, 3072): ((_N16, 4, 4, 2), (_N16, 4, 1, 2)),                    # MLP fc
    (256, 3072, 768): ((_N16, 4, 4, 2), (_N16, 4, 1, 2)),                    # MLP proj
    (256, 768, 50257): ((_N16, 4, 1, 2), (_N16, 4, 1, 2)),                   # logits
}
# the sweep's candidates: (tile, blocks per SM) x split-K x k steps written out per loop turn
# (sweep 1 also tried (128, 256, 8, 8, 16) and (256, 128, 8, 16, 8) at one block per SM and
# (128, 128, 16, 8, 8) at one: never the fastest at any shape)
CANDIDATES = [((64, 128, 16, 8, 8), 4), ((128, 128, 16, 8, 8), 2), ((128, 64, 16, 8, 8), 4),
              ((64, 64, 16, 8, 8), 8), ((128, 128, 8, 8, 8), 2), ((64, 128, 16, 8, 8), 3)]
SPLITS = (1, 2, 3, 4)
STEPS = (2, 4, 8, 16)


def key(tile, per_sm: int, split: int, steps: int) -> str:
    """The sweep's name of one setting."""
    return f"{tuple(tile)} mb={per_sm} split={split} steps={steps}"
SMS = 132                         # the H100's multiprocessors (the sweep's GPU)


def waves(M: int, N: int, BM: int, BN: int, per_sm: int, split: int = 1,
          sms: int = SMS) -> dict:
    """Blocks, places for them at once (``sms * per_sm``), waves (blocks / places) and the
    share of places the launch keeps busy over its whole waves (``fill``)."""
    blocks = math.ceil(M / BM) * math.ceil(N / BN) * split
    places = sms * per_sm
    w = blocks / places
    return {"blocks": blocks, "places": places, "waves": w, "fill": w / math.ceil(w)}


def _fullest(M: int, K: int, N: int, candidates, atomic: bool) -> tuple:
    """(tile, blocks per SM, split) of ``candidates`` whose waves are fullest (the first of
    equals; split-K only when the epilogue can add: ``atomic``)."""
    best = None
    for tile, per_sm in candidates:
        for split in SPLITS if atomic else (1,):
            if split > 1 and K // split < 256:
                continue
            f = waves(M, N, tile[0], tile[1], per_sm, split)["fill"]
            if best is None or f > best[0] + 1e-9:
                best = (f, (tile, per_sm, split))
    return best[1]


def choose(M: int, K: int, N: int, *, atomic: bool = True) -> tuple:
    """(tile, blocks per SM, split, steps) for C (M x N) = A (M x K) @ B: the table's entry, or the
    candidate whose waves are fullest (split-K only when the epilogue can add: ``atomic``)."""
    if (M, K, N) in TABLE:
        return TABLE[(M, K, N)][0 if atomic else 1]
    return (*_fullest(M, K, N, CANDIDATES, atomic), 4)


# matmul_v6: (M, K, N) -> (fastest setting, fastest without split-K), a setting being (tile,
# blocks per SM, split-K, k steps, shared stages): the H200 sweeps of 2026-11-29 (every GPT-2
# shape and 4096 cubed: 14 settings x split-K; then stages and warps at the three narrow T 1024
# shapes).  One tile, 64 x 128 with 8 x 8 a thread at 3-4 blocks an SM, won at every shape.
V6_SWEEP_FILES = [f"matmul-v6-sweep{s}-nvidia-h200-2026-11-29.json" for s in ("", "-narrow")]
_W = (64, 128, 16, 8, 8)
V6_TABLE: dict = {
    (4096, 4096, 4096): ((_W, 4, 1, 16, 3),) * 2,                            # 4096 cubed
    (4096, 768, 2304): ((_W, 4, 1, 16, 2),) * 2,                             # qkv, T 1024
    (4096, 768, 768): ((_W, 4, 1, 16, 2),) * 2,                              # attention proj
    (4096, 768, 3072): ((_W, 4, 1, 16, 2),) * 2,                             # MLP fc
    (4096, 3072, 768): ((_W, 3, 1, 16, 3),) * 2,                             # MLP proj
    (4096, 768, 50257): ((_W, 4, 1, 16, 3),) * 2,                            # logits
    (256, 768, 2304): ((_W, 4, 3, 16, 3), (_W, 4, 1, 16, 3)),                # qkv, T 64
    (256, 768, 768): ((_W, 4, 3, 16, 3), (_W, 4, 1, 16, 3)),                 # attention proj
    (256, 768, 3072): ((_W, 4, 1, 16, 3),) * 2,                              # MLP fc
    (256, 3072, 768): ((_W, 4, 4, 16, 3), (_W, 4, 1, 16, 3)),                # MLP proj
    (256, 768, 50257): ((_W, 4, 1, 16, 3),) * 2,                             # logits
}
V6_CANDIDATES = [(_W, 4), ((128, 128, 16, 8, 8), 2)]


def choose_v6(M: int, K: int, N: int, *, atomic: bool = True) -> tuple:
    """(tile, blocks per SM, split, steps, stages) of matmul_v6 for one shape: the table's
    entry, or the fullest waves of :data:`V6_CANDIDATES` with 3 stages and 16 steps."""
    if (M, K, N) in V6_TABLE:
        return V6_TABLE[(M, K, N)][0 if atomic else 1]
    return (*_fullest(M, K, N, V6_CANDIDATES, atomic), 16, 3)
