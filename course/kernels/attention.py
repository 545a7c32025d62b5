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
from numba import cuda, float32, float64, uint64

from .. import runtime
from ..pairs import pack2, unpack2

NOTEBOOKS = ["08_flash_attention"]
NOT_SHOWN = {"flash_fwd_tuned",   # the notebook prints its source (section 4b) instead
             "to_float32_padded"}

TILE = 16          # naive version: 16 x 16 tiles of the two matrix products (lesson 04)
SOFTMAX_TPB = 128 if runtime.MODE == "gpu" else 32  # naive softmax: threads per row (block)
Br = 64            # flash: query rows per block
Bc = 64            # flash: key/value rows per shared-memory tile
D_MAX = 128        # largest head dimension the register/shared arrays hold
D_PAD = D_MAX + 1  # flash: padded shared row length (no bank conflicts across rows)
P_PAD = Bc + 1     # flash: padded row length of the probability tile sP
FLASH_THREADS = 256                       # flash: threads per block (GPU sweep: 256 > 128)
ROW_LANES = 16                            # threads sharing a row (half a warp)
ROW_GROUPS = FLASH_THREADS // ROW_LANES   # 16 row groups
RPT = Br // ROW_GROUPS                    # query rows per thread (4)
SPT = Bc // ROW_LANES                     # score columns per thread (4)
OPT = D_MAX // ROW_LANES                  # output columns per thread (8)
SQ_AT, SKV_AT, SP_AT = 0, Br * D_PAD, (Br + Bc) * D_PAD   # offsets into the shared buffer
FLASH_SHARED = 4 * ((Br + Bc) * D_PAD + Br * P_PAD)       # bytes of dynamic shared memory
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


# At most 128 registers a thread, so 2 blocks of 256 threads fit on an SM (65,536 / 512);
# left alone the compiler takes more and one block runs per SM (20% slower on an H100).
# The simulator's cuda.jit has no such option.
_FEW_REGISTERS = {"max_registers": 128} if runtime.MODE == "gpu" else {}
LOG2E = 1.4426950408889634   # exp(x) = exp2(x * log2(e)): scores kept in log2 units


