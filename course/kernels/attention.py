"""Lesson 08 - attention to flash attention: O = softmax(Q K^T / sqrt(d)) V.

Follows the CS 483 GPT-2 CUDA final report (flash attention, local attention with a
window W, attention-layer memory traffic) and a CS149 team's work log (leaderboard shape
batch 4 x 64 heads x 8,192 tokens x head dim 128, TileLang 13.6 ms on an H100).

Arrays: Q, K, V are (batch, heads, N, d) on the host; the kernels see them as
(batch*heads, N, d) in global memory, float32 or float16 (always accumulated in float32).
Masks: ``causal`` lets query i see keys j <= i; ``window=W`` (the report's local attention)
lets query i see keys i - W <= j <= i.  A row that sees no key at all gets O = 0.
The tensor-core version lives in ``attention_wmma.py`` (GPU only).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from .. import runtime

NOTEBOOKS = ["08_flash_attention"]

TILE = 16          # naive version: 16 x 16 tiles of the two matrix products (lesson 04)
SOFTMAX_TPB = 128 if runtime.MODE == "gpu" else 32  # naive softmax: threads per row (block)
Br = 32            # flash: query rows per block
Bc = 32            # flash: key/value rows per shared-memory tile
D_MAX = 128        # largest head dimension the register/shared arrays hold
D_PAD = D_MAX + 1  # flash: padded shared row length (no bank conflicts across rows)
Bc_PAD = Bc + 1
FLASH_TX = 16      # flash: threads along a row (columns); 128 threads = 8 x 16
FLASH_THREADS = 128
ROW_THREADS = 128  # fused_row_per_thread: threads per block
NEG_INF = float32(-np.inf)


@cuda.jit(device=True, inline=True)
def visible(i, j, n, causal, window):
    # May query i look at key j?  (padding keys j >= n never; causal: j <= i; window: i - j <= W)
    return j < n and (not causal or j <= i) and (window < 0 or i - j <= window)


# ---------------------------------------------------------------------------------------
# 1. standard attention: three kernels and an N x N score matrix S per head in global memory

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


# ---------------------------------------------------------------------------------------
# 2. fused, one query row per thread: online softmax over every key, nothing materialized

@cuda.jit
def attn_row_per_thread(Q, K, V, O, scale, causal, window):
    # Thread owns query row i of head bh: q and the output accumulator in local memory.
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    bh = cuda.blockIdx.y
    n, d = Q.shape[1], Q.shape[2]
    if i >= n:
        return
    q = cuda.local.array(D_MAX, float32)
    acc = cuda.local.array(D_MAX, float32)
    for c in range(d):
        q[c] = float32(Q[bh, i, c]) * scale
        acc[c] = float32(0.0)
    m = NEG_INF          # running max of the scores seen so far
    l = float32(0.0)     # running sum of exp(score - m)
    for j in range(n):
        if visible(i, j, n, causal, window):
            s = float32(0.0)
            for c in range(d):
                s += q[c] * float32(K[bh, j, c])
            m_new = max(m, s)
            alpha = math.exp(m - m_new)          # rescale what was summed under the old max
            p = math.exp(s - m_new)
            l = l * alpha + p
            for c in range(d):
                acc[c] = acc[c] * alpha + p * float32(V[bh, j, c])
            m = m_new
    inv = float32(1.0) / l if l > 0 else float32(0.0)
    for c in range(d):
        O[bh, i, c] = acc[c] * inv


# ---------------------------------------------------------------------------------------
# 3. flash attention forward, tiled (CUDA cores)

@cuda.jit
def flash_fwd(Q, K, V, O, L, scale, causal, window):
    # Block (bx, bh) owns query rows q0 .. q0+Br-1 of head bh and walks K/V in tiles of Bc.
    # Thread t: tx = t % 16, ty = t // 16; it owns rows ty, ty+8, ty+16, ty+24 of the tile,
    # score columns tx, tx+16 and output columns tx, tx+16, ..., tx+112 (registers).
    # Shared: sQ (scaled Q tile), sKV (K tile, then V tile), sS (scores, then P), m/l/alpha.
    sQ = cuda.shared.array((Br, D_PAD), float32)
    sKV = cuda.shared.array((Bc, D_PAD), float32)
    sS = cuda.shared.array((Br, Bc_PAD), float32)
    sM = cuda.shared.array(Br, float32)
    sL = cuda.shared.array(Br, float32)
    sAlpha = cuda.shared.array(Br, float32)
    acc = cuda.local.array((4, 8), float32)
    t = cuda.threadIdx.x
    tx, ty = t % FLASH_TX, t // FLASH_TX
    bh, q0 = cuda.blockIdx.y, cuda.blockIdx.x * Br
    n, d = Q.shape[1], Q.shape[2]
    for e in range(t, Br * D_PAD, FLASH_THREADS):    # zero: columns >= d stay 0
        sQ[e // D_PAD, e % D_PAD] = float32(0.0)
    for e in range(t, Bc * D_PAD, FLASH_THREADS):
        sKV[e // D_PAD, e % D_PAD] = float32(0.0)
    cuda.syncthreads()
    for r in range(ty, Br, FLASH_THREADS // FLASH_TX):     # row r, columns tx, tx+16, ...
        for c in range(tx, d, FLASH_TX):
            if q0 + r < n:
                sQ[r, c] = float32(Q[bh, q0 + r, c]) * scale
    if t < Br:
        sM[t] = NEG_INF
        sL[t] = float32(0.0)
    for a in range(4):
        for c in range(8):
            acc[a, c] = float32(0.0)
    lo, hi = 0, n                           # key tiles that can hold a visible key
    if causal:
        hi = min(n, q0 + Br)
    if window >= 0:
        lo = max(0, q0 - window) // Bc * Bc
    for j0 in range(lo, hi, Bc):
        cuda.syncthreads()                  # everyone is done with the last V tile
        for r in range(ty, Bc, FLASH_THREADS // FLASH_TX):
            for c in range(tx, d, FLASH_TX):
                sKV[r, c] = float32(K[bh, j0 + r, c]) if j0 + r < n else float32(0.0)
        cuda.syncthreads()                  # K tile loaded before anyone reads it
        for a in range(4):                  # S = Q K^T for my 4 x 2 scores
            r = ty + 8 * a
            for b in range(2):
                cc = tx + 16 * b
                s = float32(0.0)
                for k in range(d):
                    s += sQ[r, k] * sKV[cc, k]
                ok = q0 + r < n and visible(q0 + r, j0 + cc, n, causal, window)
                sS[r, cc] = s if ok else NEG_INF
        cuda.syncthreads()                  # scores done; K tile no longer needed
        if t % 32 < Br // 4:                # online softmax: lanes 0-7 of warp w own rows 8w..8w+7
            rs = (t // 32) * (Br // 4) + t % 32
            m_old = sM[rs]
            m_new = m_old
            for c in range(Bc):
                m_new = max(m_new, sS[rs, c])
            alpha = float32(1.0)
            l = sL[rs]
            if m_new > NEG_INF:
                alpha = math.exp(m_old - m_new)
                l = l * alpha
                for c in range(Bc):
                    p = math.exp(sS[rs, c] - m_new)
                    sS[rs, c] = p
                    l += p
            else:
                for c in range(Bc):
                    sS[rs, c] = float32(0.0)
            sM[rs] = m_new
            sL[rs] = l
            sAlpha[rs] = alpha
        for r in range(ty, Bc, FLASH_THREADS // FLASH_TX):
            for c in range(tx, d, FLASH_TX):
                sKV[r, c] = float32(V[bh, j0 + r, c]) if j0 + r < n else float32(0.0)
        cuda.syncthreads()                  # P, alpha and the V tile ready
        for a in range(4):                  # O = alpha * O + P V for my 4 x 8 outputs
            al = sAlpha[ty + 8 * a]
            for c in range(8):
                acc[a, c] *= al
        for j in range(Bc):
            p0, p1 = sS[ty, j], sS[ty + 8, j]
            p2, p3 = sS[ty + 16, j], sS[ty + 24, j]
            for c in range(8):
                v = sKV[j, tx + 16 * c]
                acc[0, c] += p0 * v
                acc[1, c] += p1 * v
                acc[2, c] += p2 * v
                acc[3, c] += p3 * v
    cuda.syncthreads()
    for a in range(4):                      # O = acc / l, written once
        r = ty + 8 * a
        if q0 + r < n:
            l = sL[r]
            inv = float32(1.0) / l if l > 0 else float32(0.0)
            for c in range(8):
                if tx + 16 * c < d:
                    O[bh, q0 + r, tx + 16 * c] = acc[a, c] * inv
            if tx == 0:                     # log-sum-exp, for a backward pass
                L[bh, q0 + r] = sM[r] + math.log(l) if l > 0 else NEG_INF


_ARR3 = "float32[:, :, ::1]"
PTX_SIGNATURES = {
    "attn_scores": f"void({_ARR3}, {_ARR3}, {_ARR3}, float32, boolean, int64)",
    "softmax_rows_inplace": f"void({_ARR3})",
    "attn_pv": f"void({_ARR3}, {_ARR3}, {_ARR3})",
    "attn_row_per_thread": f"void({_ARR3}, {_ARR3}, {_ARR3}, {_ARR3}, float32, boolean, int64)",
    "flash_fwd": f"void({_ARR3}, {_ARR3}, {_ARR3}, {_ARR3}, float32[:, ::1], float32, "
                 "boolean, int64)",
}


# ---------------------------------------------------------------------------------------
# host side: launches on device arrays, numpy wrappers (VARIANTS), reference, counting

def launch(variant: str, Q, K, V, O, *, causal: bool = False, window: int = -1,
           scratch=None, heads_per_launch: int | None = None):
    """Launch ``variant`` on device arrays shaped (batch*heads, N, d); writes O (float32).

    naive_three_kernels needs ``scratch``: a float32 device array (h, N, N) with h <= BH;
    heads are processed h at a time so the N x N score matrix fits in memory.
    """
    bh, n, d = Q.shape
    scale = float32(1.0 / math.sqrt(d))
    window = -1 if window is None else int(window)
    causal = bool(causal or window >= 0)
    if variant == "naive_three_kernels":
        h = scratch.shape[0]
        for b0 in range(0, bh, h):
            b1 = min(bh, b0 + h)
            S = scratch[: b1 - b0]
            q, k, v, o = Q[b0:b1], K[b0:b1], V[b0:b1], O[b0:b1]
            grid = (math.ceil(n / TILE), math.ceil(n / TILE), b1 - b0)
            attn_scores[grid, (TILE, TILE)](q, k, S, scale, causal, window)
            softmax_rows_inplace[(n, b1 - b0), SOFTMAX_TPB](S)
            attn_pv[(math.ceil(d / TILE), math.ceil(n / TILE), b1 - b0), (TILE, TILE)](S, v, o)
    elif variant == "fused_row_per_thread":
        attn_row_per_thread[(math.ceil(n / ROW_THREADS), bh), ROW_THREADS](
            Q, K, V, O, scale, causal, window)
    elif variant in ("flash_tiled", "flash_tiled_causal", "flash_sliding_window"):
        L = cuda.device_array((bh, n), dtype=np.float32)
        flash_fwd[(math.ceil(n / Br), bh), FLASH_THREADS](Q, K, V, O, L, scale, causal, window)
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")


def validate(Q, K, V):
    """Check shapes/dtypes; return contiguous (batch*heads, N, d) arrays and (B, H, N, d)."""
    Q, K, V = (np.ascontiguousarray(a) for a in (Q, K, V))
    if Q.ndim != 4 or Q.shape != K.shape or Q.shape != V.shape:
        raise ValueError(f"Q, K, V must all be (batch, heads, N, d); got {Q.shape}, "
                         f"{K.shape}, {V.shape}")
    if Q.dtype not in (np.float32, np.float16) or not Q.dtype == K.dtype == V.dtype:
        raise ValueError(f"Q, K, V must all be float32 or all float16; got {Q.dtype}, "
                         f"{K.dtype}, {V.dtype}")
    b, h, n, d = Q.shape
    if min(Q.shape) < 1 or d > D_MAX:
        raise ValueError(f"need every dimension >= 1 and head dim d <= {D_MAX}; got {Q.shape}")
    return [a.reshape(b * h, n, d) for a in (Q, K, V)], Q.shape


def _host(variant, *, causal=False, window=None):
    def run(Q, K, V, **options):
        (q, k, v), shape = validate(Q, K, V)
        c = options.pop("causal", causal)
        w = options.pop("window", window)
        if w is not None and int(w) < 0:
            raise ValueError(f"window must be >= 0 (keys i - W .. i), got {w}")
        scratch = None
        if variant == "naive_three_kernels":
            h = options.pop("heads_per_launch", None) or q.shape[0]
            scratch = cuda.device_array((min(h, q.shape[0]), shape[2], shape[2]), np.float32)
        if options:
            raise ValueError(f"unknown options {sorted(options)} for {variant}")
        d_o = cuda.device_array(q.shape, dtype=np.float32)
        launch(variant, cuda.to_device(q), cuda.to_device(k), cuda.to_device(v), d_o,
               causal=c, window=w, scratch=scratch)
        return d_o.copy_to_host().reshape(shape).astype(Q.dtype)
    run.__name__ = variant
    run.__doc__ = f"Attention O for (batch, heads, N, d) Q, K, V by the {variant!r} kernels."
    return run


VARIANTS = {
    "naive_three_kernels": _host("naive_three_kernels"),
    "fused_row_per_thread": _host("fused_row_per_thread"),
    "flash_tiled": _host("flash_tiled"),
    "flash_tiled_causal": _host("flash_tiled_causal", causal=True),
    "flash_sliding_window": _host("flash_sliding_window", causal=True, window=64),
}


def mask(n: int, causal: bool = False, window=None) -> np.ndarray:
    """(N, N) bool: True where query i may see key j."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    ok = np.ones((n, n), dtype=bool)
    if causal or window is not None:
        ok &= j <= i
    if window is not None:
        ok &= i - j <= window
    return ok


