"""Lesson 08 - attention to flash attention: O = softmax(Q K^T / sqrt(d)) V.

Follows the CS 483 GPT-2 CUDA final report (flash attention, local attention with a
window W, attention-layer memory traffic) and a CS149 team's work log (leaderboard shape
batch 4 x 64 heads x 8,192 tokens x head dim 128, TileLang 13.6 ms on an H100).

Arrays: Q, K, V are (batch, heads, N, d) on the host; the kernels see them as
(batch*heads, N, d) in global memory, float32 or float16 (always accumulated in float32).
Masks: ``causal`` lets query i see keys j <= i; ``window=W`` (the report's local attention)
lets query i see keys i - W <= j <= i.  A row that sees no key at all gets O = 0.
Shared constants and checks: ``attention_common.py``; standard attention (three kernels,
S in global memory): ``attention_standard.py``; the tuned flash kernel:
``attention_tuned.py``; the tensor-core versions (GPU only): ``attention_wmma.py`` (wmma
tiles through shared memory) and ``attention_mma.py`` (mma.sync, S and O in registers).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, uint64

from ..platform import runtime
from .attention_common import (  # noqa: F401 - re-exported
    D_MAX,
    D_PAD,
    FLASH_SHARED,
    FLASH_THREADS,
    LOG2E,
    NEG_INF,
    OPT,
    P_PAD,
    ROW_GROUPS,
    ROW_LANES,
    ROW_THREADS,
    RPT,
    SKV_AT,
    SOFTMAX_TPB,
    SP_AT,
    SPT,
    SQ_AT,
    TILE,
    Bc,
    Br,
    allow_big_shared,
    flops,
    mask,
    pairs,
    reference,
    rel_error,
    traffic_bytes,
    validate,
    visible,
)
from .attention_standard import (  # noqa: F401 - re-exported
    attn_pv,
    attn_scores,
    softmax_rows_inplace,
)
from .attention_tuned import (  # noqa: F401 - re-exported
    TUNED_DIMS,
    as_pairs,
    flash_fwd_tuned,
    make_flash_tuned,
    reused_buffer,
    tuned_kernel,
)

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
    # Thread t: tr = t // 16, tc = t % 16 (the 16 lanes of a half warp share rows).  It owns
    # rows tr + 16a (a < RPT), score columns tc + 16b (b < SPT) and output columns tc + 16c
    # (c < OPT): scores s, accumulator acc, row max m and row sum l live in registers.
    # Shared (one dynamic buffer sm): sQ = scaled Q tile, sKV = K tile then V tile, sP = P.
    sm = cuda.shared.array(0, float32)
    s = cuda.local.array((RPT, SPT), float32)
    acc = cuda.local.array((RPT, OPT), float32)
    m = cuda.local.array(RPT, float32)
    l = cuda.local.array(RPT, float32)
    t = cuda.threadIdx.x
    tr, tc = t // ROW_LANES, t % ROW_LANES
    bh, q0 = cuda.blockIdx.y, cuda.blockIdx.x * Br
    n, d = Q.shape[1], Q.shape[2]
    lr, lc = t // 32, t % 32                # loader: rows lr + 8i, columns lc + 32u
    for r in range(lr, Br, FLASH_THREADS // 32):
        for c in range(lc, d, 32):
            qv = float32(Q[bh, uint64(q0 + r), uint64(c)]) * scale if q0 + r < n else float32(0.0)
            sm[uint64(SQ_AT + r * D_PAD + c)] = qv
    for a in range(RPT):
        m[a] = NEG_INF
        l[a] = float32(0.0)
        for c in range(OPT):
            acc[a, c] = float32(0.0)
    lo, hi = 0, n                           # key tiles that can hold a visible key
    if causal:
        hi = min(n, q0 + Br)
    if window >= 0:
        lo = max(0, q0 - window) // Bc * Bc
    for j0 in range(lo, hi, Bc):
        cuda.syncthreads()                  # everyone is done with the last V tile and P
        for r in range(lr, Bc, FLASH_THREADS // 32):
            for c in range(lc, d, 32):
                kv = float32(K[bh, uint64(j0 + r), uint64(c)]) if j0 + r < n else float32(0.0)
                sm[uint64(SKV_AT + r * D_PAD + c)] = kv
        cuda.syncthreads()                  # K tile loaded before anyone reads it
        for a in range(RPT):                # S = Q K^T: my RPT x SPT scores
            for b in range(SPT):
                s[a, b] = float32(0.0)
        for k in range(d):
            qk = cuda.local.array(RPT, float32)
            for a in range(RPT):
                qk[a] = sm[uint64(SQ_AT + (tr + ROW_GROUPS * a) * D_PAD + k)]
            for b in range(SPT):
                kk = sm[uint64(SKV_AT + (tc + ROW_LANES * b) * D_PAD + k)]
                for a in range(RPT):
                    s[a, b] += qk[a] * kk
        full = (j0 + Bc <= n and q0 + Br <= n and (not causal or j0 + Bc <= q0 + 1)
                and (window < 0 or q0 + Br - 1 - j0 <= window))
        cuda.syncthreads()                  # K tile no longer needed: V may overwrite it
        mx = cuda.local.array(RPT, float32)
        for a in range(RPT):                # online softmax of row tr + 16a over 16 lanes
            i = q0 + tr + ROW_GROUPS * a
            mx[a] = NEG_INF
            for b in range(SPT):
                if not (full or visible(i, j0 + tc + ROW_LANES * b, n, causal, window)):
                    s[a, b] = NEG_INF
                mx[a] = max(mx[a], s[a, b])
        for off in range(4):                # row max over the 16 lanes: xor 8, 4, 2, 1
            for a in range(RPT):
                mx[a] = max(mx[a], cuda.shfl_xor_sync(0xFFFFFFFF, mx[a], 8 >> off))
        for a in range(RPT):                # a row with no visible key yet: m stays -inf,
            m_new = max(m[a], mx[a])        # exponents use 0 instead, so p = alpha = 0
            m_use = m_new if m_new > NEG_INF else float32(0.0)
            mx[a] = math.exp(m[a] - m_use)  # mx now holds alpha, the rescale factor
            m[a] = m_new
            for b in range(SPT):
                s[a, b] = math.exp(s[a, b] - m_use)
        ps = cuda.local.array(RPT, float32)
        for a in range(RPT):
            ps[a] = float32(0.0)
            for b in range(SPT):
                ps[a] += s[a, b]
                sm[uint64(SP_AT + (tr + ROW_GROUPS * a) * P_PAD + tc + ROW_LANES * b)] = s[a, b]
        for off in range(4):                # row sum over the 16 lanes
            for a in range(RPT):
                ps[a] += cuda.shfl_xor_sync(0xFFFFFFFF, ps[a], 8 >> off)
        for a in range(RPT):
            l[a] = l[a] * mx[a] + ps[a]
            for c in range(OPT):
                acc[a, c] *= mx[a]
        for r in range(lr, Bc, FLASH_THREADS // 32):
            for c in range(lc, d, 32):
                kv = float32(V[bh, uint64(j0 + r), uint64(c)]) if j0 + r < n else float32(0.0)
                sm[uint64(SKV_AT + r * D_PAD + c)] = kv
        cuda.syncthreads()                  # P and the V tile ready
        for j in range(Bc):                 # O += P V: my RPT x OPT outputs
            pj = cuda.local.array(RPT, float32)
            for a in range(RPT):
                pj[a] = sm[uint64(SP_AT + (tr + ROW_GROUPS * a) * P_PAD + j)]
            for c in range(OPT):
                v = sm[uint64(SKV_AT + j * D_PAD + tc + ROW_LANES * c)]
                for a in range(RPT):
                    acc[a, c] += pj[a] * v
    for a in range(RPT):                    # O = acc / l, written once
        i = q0 + tr + ROW_GROUPS * a
        if i < n:
            inv = float32(1.0) / l[a] if l[a] > 0 else float32(0.0)
            for c in range(OPT):
                if tc + ROW_LANES * c < d:
                    O[bh, i, tc + ROW_LANES * c] = acc[a, c] * inv
            if tc == 0:                     # log-sum-exp, for a backward pass
                L[bh, i] = m[a] + math.log(l[a]) if l[a] > 0 else NEG_INF


_ARR3 = "float32[:, :, ::1]"
PTX_SIGNATURES = {
    "attn_row_per_thread": f"void({_ARR3}, {_ARR3}, {_ARR3}, {_ARR3}, float32, boolean, int64)",
    "flash_fwd": f"void({_ARR3}, {_ARR3}, {_ARR3}, {_ARR3}, float32[:, ::1], float32, "
                 "boolean, int64)",
}



# ---------------------------------------------------------------------------------------
# host side: launches on device arrays, numpy wrappers (VARIANTS), reference, counting

def launch(variant: str, Q, K, V, O, *, causal: bool = False, window: int = -1,
           scratch=None, heads_per_launch: int | None = None, stream=0):
    """Launch ``variant`` on device arrays shaped (batch*heads, N, d); writes O (float32).
    The flash variants launch on ``stream`` (0: numba's default; the others always there).

    The flash variants run flash_fwd_tuned (its build for d); ``"flash_fwd"`` runs the first
    tiled kernel (one float per shared-memory load), kept for the notebook and the benchmark.
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
    elif variant in ("flash_tiled", "flash_tiled_causal", "flash_sliding_window",
                     "flash_fwd"):
        L = reused_buffer("L", (bh, n))     # log-sum-exp rows: written, not returned
        kernel = flash_fwd if variant == "flash_fwd" else tuned_kernel(d)
        flash_launch(kernel, Q, K, V, O, L, scale, causal, window, stream)
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")


def flash_launch(kernel, Q, K, V, O, L, scale, causal, window, stream=0):
    """Launch flash_fwd or a flash_fwd_tuned build with the dynamic shared memory it needs
    (> 48 KB); the tuned builds get Q, K, V as float32 pairs (``as_pairs``)."""
    bh, n, _ = Q.shape
    shared = getattr(kernel, "shared_bytes", FLASH_SHARED)
    args = (Q, K, V, O, L, float32(scale), bool(causal), int(window))
    if hasattr(kernel, "head_dim"):     # one head a batch, rows of D: D / 2 pairs apart
        args = (*(as_pairs(X, kernel.head_dim, slot, stream)
                  for slot, X in enumerate((Q, K, V))), *args[3:], 1, kernel.head_dim // 2)
    _start(kernel, args, n, bh, shared, stream)


def _start(kernel, args, n: int, bh: int, shared: int, stream) -> None:
    """One flash launch: a block per Br query rows of each of the bh heads (the tuned kernel's
    causal order counts on gridDim.x = ceil(n / Br)), ``shared`` bytes allowed first."""
    allow_big_shared(kernel, args, shared)
    kernel[(math.ceil(n / Br), bh), FLASH_THREADS, stream, shared](*args)


def flash_in_place(qkv, y, heads: int, T: int, stream=0) -> None:
    """GPT-2's causal attention straight from its fused projection: ``qkv`` (B*T, 3C) holds
    q, k, v side by side (head h: columns h hs .. (h + 1) hs of each third), and O lands in
    ``y`` (B*T, C) with the heads side by side - no permute or unpermute pass.  One
    flash_fwd_tuned launch reads the rows in place (3C / 2 pairs apart); the head size must
    be one it is built for (``TUNED_DIMS``): with no padding a row's D floats are its own."""
    BT, C3 = qkv.shape
    C = C3 // 3
    if C3 % 3 or C % heads or C // heads not in TUNED_DIMS or BT % T or y.shape != (BT, C):
        raise ValueError(f"flash_in_place needs qkv (B*T, 3C), y (B*T, C) and a head size in "
                         f"{TUNED_DIMS}; got qkv {qkv.shape}, y {y.shape}, {heads} heads, T {T}")
    if any(X.dtype != np.float32 or not X.is_c_contiguous() for X in (qkv, y)) or (
            runtime.MODE == "gpu" and qkv.device_ctypes_pointer.value % 8):
        raise ValueError("flash_in_place reads qkv as pairs of floats: qkv and y must be "
                         "C-contiguous float32 device arrays, qkv 8-byte aligned")
    hs, B = C // heads, BT // T
    kernel = tuned_kernel(hs)
    flat = qkv.reshape(BT * C3).view(np.float64)    # pairs; q, k, v start 0, C/2, C in
    args = (flat, flat[C // 2:], flat[C:], y.reshape(B, T, C),
            reused_buffer("L", (B * heads, T)), float32(1.0 / math.sqrt(hs)), True, -1,
            heads, C3 // 2)
    _start(kernel, args, T, B * heads, kernel.shared_bytes, stream)


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


def _flash_wmma(Q, K, V, **options):
    """Tensor-core version (course/kernels/attention_wmma.py), imported on first use."""
    from .attention_wmma import flash_wmma

    return flash_wmma(Q, K, V, **options)


def _flash_mma(Q, K, V, **options):
    """Tensor cores, FA2 layout (course/kernels/attention_mma.py), imported on first use."""
    from .attention_mma import flash_mma

    return flash_mma(Q, K, V, **options)


if runtime.MODE == "gpu":   # the tensor-core versions link CUDA C++: real GPUs only
    VARIANTS["flash_wmma"] = _flash_wmma
    VARIANTS["flash_mma"] = _flash_mma