def make_flash_tuned(D: int):
    """flash_fwd tuned by counting instructions (notebook section 4b), for head dim D.

    Same block (256 threads, Br = Bc = 64), same rows and columns per thread, same online
    softmax as flash_fwd.  What changed, each measured on an H100:
    - D is a constant when the kernel compiles (one kernel per D in 32, 64, 128): the inner
      loops run a known number of times, and ``while`` loops of 8 steps are unrolled by the
      compiler (numba's ``range`` loops with big bodies are not), so shared-memory addresses
      become constants added to one register;
    - every shared slot is a float64 holding two float32 values (course/pairs.py): Q and K
      pairs along the head dim, V pairs along its columns, P pairs of rows;
    - Q, K, V are read from global memory as float32 pairs too (``as_pairs`` makes the
      float64 view, widening float16 first);
    - K and V get their own buffers, loaded together: 3 barriers a tile instead of 4;
    - scores are kept in log2 units (Q pre-scaled by log2 e), so each exponential is one exp2.
    """
    D2 = D // 2                     # pairs per row
    KP = D2 + 1                     # sK row length in pairs (+1: no bank conflicts)
    OPP = D2 // ROW_LANES           # output column pairs per thread
    OPT2 = 2 * OPP                  # output columns per thread
    LR = FLASH_THREADS // D2        # tile rows one loader round covers
    X_Q = 0                         # offsets (float64 slots): sQ, sK, sV, sP
    X_K = X_Q + Br * D2             # sQ rows unpadded: a half warp reads one address
    X_V = X_K + Bc * KP
    X_P = X_V + Bc * D2
    SHARED = 8 * (X_P + (Br // 2) * Bc)

    @cuda.jit(**_FEW_REGISTERS)
    def flash_fwd_tuned(Qp, Kp, Vp, O, L, scale, causal, window):
        # Qp, Kp, Vp: flat float64 views of float32 (batch*heads, N, D) arrays (as_pairs).
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
        qa = cuda.local.array(RPT, float32)
        qb = cuda.local.array(RPT, float32)
        p = cuda.local.array(RPT, float32)
        t = cuda.threadIdx.x
        tr, tc = t // ROW_LANES, t % ROW_LANES
        bh, q0 = cuda.blockIdx.y, cuda.blockIdx.x * Br
        n, d = O.shape[1], O.shape[2]
        lr, lk = t // D2, t % D2            # loader: tile rows lr + LR i, pair column lk
        qs = scale * float32(LOG2E)
        src = uint64((bh * n + q0 + lr) * D2 + lk)
        nrem = n - q0 - lr                  # rows left below this thread's first row
        i = 0
        while i < Br // LR:                 # a while loop of constant length: unrolled
            x0 = x1 = float32(0.0)
            if LR * i < nrem:
                x0, x1 = unpack2(Qp[src + uint64(i * LR * D2)])
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
            src = uint64((bh * n + j0 + lr) * D2 + lk)
            nrem = n - j0 - lr
            i = 0
            while i < Bc // LR:             # K and V tiles together (zeros past the end)
                ok = LR * i < nrem
                at = src + uint64(i * LR * D2)
                sm[uint64(X_K + (lr + LR * i) * KP + lk)] = Kp[at] if ok else float64(0.0)
                sm[uint64(X_V + (lr + LR * i) * D2 + lk)] = Vp[at] if ok else float64(0.0)
                i += 1
            cuda.syncthreads()              # K and V tiles loaded before anyone reads them
            for a in range(RPT):
                for b in range(SPT):
                    s[a, b] = float32(0.0)
            for k8 in range(D2 // 8):       # S = Q K^T, 8 pairs (16 k) per unrolled step
                u = 0
                while u < 8:
                    k2 = k8 * 8 + u
                    for a in range(RPT):
                        qa[a], qb[a] = unpack2(sm[uint64(X_Q + (tr + ROW_GROUPS * a) * D2 + k2)])
                    for b in range(SPT):
                        ka, kb = unpack2(sm[uint64(X_K + (tc + ROW_LANES * b) * KP + k2)])
                        for a in range(RPT):
                            s[a, b] += qa[a] * ka
                            s[a, b] += qb[a] * kb
                    u += 1
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
                while u < 8:
                    j = j8 * 8 + u
                    for g in range(RPT // 2):
                        p[2 * g], p[2 * g + 1] = unpack2(
                            sm[uint64(X_P + (ROW_GROUPS * g + tr) * Bc + j)])
                    for c in range(OPP):
                        v0, v1 = unpack2(sm[uint64(X_V + j * D2 + tc + ROW_LANES * c)])
                        for a in range(RPT):
                            acc[a, 2 * c] += p[a] * v0
                            acc[a, 2 * c + 1] += p[a] * v1
                    u += 1
        for a in range(RPT):                # O = acc / l, written once
            i = q0 + tr + ROW_GROUPS * a
            if i < n:
                inv = float32(1.0) / l[a] if l[a] > 0 else float32(0.0)
                for c in range(OPT2):
                    col = 2 * (tc + ROW_LANES * (c // 2)) + c % 2
                    if col < d:
                        O[bh, i, col] = acc[a, c] * inv
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


def as_pairs(X, D: int, slot: int = 0):
    """Flat float64 view of ``X`` (device, (bh, N, d)) as float32 (bh, N, D): pairs of floats.

    A float32 array with d == D is only viewed; otherwise (float16, or d < D) it is first
    widened into a zero-padded float32 buffer (one pass over memory), one ``reused_buffer``
    per ``slot``.
    """
    bh, n, d = X.shape
    if X.dtype == np.float32 and d == D:
        Y = X.reshape(bh * n * D)
    else:
        Y = reused_buffer(("pairs", slot), (bh * n * D,))
        threads = 256
        to_float32_padded[math.ceil(bh * n * D / threads), threads](
            X.reshape(bh * n, d), Y.reshape(bh * n, D))
    return Y.view(np.float64)


_ARR3 = "float32[:, :, ::1]"
PTX_SIGNATURES = {
    "attn_scores": f"void({_ARR3}, {_ARR3}, {_ARR3}, float32, boolean, int64)",
    "softmax_rows_inplace": f"void({_ARR3})",
    "attn_pv": f"void({_ARR3}, {_ARR3}, {_ARR3})",
    "attn_row_per_thread": f"void({_ARR3}, {_ARR3}, {_ARR3}, {_ARR3}, float32, boolean, int64)",
    "flash_fwd": f"void({_ARR3}, {_ARR3}, {_ARR3}, {_ARR3}, float32[:, ::1], float32, "
                 "boolean, int64)",
    "flash_fwd_tuned": "void(float64[::1], float64[::1], float64[::1], float32[:, :, ::1], "
                       "float32[:, ::1], float32, boolean, int64)",
    "to_float32_padded": "void(float16[:, ::1], float32[:, ::1])",
}


# ---------------------------------------------------------------------------------------
# host side: launches on device arrays, numpy wrappers (VARIANTS), reference, counting

def launch(variant: str, Q, K, V, O, *, causal: bool = False, window: int = -1,
           scratch=None, heads_per_launch: int | None = None):
    """Launch ``variant`` on device arrays shaped (batch*heads, N, d); writes O (float32).

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
        flash_launch(kernel, Q, K, V, O, L, scale, causal, window)
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")


def flash_launch(kernel, Q, K, V, O, L, scale, causal, window):
    """Launch flash_fwd or a flash_fwd_tuned build with the dynamic shared memory it needs
    (> 48 KB); the tuned builds get Q, K, V as float32 pairs (``as_pairs``)."""
    bh, n, _ = Q.shape
    shared = getattr(kernel, "shared_bytes", FLASH_SHARED)
    if hasattr(kernel, "head_dim"):
        Q, K, V = (as_pairs(X, kernel.head_dim, slot) for slot, X in enumerate((Q, K, V)))
    args = (Q, K, V, O, L, float32(scale), bool(causal), int(window))
    allow_big_shared(kernel, args, shared)
    kernel[(math.ceil(n / Br), bh), FLASH_THREADS, 0, shared](*args)


_OPTED_IN = set()


def allow_big_shared(kernel, args, nbytes: int) -> None:
    """Let ``kernel`` (compiled for ``args``) use ``nbytes`` > 48 KB of dynamic shared memory.

    numba-cuda has no public API for the opt-in, so this sets the driver attribute
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES on the compiled kernel's handle.
    """
    if runtime.MODE != "gpu" or nbytes <= 48 * 1024:
        return
    sig = tuple(kernel.typeof_pyval(a) for a in args)
    if (id(kernel), sig, nbytes) in _OPTED_IN:
        return
    from cuda.bindings import driver as cu

    fn = kernel.compile(sig)._codelibrary.get_cufunc()
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    err = cu.cuKernelSetAttribute(attr, nbytes, fn.handle, fn.device.id)[0]
    if err != cu.CUresult.CUDA_SUCCESS:          # older drivers: a plain CUfunction handle
        err = cu.cuFuncSetAttribute(fn.handle, attr, nbytes)[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"could not allow {nbytes} B of shared memory: {err}")
    _OPTED_IN.add((id(kernel), sig, nbytes))


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


def pairs(n: int, causal: bool = False, window=None) -> int:
    """(query, key) pairs inside the mask: N^2; N (N + 1) / 2 causal; with a window W
    (key i - W .. i), sum over queries of min(i, W) + 1."""
    if window is not None:
        w = min(int(window), n - 1)
        return w * (w + 1) // 2 + (n - w) * (w + 1)
    return n * (n + 1) // 2 if causal else n * n


def flops(b: int, h: int, n: int, d: int, causal: bool = False, window=None) -> float:
    """4 d FLOPs (a multiply and an add in Q K^T and in P V) per (query, key) pair inside
    the mask, for B H heads: only the work that counts, never the masked-out pairs."""
    return 4.0 * b * h * pairs(n, causal, window) * d


def traffic_bytes(b: int, h: int, n: int, d: int, itemsize: int = 4) -> dict:
    """Global-memory bytes each version must move at least (each array read/written once).

    three kernels: read Q, K; write S; read S, write P (in place); read P, V; write O.
    flash: read Q, K, V once and write O once (plus one float32 log-sum-exp per row).
    """
    qkvo = b * h * n * d * itemsize
    scores = b * h * n * n * 4
    return {"three_kernels": 4 * qkvo + 4 * scores, "flash": 4 * qkvo + b * h * n * 4,
            "score_matrix": scores}

def _flash_wmma(Q, K, V, **options):
    """Tensor-core version (course/kernels/attention_wmma.py), imported on first use."""
    from .attention_wmma import flash_wmma

    return flash_wmma(Q, K, V, **options)


if runtime.MODE == "gpu":   # the tensor-core version links CUDA C++: real GPUs only
    VARIANTS["flash_wmma"] = _flash_wmma