def reference(Q, K, V, causal: bool = False, window=None) -> np.ndarray:
    """softmax(Q K^T / sqrt(d), masked) V in float64; rows that see no key give 0."""
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    S = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    ok = mask(Q.shape[-2], causal, window)
    S = np.where(ok, S, -np.inf)
    m = S.max(axis=-1, keepdims=True)
    P = np.where(ok, np.exp(S - np.where(np.isfinite(m), m, 0.0)), 0.0)
    l = P.sum(axis=-1, keepdims=True)
    return (P / np.where(l > 0, l, 1.0)) @ V


def rel_error(got, expected) -> float:
    """||got - expected|| / ||expected|| (Frobenius norms, float64)."""
    got = np.asarray(got, dtype=np.float64)
    return float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-300))


def flops(b: int, h: int, n: int, d: int, causal: bool = False) -> float:
    """4 B H N^2 d (two matrix products of 2 N^2 d each); half of it when causal."""
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def traffic_bytes(b: int, h: int, n: int, d: int, itemsize: int = 4) -> dict:
    """Global-memory bytes each version must move at least (each array read/written once).

    three kernels: read Q, K; write S; read S, write P (in place); read P, V; write O.
    flash: read Q, K, V once and write O once (plus one float32 log-sum-exp per row).
    """
    qkvo = b * h * n * d * itemsize
    scores = b * h * n * n * 4
    return {"three_kernels": 4 * qkvo + 4 * scores, "flash": 4 * qkvo + b * h * n * 4,
            "score_matrix": scores}

if runtime.MODE == "gpu":   # the tensor-core version links CUDA C++: real GPUs only
    from .attention_wmma import flash_wmma

    VARIANTS["flash_wmma"] = flash_wmma
