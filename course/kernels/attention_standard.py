"""Lesson 08, section 1 - standard attention: three kernels and an N x N score matrix S per
head in global memory.

``attn_scores`` writes S = Q K^T * scale (masked entries -inf), ``softmax_rows_inplace``
turns each row of S into probabilities P in place, and ``attn_pv`` multiplies P V into O.
``attention.launch("naive_three_kernels", ...)`` runs the three in turn, a few heads at a
time so S fits in memory; the fused and flash versions that never write S are
``attention.py``'s.  Shapes and masks as in ``attention.py``.
"""
from __future__ import annotations

import math

from numba import cuda, float32

from .attention_common import NEG_INF, SOFTMAX_TPB, TILE, visible


@cuda.jit
def attn_scores(Q, K, S, scale, causal, window):
    # Thread (tx, ty) of block (bx, by, bh) owns S[bh, i, j], i = by*TILE+ty, j = bx*TILE+tx.
    # sA holds a TILE x TILE piece of Q, sB one of K (shared memory); S lives in global memory.
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bh = cuda.blockIdx.z
    i = cuda.blockIdx.y * TILE + ty
    j = cuda.blockIdx.x * TILE + tx
    n, d = Q.shape[1], Q.shape[2]
    acc = float32(0.0)
    for k0 in range(0, d, TILE):
        sA[ty, tx] = float32(Q[bh, i, k0 + tx]) if i < n and k0 + tx < d else float32(0.0)
        kr = cuda.blockIdx.x * TILE + ty          # this thread loads row kr of K
        sB[tx, ty] = float32(K[bh, kr, k0 + tx]) if kr < n and k0 + tx < d else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if i < n and j < n:
        S[bh, i, j] = acc * scale if visible(i, j, n, causal, window) else NEG_INF


@cuda.jit
def softmax_rows_inplace(S):
    # Block (r, bh) owns row r of S[bh]; thread t owns elements t, t + TPB, ...
    # Three passes over the row in global memory: max, sum of exp, normalize.
    sdata = cuda.shared.array(SOFTMAX_TPB, float32)
    t = cuda.threadIdx.x
    r, bh = cuda.blockIdx.x, cuda.blockIdx.y
    n = S.shape[2]
    m = NEG_INF
    for j in range(t, n, SOFTMAX_TPB):
        m = max(m, S[bh, r, j])
    sdata[t] = m
    cuda.syncthreads()
    s = SOFTMAX_TPB // 2
    while s > 0:
        if t < s:
            sdata[t] = max(sdata[t], sdata[t + s])
        cuda.syncthreads()
        s //= 2
    m = sdata[0]
    cuda.syncthreads()
    total = float32(0.0)
    if m > NEG_INF:                      # a fully masked row keeps total = 0
        for j in range(t, n, SOFTMAX_TPB):
            total += math.exp(S[bh, r, j] - m)
    sdata[t] = total
    cuda.syncthreads()
    s = SOFTMAX_TPB // 2
    while s > 0:
        if t < s:
            sdata[t] += sdata[t + s]
        cuda.syncthreads()
        s //= 2
    inv = float32(1.0) / sdata[0] if sdata[0] > 0 else float32(0.0)
    for j in range(t, n, SOFTMAX_TPB):
        S[bh, r, j] = math.exp(S[bh, r, j] - m) * inv if m > NEG_INF else float32(0.0)


@cuda.jit
def attn_pv(P, V, O):
    # Thread (tx, ty) of block (bx, by, bh) owns O[bh, i, c], i = by*TILE+ty, c = bx*TILE+tx.
    # sA: TILE x TILE piece of P, sB: of V (shared); P, V, O in global memory.
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bh = cuda.blockIdx.z
    i = cuda.blockIdx.y * TILE + ty
    c = cuda.blockIdx.x * TILE + tx
    n, d = V.shape[1], V.shape[2]
    acc = float32(0.0)
    for j0 in range(0, n, TILE):
        sA[ty, tx] = P[bh, i, j0 + tx] if i < n and j0 + tx < n else float32(0.0)
        sB[ty, tx] = float32(V[bh, j0 + ty, c]) if j0 + ty < n and c < d else float32(0.0)
        cuda.syncthreads()
        for j in range(TILE):
            acc += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if i < n and c < d:
        O[bh, i, c] = acc


_ARR3 = "float32[:, :, ::1]"
PTX_SIGNATURES = {
    "attn_scores": f"void({_ARR3}, {_ARR3}, {_ARR3}, float32, boolean, int64)",
    "softmax_rows_inplace": f"void({_ARR3})",
    "attn_pv": f"void({_ARR3}, {_ARR3}, {_ARR3})",
}
