"""Lesson 08, GPU only - flash attention whose two matrix products run on tensor cores.

numba has no tensor-core API (its kernels compile through NVVM from Python, and nothing
exposes the warp-wide ``mma`` instructions), so the two products S = Q K^T and O += P V
are two small CUDA C++ device functions using ``nvcuda::wmma``, compiled by NVRTC and
linked into the numba kernel with ``cuda.declare_device(..., link=cuda.CUSource(src))``.
The online softmax, the masks and the bookkeeping stay in Python.  The simulator cannot
link C++, so this module's kernel is in ``GPU_ONLY_LINKED`` and the notebook only shows it.

Layout: one block = 2 warps owns WBr = 32 query rows (warp w: rows 16w .. 16w+15); K/V
tiles of WBc = 32 rows.  Shared memory (41.5 KB): sQ, sKV (float16), sS (float32 scores),
sP (float16 probabilities), sO (float32 output accumulator).  float16 inputs, d a multiple
of 16 and <= 128.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, types

from .. import runtime
from .attention import D_MAX, NEG_INF, validate, visible

NOTEBOOKS = ["08_flash_attention"]
NOT_SHOWN = {"flash_wmma_fwd"}          # the notebook prints its source instead
GPU_ONLY_LINKED = {"flash_wmma_fwd"}    # needs linked C++: no PTX signature, no simulator

WBr = 32                 # query rows per block (2 warps x 16)
WBc = 32                 # key/value rows per tile
WTHREADS = 64
LDH = D_MAX + 8          # row length of the float16 tiles (multiple of 8, staggers banks)
LDS = WBc + 4            # row length of sS (float32, multiple of 4)
LDP = WBc + 8            # row length of sP (float16)
LDO = D_MAX + 4          # row length of sO (float32)

WMMA_SOURCE = f"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
#define LDH {LDH}
#define LDS {LDS}
#define LDP {LDP}
#define LDO {LDO}

// One warp: S[row0:row0+16, 0:bc] = Q[row0:row0+16, 0:d] K[0:bc, 0:d]^T   (all in shared)
extern "C" __device__ void wmma_qk(const __half* q, const __half* k, float* s,
                                   int row0, int d, int bc) {{
  for (int n = 0; n < bc; n += 16) {{
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < d; kk += 16) {{
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
      wmma::load_matrix_sync(a, q + row0 * LDH + kk, LDH);
      wmma::load_matrix_sync(b, k + n * LDH + kk, LDH);   // K row-major = K^T col-major
      wmma::mma_sync(acc, a, b, acc);
    }}
    wmma::store_matrix_sync(s + row0 * LDS + n, acc, LDS, wmma::mem_row_major);
  }}
}}

// One warp: O[row0:row0+16, 0:d] += P[row0:row0+16, 0:bc] V[0:bc, 0:d]   (all in shared)
extern "C" __device__ void wmma_pv(const __half* p, const __half* v, float* o,
                                   int row0, int d, int bc) {{
  for (int n = 0; n < d; n += 16) {{
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, o + row0 * LDO + n, LDO, wmma::mem_row_major);
    for (int kk = 0; kk < bc; kk += 16) {{
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
      wmma::load_matrix_sync(a, p + row0 * LDP + kk, LDP);
      wmma::load_matrix_sync(b, v + kk * LDH + n, LDH);
      wmma::mma_sync(acc, a, b, acc);
    }}
    wmma::store_matrix_sync(o + row0 * LDO + n, acc, LDO, wmma::mem_row_major);
  }}
}}
"""

float16 = types.float16                 # (numba.cuda.float16 exists on a GPU only)

if runtime.MODE == "gpu":
    from numba.cuda.extending import intrinsic

    @intrinsic
    def address_of(typingctx, arr):
        """The data pointer of an array (shared memory included), for the C++ functions."""
        def codegen(context, builder, signature, args):
            return context.make_array(signature.args[0])(context, builder, args[0]).data
        return types.CPointer(arr.dtype)(arr), codegen

    _src = cuda.CUSource(WMMA_SOURCE)
    _PTRS = "CPointer(float16), CPointer(float16), CPointer(float32), int32, int32, int32"
    wmma_qk = cuda.declare_device("wmma_qk", f"void({_PTRS})", link=_src, abi="c")
    wmma_pv = cuda.declare_device("wmma_pv", f"void({_PTRS})", link=_src, abi="c")


