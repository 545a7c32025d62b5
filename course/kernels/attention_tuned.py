"""Lesson 08 - flash_fwd tuned by counting instructions (notebook section 4b).

One build per head dim (32, 64, 128: ``tuned_kernel``), Q, K, V read as float32 pairs
(``as_pairs``), device buffers kept between calls of the same shape (``reused_buffer``).
The notebook prints this kernel's source rather than repeating it in a cell.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, float64, uint64

from ..measure.pairs import pack2, unpack2
from ..platform import runtime
from .attention_common import (
    D_MAX,
    FLASH_THREADS,
    LOG2E,
    NEG_INF,
    ROW_GROUPS,
    ROW_LANES,
    RPT,
    SPT,
    Bc,
    Br,
    visible,
)
from .matmul_tuned import load4

NOT_SHOWN = {"flash_fwd_tuned",   # the notebook prints its source (section 4b) instead
             "to_float32_padded"}

# At most 128 registers a thread, so 2 blocks of 256 threads fit on an SM (65,536 / 512);
# left alone the compiler takes more and one block runs per SM (20% slower on an H100).
# The simulator's cuda.jit has no such option.
_FEW_REGISTERS = {"max_registers": 128} if runtime.MODE == "gpu" else {}


def make_flash_tuned(D: int):
    """flash_fwd tuned by counting instructions (notebook section 4b), for head dim D.

    Same block (256 threads, Br = Bc = 64), same rows and columns per thread, same online
    softmax as flash_fwd.  What changed, each measured on an H100:
    - D is a constant when the kernel compiles (one kernel per D in 32, 64, 128): the inner
      loops run a known number of times, and ``while`` loops of 8 steps are unrolled by the
      compiler (numba's ``range`` loops with big bodies are not), so shared-memory addresses
      become constants added to one register;
    - every shared slot is a float64 holding two float32 values (course/measure/pairs.py): Q and K
      pairs along the head dim, V pairs along its columns, P pairs of rows;
    - Q, K, V are read from global memory as float32 pairs too (``as_pairs`` makes the
      float64 view, widening float16 first);
    - K and V get their own buffers, loaded together: 3 barriers a tile instead of 4;
    - scores are kept in log2 units (Q pre-scaled by log2 e), so each exponential is one exp2.
    Later, for lesson 11: ``heads`` and ``row_pairs`` say how the rows lie, so GPT-2's q, k, v
    are read where its qkv matmul left them (``attention.flash_in_place``); causal query
    blocks run longest first.
    """
    D2 = D // 2                     # pairs per row
    KP = D2 + 2                     # sK row length in pairs (+2: 16-byte rows, no conflicts)
    OPP = D2 // ROW_LANES           # output column pairs per thread
    RUN = 2 if OPP % 2 == 0 else 1  # output pairs a thread owns side by side (V loads)
    OPT2 = 2 * OPP                  # output columns per thread
    LR = FLASH_THREADS // D2        # tile rows one loader round covers
    X_Q = 0                         # offsets (float64 slots): sQ, sK, sV, sP
    X_K = X_Q + Br * D2             # sQ rows unpadded: a half warp reads one address
    X_V = X_K + Bc * KP
    X_P = X_V + Bc * D2
    SHARED = 8 * (X_P + (Br // 2) * Bc)

    @cuda.jit(**_FEW_REGISTERS)
    def flash_fwd_tuned(Qp, Kp, Vp, O, L, scale, causal, window, heads, row_pairs):
        # Qp, Kp, Vp: flat float64 views of float32 rows of D, row_pairs pairs apart, batch
        # b's rows one after another, head h's D starting h D2 pairs in: (batch*heads, N, D)
        # arrays (as_pairs; heads 1, row_pairs D2), or GPT-2's q, k, v read in place
        # (flash_in_place).  O (batch, N, heads * d); L (batch*heads, N).
        # Thread t: tr = t // 16, tc = t % 16.  It owns rows tr + 16a (a < RPT), score
        # columns tc + 16b (b < SPT) and output columns 2 (tc + 16c) + 0/1 (c < OPP).
        # Shared (float64 slots, two floats each), in sm:
        #   sQ[r, k2]  = (Q[r, 2 k2], Q[r, 2 k2 + 1]) * scale * log2 e   at X_Q + r D2 + k2
        #   sK[r, k2]  = (K[r, 2 k2], K[r, 2 k2 + 1])                    at X_K + r KP + k2
        #   sV[j, c2]  = (V[j, 2 c2], V[j, 2 c2 + 1])                    at X_V + j D2 + c2
        #   sP[g, col] = (P[tr + 32 g', col], P[tr + 32 g' + 16, col])   at X_P + g Bc + col
        #                with g = 16 g' + tr
        sm = cuda.shared.array(0, float64)
        s = cuda.local.array((RPT, SPT), float32)
        acc = cuda.local.array((RPT, OPT2), float32)
        m = cuda.local.array(RPT, float32)
        l = cuda.local.array(RPT, float32)
        q = cuda.local.array((RPT, 4), float32)
        p = cuda.local.array((RPT, 2), float32)
        t = cuda.threadIdx.x
        tr, tc = t // ROW_LANES, t % ROW_LANES
        bh, qb = cuda.blockIdx.y, cuda.blockIdx.x
        if causal:                          # the longest rows first: a short block ends
            qb = cuda.gridDim.x - 1 - qb    # the launch, not a long one started late
        q0, batch, head = qb * Br, bh // heads, bh % heads
        n, d = O.shape[1], O.shape[2] // heads
        lr, lk = t // D2, t % D2            # loader: tile rows lr + LR i, pair column lk
        qs = scale * float32(LOG2E)
        src = uint64((batch * n + q0 + lr) * row_pairs + head * D2 + lk)
        nrem = n - q0 - lr                  # rows left below this thread's first row
        i = 0
        while i < Br // LR:                 # a while loop of constant length: unrolled
            x0 = x1 = float32(0.0)
            if LR * i < nrem:
                x0, x1 = unpack2(Qp[src + uint64(i * LR * row_pairs)])
            sm[uint64(X_Q + (lr + LR * i) * D2 + lk)] = pack2(x0 * qs, x1 * qs)
            i += 1
        for a in range(RPT):
            m[a] = NEG_INF
            l[a] = float32(0.0)
            for c in range(OPT2):
                acc[a, c] = float32(0.0)
        lo, hi = 0, n                       # key tiles that can hold a visible key
        if causal:
            hi = min(n, q0 + Br)
        if window >= 0:
            lo = max(0, q0 - window) // Bc * Bc
        for j0 in range(lo, hi, Bc):
            cuda.syncthreads()              # the last tile's P V is done with sV and sP
            src = uint64((batch * n + j0 + lr) * row_pairs + head * D2 + lk)
            nrem = n - j0 - lr
            i = 0
            while i < Bc // LR:             # K and V tiles together (zeros past the end)
                ok = LR * i < nrem
                at = src + uint64(i * LR * row_pairs)
                sm[uint64(X_K + (lr + LR * i) * KP + lk)] = Kp[at] if ok else float64(0.0)
                sm[uint64(X_V + (lr + LR * i) * D2 + lk)] = Vp[at] if ok else float64(0.0)
                i += 1
            cuda.syncthreads()              # K and V tiles loaded before anyone reads them
            for a in range(RPT):
                for b in range(SPT):
                    s[a, b] = float32(0.0)
            for k8 in range(D2 // 8):       # S = Q K^T, 8 pairs (16 k) per unrolled step
                u = 0
                while u < 8:                # 2 pairs (4 k) per 16-byte load
                    k2 = k8 * 8 + u
                    for a in range(RPT):
                        q[a, 0], q[a, 1], q[a, 2], q[a, 3] = load4(
                            sm, uint64(X_Q + (tr + ROW_GROUPS * a) * D2 + k2))
                    for b in range(SPT):
                        k0, k1, k2_, k3 = load4(sm, uint64(X_K + (tc + ROW_LANES * b) * KP + k2))
                        for a in range(RPT):
                            s[a, b] += q[a, 0] * k0
                            s[a, b] += q[a, 1] * k1
                            s[a, b] += q[a, 2] * k2_
                            s[a, b] += q[a, 3] * k3
                    u += 2
            full = (j0 + Bc <= n and q0 + Br <= n and (not causal or j0 + Bc <= q0 + 1)
                    and (window < 0 or q0 + Br - 1 - j0 <= window))
            if not full:                    # a tile at the edge or on the diagonal: mask
                for a in range(RPT):
                    for b in range(SPT):
                        if not visible(q0 + tr + ROW_GROUPS * a, j0 + tc + ROW_LANES * b,
                                       n, causal, window):
                            s[a, b] = NEG_INF
            mx = cuda.local.array(RPT, float32)
            for a in range(RPT):            # online softmax, as in flash_fwd (log2 units)
                mx[a] = NEG_INF
                for b in range(SPT):
                    mx[a] = max(mx[a], s[a, b])
            for off in range(4):
                for a in range(RPT):
                    mx[a] = max(mx[a], cuda.shfl_xor_sync(0xFFFFFFFF, mx[a], 8 >> off))
            for a in range(RPT):
                m_new = max(m[a], mx[a])
                m_use = m_new if m_new > NEG_INF else float32(0.0)
                mx[a] = math.exp2(m[a] - m_use)  # alpha
                m[a] = m_new
                for b in range(SPT):
                    s[a, b] = math.exp2(s[a, b] - m_use)
            for g in range(RPT // 2):       # P of rows (tr + 32 g, tr + 32 g + 16), paired
                for b in range(SPT):
                    sm[uint64(X_P + (ROW_GROUPS * g + tr) * Bc + tc + ROW_LANES * b)] = pack2(
                        s[2 * g, b], s[2 * g + 1, b])
            for a in range(RPT):
                ps = float32(0.0)
                for b in range(SPT):
                    ps += s[a, b]
                for off in range(4):
                    ps += cuda.shfl_xor_sync(0xFFFFFFFF, ps, 8 >> off)
                l[a] = l[a] * mx[a] + ps
                for c in range(OPT2):
                    acc[a, c] *= mx[a]
            cuda.syncthreads()              # P ready
            for j8 in range(Bc // 8):       # O += P V, 8 keys per unrolled step
                u = 0
                while u < 8:                # keys j, j + 1: P of 2 rows x 2 keys per load
                    j = j8 * 8 + u
                    for g in range(RPT // 2):
                        p[2 * g, 0], p[2 * g + 1, 0], p[2 * g, 1], p[2 * g + 1, 1] = load4(
                            sm, uint64(X_P + (ROW_GROUPS * g + tr) * Bc + j))
                    for e in range(2):
                        vrow = X_V + (j + e) * D2
                        for c in range(OPP // RUN):
                            if RUN == 2:    # 4 columns side by side: one 16-byte load
                                v0, v1, v2, v3 = load4(sm, uint64(vrow + 2 * tc + 32 * c))
                                for a in range(RPT):
                                    acc[a, 4 * c] += p[a, e] * v0
                                    acc[a, 4 * c + 1] += p[a, e] * v1
                                    acc[a, 4 * c + 2] += p[a, e] * v2
                                    acc[a, 4 * c + 3] += p[a, e] * v3
                            else:           # D = 32: one pair a thread
                                v0, v1 = unpack2(sm[uint64(vrow + tc + ROW_LANES * c)])
                                for a in range(RPT):
                                    acc[a, 2 * c] += p[a, e] * v0
                                    acc[a, 2 * c + 1] += p[a, e] * v1
                    u += 2
        for a in range(RPT):                # O = acc / l, written once
            i = q0 + tr + ROW_GROUPS * a
            if i < n:
                inv = float32(1.0) / l[a] if l[a] > 0 else float32(0.0)
                for c in range(OPT2):
                    col = 2 * RUN * (tc + ROW_LANES * (c // (2 * RUN))) + c % (2 * RUN)
                    if col < d:
                        O[batch, i, head * d + col] = acc[a, c] * inv
                if tc == 0:                 # natural-log log-sum-exp: m ln 2 + ln l
                    L[bh, i] = m[a] / float32(LOG2E) + math.log(l[a]) if l[a] > 0 else NEG_INF

    flash_fwd_tuned.head_dim = D
    flash_fwd_tuned.shared_bytes = SHARED
    return flash_fwd_tuned


TUNED_DIMS = (32, 64, 128)                  # head dims the tuned kernel is built for
flash_fwd_tuned = make_flash_tuned(D_MAX)   # the D = 128 build (the benchmark's)
_TUNED = {D_MAX: flash_fwd_tuned}


def tuned_kernel(d: int):
    """The flash_fwd_tuned build for head dim d (padded up to 32, 64 or 128)."""
    D = next((D for D in TUNED_DIMS if d <= D), None)
    if D is None:
        raise ValueError(f"head dim {d} > {D_MAX}")
    if D not in _TUNED:
        _TUNED[D] = make_flash_tuned(D)
    return _TUNED[D]


@cuda.jit
def to_float32_padded(src, dst):
    # dst[r, c] = float32(src[r, c]) for c < d, 0 for d <= c < D; one thread per dst element
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    D, d = dst.shape[1], src.shape[1]
    if e < dst.shape[0] * D:
        r, c = e // D, e % D
        dst[r, c] = float32(src[r, c]) if c < d else float32(0.0)


_REUSED = {}   # key -> a float32 device buffer kept for the next call of the same shape


def reused_buffer(key, shape):
    """A float32 device array of ``shape`` kept under ``key`` and handed out again while the
    shape stays the same: allocating and freeing per call cost up to 1 ms on an H100 (a free
    waits for the GPU).  Safe because every launch here goes to the default stream, in order."""
    buf = _REUSED.get(key)
    if buf is None or buf.shape != shape:
        buf = _REUSED[key] = cuda.device_array(shape, np.float32)
    return buf


def reused_buffers() -> tuple:
    """The buffers :func:`reused_buffer` holds now (a CUDA graph that used them keeps them)."""
    return tuple(_REUSED.values())


def as_pairs(X, D: int, slot: int = 0, stream=0):
    """Flat float64 view of ``X`` (device, (bh, N, d)) as float32 (bh, N, D): pairs of floats.

    A float32 array with d == D is only viewed; otherwise (float16, or d < D) it is first
    widened into a zero-padded float32 buffer (one pass over memory), one ``reused_buffer``
    per ``slot``, by a launch on ``stream``.
    """
    bh, n, d = X.shape
    if X.dtype == np.float32 and d == D:
        Y = X.reshape(bh * n * D)
    else:
        Y = reused_buffer(("pairs", slot), (bh * n * D,))
        threads = 256
        to_float32_padded[math.ceil(bh * n * D / threads), threads, stream](
            X.reshape(bh * n, d), Y.reshape(bh * n, D))
    return Y.view(np.float64)


PTX_SIGNATURES = {
    "flash_fwd_tuned": "void(float64[::1], float64[::1], float64[::1], float32[:, :, ::1], "
                       "float32[:, ::1], float32, boolean, int64, int64, int64)",
    "to_float32_padded": "void(float16[:, ::1], float32[:, ::1])",
}
