"""Lesson 08, GPU only - flash attention whose two matrix products run on tensor cores.

numba has no tensor-core API (its kernels compile through NVVM from Python, and nothing
exposes the warp-wide ``mma`` instructions), so the two products S = Q K^T and O += P V
are two small CUDA C++ device functions using ``nvcuda::wmma``, compiled by NVRTC and
linked into the numba kernel with ``cuda.declare_device(..., link=cuda.CUSource(src))``.
The online softmax, the masks and the bookkeeping stay in Python.  The simulator cannot
link C++, so this module's kernel is in ``GPU_ONLY_LINKED`` and the notebook only shows it.

Layout: one block = 4 warps owns WBr = 64 query rows (warp w: rows 16w .. 16w+15) and walks
K/V in tiles of WBc = 64 rows.  Shared memory (110 KB): sQ, sK, sV (float16, held as float32
words of two halves), sS (float32 scores, held as float64 pairs), sP (float16
probabilities), sO (float32 output accumulator).  Rows of sS, sP and sO are touched by their
own warp only, so inside a tile only ``syncwarp`` is needed; the block meets twice a tile,
around the K/V loads.  float16 inputs, d in 16, 32, 64, 128.
"""
from __future__ import annotations

import math

from numba import cuda, float32, float64, types, uint64

from ..measure.pairs import unpack2
from ..platform import runtime
from .attention_common import LOG2E, NEG_INF, half_word_args, on_tensor_cores, visible

NOT_SHOWN = {"flash_wmma_fwd"}          # the notebook prints its source instead
GPU_ONLY_LINKED = {"flash_wmma_fwd"}    # needs linked C++: no PTX signature, no simulator

WBr = 64                 # query rows per block (4 warps x 16)
WBc = 64                 # key/value rows per tile
WTHREADS = 128
WD_MAX = 128             # largest head dim
HEAD_DIMS = (16, 32, 64, 128)   # d / 2 must divide WTHREADS (the tile loaders)
LDH = WD_MAX + 8         # halves per row of sQ, sK, sV (multiple of 8, staggers banks)
LDH2 = LDH // 2          # the same rows in float32 words (two halves each)
LDS = WBc + 4            # floats per row of sS (multiple of 4)
LDS2 = LDS // 2          # the same rows in float64 pairs
LDP = WBc + 8            # halves per row of sP
LDO = WD_MAX + 4         # floats per row of sO
# static shared memory 112,640 B (sQ, sK, sV, sS, sP, sO below): two blocks per SM

WMMA_SOURCE = f"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
#define LDH {LDH}
#define LDS {LDS}
#define LDP {LDP}
#define LDO {LDO}
#define BC {WBc}

// One warp: S[row0:row0+16, 0:BC] = Q[row0:row0+16, 0:d] K[0:BC, 0:d]^T   (all in shared)
extern "C" __device__ void wmma_qk(const float* q_words, const float* k_words, double* s_pairs,
                                   int row0, int d) {{
  const __half* q = reinterpret_cast<const __half*>(q_words);
  const __half* k = reinterpret_cast<const __half*>(k_words);
  float* s = reinterpret_cast<float*>(s_pairs);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[BC / 16];   // in registers
  #pragma unroll
  for (int n = 0; n < BC / 16; n++) wmma::fill_fragment(acc[n], 0.0f);
  for (int kk = 0; kk < d; kk += 16) {{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::load_matrix_sync(a, q + row0 * LDH + kk, LDH);
    #pragma unroll
    for (int n = 0; n < BC / 16; n++) {{
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
      wmma::load_matrix_sync(b, k + n * 16 * LDH + kk, LDH);   // K row-major = K^T col-major
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }}
  }}
  #pragma unroll
  for (int n = 0; n < BC / 16; n++)
    wmma::store_matrix_sync(s + row0 * LDS + n * 16, acc[n], LDS, wmma::mem_row_major);
}}