@cuda.jit
def flash_wmma_fwd(Q, K, V, O, scale, causal, window):
    # Block (bx, bh) owns query rows q0 .. q0+WBr-1 of head bh; warp w owns 16 of them.
    # Thread t: lanes 2r', 2r'+1 of warp w run the online softmax of row 16w + r'; for the
    # rescale and the final write, thread t owns half of row t // 2.
    sQ = cuda.shared.array((WBr, LDH), float16, alignment=128)
    sKV = cuda.shared.array((WBc, LDH), float16, alignment=128)
    sS = cuda.shared.array((WBr, LDS), float32, alignment=128)
    sP = cuda.shared.array((WBr, LDP), float16, alignment=128)
    sO = cuda.shared.array((WBr, LDO), float32, alignment=128)
    sM = cuda.shared.array(WBr, float32)
    sL = cuda.shared.array(WBr, float32)
    sAlpha = cuda.shared.array(WBr, float32)
    t = cuda.threadIdx.x
    w, lane = t // 32, t % 32
    bh, q0 = cuda.blockIdx.y, cuda.blockIdx.x * WBr
    n, d = Q.shape[1], Q.shape[2]
    half_d = d // 2
    r2, c2 = t // 2, (t % 2) * (d // 2)      # my half row for rescale / write
    for r in range(t // 16, WBr, WTHREADS // 16):     # thread t: row t // 16 (+4, ...)
        for c in range(t % 16, d, 16):
            sQ[r, c] = Q[bh, min(q0 + r, n - 1), c]     # rows past n: any finite value
    for c in range(c2, c2 + half_d):
        sO[r2, c] = float32(0.0)
    if t < WBr:
        sM[t] = NEG_INF
        sL[t] = float32(0.0)
    lo, hi = 0, n
    if causal:
        hi = min(n, q0 + WBr)
    if window >= 0:
        lo = max(0, q0 - window) // WBc * WBc
    for j0 in range(lo, hi, WBc):
        cuda.syncthreads()
        for r in range(t // 16, WBc, WTHREADS // 16):
            for c in range(t % 16, d, 16):
                sKV[r, c] = K[bh, min(j0 + r, n - 1), c]  # rows past n are masked
        cuda.syncthreads()
        wmma_qk(address_of(sQ), address_of(sKV), address_of(sS), 16 * w, d, WBc)
        cuda.syncthreads()
        r = 16 * w + lane // 2                    # online softmax of row 16w + lane // 2:
        c0 = (lane % 2) * (WBc // 2)              # 2 lanes per row, WBc / 2 columns each
        m_old = sM[r]
        mx = NEG_INF
        for c in range(c0, c0 + WBc // 2):
            s = sS[r, c] * scale
            ok = q0 + r < n and visible(q0 + r, j0 + c, n, causal, window)
            s = s if ok else NEG_INF
            sS[r, c] = s
            mx = max(mx, s)
        m_new = max(m_old, max(mx, cuda.shfl_xor_sync(0xFFFFFFFF, mx, 1)))
        m_use = m_new if m_new > NEG_INF else float32(0.0)   # no visible key yet: p = 0
        ps = float32(0.0)
        for c in range(c0, c0 + WBc // 2):
            p = math.exp(sS[r, c] - m_use)
            sP[r, c] = p
            ps += p
        ps += cuda.shfl_xor_sync(0xFFFFFFFF, ps, 1)
        alpha = math.exp(m_old - m_use)
        cuda.syncwarp()                           # both lanes of a row read sM before it changes
        if lane % 2 == 0:
            sM[r] = m_new
            sL[r] = sL[r] * alpha + ps
            sAlpha[r] = alpha
        for r in range(t // 16, WBc, WTHREADS // 16):
            for c in range(t % 16, d, 16):
                sKV[r, c] = V[bh, min(j0 + r, n - 1), c]  # finite; their P is 0
        cuda.syncthreads()
        al = sAlpha[r2]
        for c in range(c2, c2 + half_d):
            sO[r2, c] *= al
        cuda.syncthreads()
        wmma_pv(address_of(sP), address_of(sKV), address_of(sO), 16 * w, d, WBc)
    cuda.syncthreads()
    if q0 + r2 < n:
        l = sL[r2]
        inv = float32(1.0) / l if l > 0 else float32(0.0)
        for c in range(c2, c2 + half_d):
            O[bh, q0 + r2, c] = sO[r2, c] * inv


def launch(Q, K, V, O, *, causal: bool = False, window=None):
    """Launch on float16 device arrays (batch*heads, N, d); O float32."""
    bh, n, d = Q.shape
    window = -1 if window is None else int(window)
    flash_wmma_fwd[(math.ceil(n / WBr), bh), WTHREADS](
        Q, K, V, O, float32(1.0 / math.sqrt(d)), bool(causal or window >= 0), window)


def flash_wmma(Q, K, V, causal: bool = False, window=None):
    """Attention O for (batch, heads, N, d) float16 Q, K, V with tensor cores (GPU only)."""
    if runtime.MODE != "gpu":
        raise RuntimeError("flash_wmma links CUDA C++ (tensor cores): it needs a real GPU; "
                           "the simulator cannot run it")
    (q, k, v), shape = validate(Q, K, V)
    if q.dtype != np.float16 or shape[3] % 16:
        raise ValueError(f"flash_wmma needs float16 inputs and d a multiple of 16; got "
                         f"{q.dtype}, d = {shape[3]}")
    if window is not None and int(window) < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    d_o = cuda.device_array(q.shape, dtype=np.float32)
    launch(cuda.to_device(q), cuda.to_device(k), cuda.to_device(v), d_o,
           causal=causal, window=window)
    return d_o.copy_to_host().reshape(shape).astype(np.float16)


_H3 = "float16[:, :, ::1]"
# PTX of the Python side only (the C++ functions stay external until the GPU links them).
PTX_SIGNATURES = {"flash_wmma_fwd": f"void({_H3}, {_H3}, {_H3}, float32[:, :, ::1], float32, "
                                    "boolean, int64)"}