// One warp: O[row0:row0+16, 0:d] += P[row0:row0+16, 0:BC] V[0:BC, 0:d]   (all in shared)
extern "C" __device__ void wmma_pv(const __half* p, const float* v_words, float* o,
                                   int row0, int d) {{
  const __half* v = reinterpret_cast<const __half*>(v_words);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[BC / 16];
  #pragma unroll
  for (int kk = 0; kk < BC / 16; kk++)
    wmma::load_matrix_sync(a[kk], p + row0 * LDP + kk * 16, LDP);
  for (int n = 0; n < d; n += 16) {{
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, o + row0 * LDO + n, LDO, wmma::mem_row_major);
    #pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {{
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
      wmma::load_matrix_sync(b, v + kk * 16 * LDH + n, LDH);
      wmma::mma_sync(acc, a[kk], b, acc);
    }}
    wmma::store_matrix_sync(o + row0 * LDO + n, acc, LDO, wmma::mem_row_major);
  }}
}}
"""

float16 = types.float16                 # (numba.cuda.float16 exists on a GPU only)

if runtime.MODE == "gpu":
    from .attention_common import address_of

    _src = cuda.CUSource(WMMA_SOURCE)
    wmma_qk = cuda.declare_device(
        "wmma_qk", "void(CPointer(float32), CPointer(float32), CPointer(float64), int32, int32)",
        link=_src, abi="c")
    wmma_pv = cuda.declare_device(
        "wmma_pv", "void(CPointer(float16), CPointer(float32), CPointer(float32), int32, int32)",
        link=_src, abi="c")


@cuda.jit
def flash_wmma_fwd(Qw, Kw, Vw, O, scale, causal, window):
    # Qw, Kw, Vw: flat float32 views of float16 (batch*heads, N, d) arrays: two halves a word.
    # Block (bx, bh) owns query rows q0 .. q0+WBr-1 of head bh; warp w owns 16 of them.
    # Thread t: lanes 2r', 2r'+1 of warp w own row r = 16w + r' for the online softmax (half
    # of the score columns each), the rescale and the final write (half of the columns each).
    sQ = cuda.shared.array((WBr, LDH2), float32, alignment=128)
    sK = cuda.shared.array((WBc, LDH2), float32, alignment=128)
    sV = cuda.shared.array((WBc, LDH2), float32, alignment=128)
    sS = cuda.shared.array((WBr, LDS2), float64, alignment=128)
    sP = cuda.shared.array((WBr, LDP), float16, alignment=128)
    sO = cuda.shared.array((WBr, LDO), float32, alignment=128)
    t = cuda.threadIdx.x
    w, lane = t // 32, t % 32
    bh, q0 = cuda.blockIdx.y, cuda.blockIdx.x * WBr
    n, d = O.shape[1], O.shape[2]
    d2 = d // 2                        # float32 words per row
    r = 16 * w + lane // 2             # my row
    c0 = (lane % 2) * (WBc // 4)       # my half of the score pairs
    o0 = (lane % 2) * d2               # my half of the output columns
    rstep, cc = WTHREADS // d2, t % d2  # loader: rows t // d2 + rstep i, word column cc
    for rr in range(t // d2, WBr, rstep):        # Q tile (rows past n: zeros)
        sQ[rr, cc] = Qw[uint64((bh * n + q0 + rr) * d2 + cc)] if q0 + rr < n else float32(0.0)
    for c in range(o0, o0 + d2):
        sO[r, c] = float32(0.0)
    m = NEG_INF                        # running max (log2 units) and sum of my row
    l = float32(0.0)
    qs = scale * float32(LOG2E)
    lo, hi = 0, n
    if causal:
        hi = min(n, q0 + WBr)
    if window >= 0:
        lo = max(0, q0 - window) // WBc * WBc
    for j0 in range(lo, hi, WBc):
        cuda.syncthreads()                       # every warp is done with the last K, V
        for rr in range(t // d2, WBc, rstep):    # K and V tiles (rows past n: zeros)
            ok = j0 + rr < n
            at = uint64((bh * n + j0 + rr) * d2 + cc)
            sK[rr, cc] = Kw[at] if ok else float32(0.0)
            sV[rr, cc] = Vw[at] if ok else float32(0.0)
        cuda.syncthreads()
        wmma_qk(address_of(sQ), address_of(sK), address_of(sS), 16 * w, d)
        cuda.syncwarp()                          # my warp's scores are in sS
        full = (j0 + WBc <= n and q0 + WBr <= n and (not causal or j0 + WBc <= q0 + 1)
                and (window < 0 or q0 + WBr - 1 - j0 <= window))
        mx = NEG_INF
        for c2 in range(c0, c0 + WBc // 4):      # pairs of scores: columns 2 c2, 2 c2 + 1
            a, b = unpack2(sS[r, c2])
            if not full:
                if not visible(q0 + r, j0 + 2 * c2, n, causal, window):
                    a = NEG_INF
                if not visible(q0 + r, j0 + 2 * c2 + 1, n, causal, window):
                    b = NEG_INF
            mx = max(mx, max(a, b) * qs)
        mx = max(mx, cuda.shfl_xor_sync(0xFFFFFFFF, mx, 1))
        m_new = max(m, mx)
        m_use = m_new if m_new > NEG_INF else float32(0.0)   # no visible key yet: p = 0
        ps = float32(0.0)
        for c2 in range(c0, c0 + WBc // 4):
            a, b = unpack2(sS[r, c2])
            pa = math.exp2(a * qs - m_use)
            pb = math.exp2(b * qs - m_use)
            if not full:
                if not visible(q0 + r, j0 + 2 * c2, n, causal, window):
                    pa = float32(0.0)
                if not visible(q0 + r, j0 + 2 * c2 + 1, n, causal, window):
                    pb = float32(0.0)
            sP[r, 2 * c2] = float16(pa)
            sP[r, 2 * c2 + 1] = float16(pb)
            ps += pa + pb
        ps += cuda.shfl_xor_sync(0xFFFFFFFF, ps, 1)
        alpha = math.exp2(m - m_use)
        l = l * alpha + ps
        m = m_new
        if alpha != float32(1.0):                # the max moved: rescale my half row of O
            for c in range(o0, o0 + d2):         # (rare after the first tiles)
                sO[r, c] *= alpha
        cuda.syncwarp()                          # P and the rescaled O rows are ready
        wmma_pv(address_of(sP), address_of(sV), address_of(sO), 16 * w, d)
    cuda.syncwarp()
    if q0 + r < n:
        inv = float32(1.0) / l if l > 0 else float32(0.0)
        for c in range(o0, o0 + d2):
            O[bh, q0 + r, c] = sO[r, c] * inv


def launch(Q, K, V, O, *, causal: bool = False, window=None):
    """Launch on float16 device arrays (batch*heads, N, d), d in HEAD_DIMS; O float32."""
    bh, n, d = Q.shape
    args = half_word_args(Q, K, V, O, causal, window)
    flash_wmma_fwd[(math.ceil(n / WBr), bh), WTHREADS](*args)


def flash_wmma(Q, K, V, causal: bool = False, window=None):
    """Attention O for (batch, heads, N, d) float16 Q, K, V with tensor cores (GPU only)."""
    return on_tensor_cores("flash_wmma", launch, HEAD_DIMS, Q, K, V, causal, window)


# PTX of the Python side only (the C++ functions stay external until the GPU links them).
PTX_SIGNATURES = {"flash_wmma_fwd": "void(float32[::1], float32[::1], float32[::1], "
                                    "float32[:, :, ::1], float32, boolean, int64)"}
