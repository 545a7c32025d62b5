"""Lesson 08, GPU only - flash attention on tensor cores with everything in registers (FA2 layout).

``attention_wmma.py`` hands whole 16 x 16 tiles to ``nvcuda::wmma``, whose fragments are opaque:
the scores go to shared memory for the softmax, and the output accumulator goes back to shared
memory after every key tile.  Here the two matrix products use the PTX instruction underneath,
``mma.sync.m16n8k16`` (float16 inputs, float32 accumulators), whose fragment layout is
documented: lane ``l`` of a warp holds, of each 16 x 8 result tile, rows ``l // 4`` and
``l // 4 + 8`` and columns ``2 (l % 4)`` and ``2 (l % 4) + 1``.  Knowing that, the kernel keeps
the scores S (16 x 64 a warp: 32 floats a lane) and the output O (16 x d: d / 2 floats a lane)
in numba local arrays, which the compiler keeps in registers; the online softmax runs in Python
on those registers, and the probabilities go straight back into the next product: a score
tile's result fragment *is* the next product's input fragment (two floats -> one pair of
halves).  Nothing but K and V tiles passes through shared memory.

What numba cannot say is in a few lines of CUDA C++ (``cxx_source(D)``), linked into the kernel and
inlined by link-time optimisation (numba-cuda links with LTO when nvJitLink is present, as
it is wherever the numba-cuda[cu12] wheels are installed; tests/test_ptx.py checks the result):
``cp.async`` (global -> shared copies that run while the warps compute: K/V tiles are
double-buffered), ``ldmatrix`` (a warp loads 4 8 x 8 tiles of halves from shared memory in
one instruction, ``.trans`` for V) and ``mma.sync``.  The masks, the softmax and the loop over
key tiles are Python.  Block: ``WARPS`` warps of 16 query rows each; 64 keys a tile.  The
simulator cannot link C++: the kernel is in ``GPU_ONLY_LINKED`` and the notebook shows it.
Credits: the layout follows Tri Dao's FlashAttention-2 paper (2023); code written anew.
"""
from __future__ import annotations

import math

from numba import cuda, float32, int64

from ..platform import runtime
from .attention_common import (
    LOG2E,
    NEG_INF,
    allow_big_shared,
    half_word_args,
    on_tensor_cores,
    visible,
)
from .matmul_tuned import bounds

NOT_SHOWN = {"flash_mma_fwd"}          # built per head dim by make_flash_mma; printed instead
GPU_ONLY_LINKED = {"flash_mma_fwd"}    # needs linked C++: no simulator; PTX of the Python side

KEYS = 64                  # keys (and values) per shared tile
WARPS = 8                  # warps per block, 16 query rows each (H100: 36.5 ms vs 37.9 with 4)
HEAD_DIMS = (16, 32, 64, 128)


def cxx_source(D: int) -> str:
    """The C++ helpers for head dim D: tile loads, S = Q K^T and O += P V for one warp."""
    LDH = D + 8                     # halves per shared row: rows 16 bytes apart in banks
    return f"""
#include <cuda_fp16.h>
#define LDH {LDH}
#define D {D}
static __device__ __forceinline__ unsigned sa(const void* p) {{
  return (unsigned)__cvta_generic_to_shared(p);
}}
static __device__ __forceinline__ void ldsm4(unsigned* r, unsigned addr) {{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%0,%1,%2,%3}}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}}
static __device__ __forceinline__ void ldsm4t(unsigned* r, unsigned addr) {{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%0,%1,%2,%3}}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}}
static __device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {{
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}}
static __device__ __forceinline__ unsigned h2(float lo, float hi) {{
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}}

// Block-wide: rows [0, rows) of a (tile_rows x D) half tile at g + first (in words of two
// halves) -> shared at smem + at (words, rows of LDH halves); rows >= rows become zeros.
// 16 bytes per cp.async; nothing waits here (commit / wait below).
extern "C" __device__ void mma_load_{D}(const float* g, long long first, float* smem, int at,
                                       int rows, int tile_rows) {{
  const char* src = reinterpret_cast<const char*>(g + first);
  char* dst = reinterpret_cast<char*>(smem + at);
  for (int i = threadIdx.x; i < tile_rows * (D / 8); i += blockDim.x) {{
    int r = i / (D / 8), c = i % (D / 8);
    int ok = r < rows;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(sa(dst + r * LDH * 2 + c * 16)),
                    "l"(src + (ok ? r : 0) * D * 2 + c * 16), "r"(ok ? 16 : 0));
  }}
  asm volatile("cp.async.commit_group;");
}}
extern "C" __device__ void mma_wait_all_but_one() {{ asm volatile("cp.async.wait_group 1;"); }}
extern "C" __device__ void mma_wait_all() {{ asm volatile("cp.async.wait_group 0;"); }}

// One warp: s[32] = Q[q_at: 16 rows] K[k_at: 64 rows]^T.  s[4 j + 0..1]: row l/4, keys
// 8 j + 2 (l % 4) + 0..1; s[4 j + 2..3]: row l/4 + 8, same keys.
extern "C" __device__ void mma_qk_{D}(const float* smem, int q_at, int k_at, float* s) {{
  const __half* q = reinterpret_cast<const __half*>(smem + q_at);
  const __half* k = reinterpret_cast<const __half*>(smem + k_at);
  int l = threadIdx.x % 32;
  #pragma unroll
  for (int j = 0; j < 32; j++) s[j] = 0.0f;
  #pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {{
    unsigned a[4], b[4];
    ldsm4(a, sa(q + (l % 16) * LDH + kk * 16 + (l / 16) * 8));
    #pragma unroll
    for (int np = 0; np < 4; np++) {{   // keys 16 np .. 16 np + 15: two 8-key result tiles
      ldsm4(b, sa(k + (16 * np + l % 8 + (l / 16) * 8) * LDH + kk * 16 + ((l / 8) % 2) * 8));
      mma(s + 8 * np, a, b[0], b[1]);
      mma(s + 8 * np + 4, a, b[2], b[3]);
    }}
  }}
}}

// One warp: o[D/2] += P V[v_at: 64 rows], P = s (probabilities, as s[] above) in halves.
// o[4 j + 0..1]: row l/4, columns 8 j + 2 (l % 4) + 0..1; o[4 j + 2..3]: row l/4 + 8.
extern "C" __device__ void mma_pv_{D}(const float* s, const float* smem, int v_at, float* o) {{
  const __half* v = reinterpret_cast<const __half*>(smem + v_at);
  int l = threadIdx.x % 32;
  #pragma unroll
  for (int kk = 0; kk < 4; kk++) {{     // keys 16 kk .. 16 kk + 15
    unsigned a[4] = {{h2(s[8 * kk], s[8 * kk + 1]), h2(s[8 * kk + 2], s[8 * kk + 3]),
                      h2(s[8 * kk + 4], s[8 * kk + 5]), h2(s[8 * kk + 6], s[8 * kk + 7])}};
    #pragma unroll
    for (int nd = 0; nd < D / 16; nd++) {{   // output columns 16 nd .. 16 nd + 15
      unsigned b[4];
      ldsm4t(b, sa(v + (16 * kk + l % 8 + ((l / 8) % 2) * 8) * LDH + 16 * nd + (l / 16) * 8));
      mma(o + 8 * nd, a, b[0], b[1]);
      mma(o + 8 * nd + 4, a, b[2], b[3]);
    }}
  }}
}}
"""


if runtime.MODE == "gpu":
    from .attention_common import address_of

    def _declare(D):
        src = cuda.CUSource(cxx_source(D))
        P = "CPointer(float32)"
        load = cuda.declare_device(f"mma_load_{D}", f"void({P}, int64, {P}, int32, int32, int32)",
                                   link=src, abi="c")
        qk = cuda.declare_device(f"mma_qk_{D}", f"void({P}, int32, int32, {P})", link=src,
                                 abi="c")
        pv = cuda.declare_device(f"mma_pv_{D}", f"void({P}, {P}, int32, {P})", link=src, abi="c")
        wait1 = cuda.declare_device("mma_wait_all_but_one", "void()", link=src, abi="c")
        wait0 = cuda.declare_device("mma_wait_all", "void()", link=src, abi="c")
        return load, qk, pv, wait1, wait0

else:
    def _declare(D):
        """The simulator cannot link C++: stand-ins that say so if a kernel ever calls them."""
        def gpu_only(*args):
            raise RuntimeError("flash_mma's C++ helpers need a real GPU")
        return (gpu_only,) * 5


def make_flash_mma(D: int, warps: int = WARPS):
    """flash_mma_fwd for head dim D (a multiple of 16, <= 128) and ``warps`` warps a block."""
    load, qk, pv, wait1, wait0 = _declare(D)
    D2 = D // 2                     # float32 words per row in global memory (two halves each)
    W = (D + 8) // 2                # words per shared row (LDH halves)
    BR = 16 * warps                 # query rows per block
    Q_AT = 0                        # shared offsets in words: Q, then two (K, V) buffers
    KV_AT = (Q_AT + BR * W, Q_AT + BR * W + 2 * KEYS * W)
    V_OFF = KEYS * W
    SHARED = 4 * (BR * W + 4 * KEYS * W)
    OW = D // 2                     # output accumulator floats a lane

    @cuda.jit(**bounds(32 * warps, 2 if warps <= 4 else 1))   # 4 warps: 2 blocks an SM
    def flash_mma_fwd(Qw, Kw, Vw, O, scale, causal, window):
        # Qw, Kw, Vw: flat float32 views of float16 (batch*heads, N, D): two halves a word.
        # Warp w owns query rows q0 + 16 w .. + 15; lane l holds rows g = l // 4 and g + 8.
        sm = cuda.shared.array(0, float32)
        s = cuda.local.array(32, float32)      # scores, then probabilities (registers)
        o = cuda.local.array(OW, float32)      # output accumulator (registers)
        t = cuda.threadIdx.x
        w, lane = t // 32, t % 32
        g, tq = lane // 4, lane % 4
        bh, q0 = cuda.blockIdx.y, cuda.blockIdx.x * BR
        n = O.shape[1]
        head = int64(bh) * n * D2              # first word of this head
        lo, hi = 0, n                          # key tiles that can hold a visible key
        if causal:
            hi = min(n, q0 + BR)
        if window >= 0:
            lo = max(0, q0 - window) // KEYS * KEYS
        tiles = (hi - lo + KEYS - 1) // KEYS
        load(address_of(Qw), head + q0 * D2, address_of(sm), Q_AT, min(BR, n - q0), BR)
        load(address_of(Kw), head + lo * D2, address_of(sm), KV_AT[0], min(KEYS, n - lo), KEYS)
        load(address_of(Vw), head + lo * D2, address_of(sm), KV_AT[0] + V_OFF,
             min(KEYS, n - lo), KEYS)
        for c in range(OW):
            o[c] = float32(0.0)
        m0 = m1 = NEG_INF                      # running max of rows g, g + 8 (log2 units)
        l0 = l1 = float32(0.0)                 # this lane's part of their sums
        qs = scale * float32(LOG2E)
        r0 = q0 + 16 * w + g                   # my two query rows
        for it in range(tiles):
            j0 = lo + it * KEYS
            at = KV_AT[it % 2]
            if it + 1 < tiles:                 # the next K, V tiles load while we compute
                nxt = KV_AT[(it + 1) % 2]
                rows = min(KEYS, n - j0 - KEYS)
                load(address_of(Kw), head + (j0 + KEYS) * D2, address_of(sm), nxt, rows, KEYS)
                load(address_of(Vw), head + (j0 + KEYS) * D2, address_of(sm), nxt + V_OFF,
                     rows, KEYS)
                wait1()                        # all but the newest copies have landed
            else:
                wait0()
            cuda.syncthreads()                 # ... for every thread's copies
            qk(address_of(sm), Q_AT + 16 * w * W, at, address_of(s))
            full = (j0 + KEYS <= n and q0 + BR <= n and (not causal or j0 + KEYS <= q0 + 1)
                    and (window < 0 or q0 + BR - 1 - j0 <= window))
            if not full:                       # a tile at the edge or on the diagonal
                for j in range(32):
                    key = j0 + 8 * (j // 4) + 2 * tq + j % 2
                    if not visible(r0 + 8 * ((j // 2) % 2), key, n, causal, window):
                        s[j] = NEG_INF
            mx0 = mx1 = NEG_INF
            for j in range(8):
                mx0 = max(mx0, max(s[4 * j], s[4 * j + 1]))
                mx1 = max(mx1, max(s[4 * j + 2], s[4 * j + 3]))
            for off in (1, 2):                 # the 4 lanes of a quad share two rows
                mx0 = max(mx0, cuda.shfl_xor_sync(0xFFFFFFFF, mx0, off))
                mx1 = max(mx1, cuda.shfl_xor_sync(0xFFFFFFFF, mx1, off))
            n0, n1 = max(m0, mx0 * qs), max(m1, mx1 * qs)
            u0 = n0 if n0 > NEG_INF else float32(0.0)   # no visible key yet: p = 0
            u1 = n1 if n1 > NEG_INF else float32(0.0)
            a0, a1 = math.exp2(m0 - u0), math.exp2(m1 - u1)
            m0, m1 = n0, n1
            p0 = p1 = float32(0.0)
            for j in range(8):
                s[4 * j] = math.exp2(s[4 * j] * qs - u0)
                s[4 * j + 1] = math.exp2(s[4 * j + 1] * qs - u0)
                s[4 * j + 2] = math.exp2(s[4 * j + 2] * qs - u1)
                s[4 * j + 3] = math.exp2(s[4 * j + 3] * qs - u1)
                p0 += s[4 * j] + s[4 * j + 1]
                p1 += s[4 * j + 2] + s[4 * j + 3]
            l0 = l0 * a0 + p0
            l1 = l1 * a1 + p1
            for j in range(OW // 4):           # rescale O, then O += P V
                o[4 * j] *= a0
                o[4 * j + 1] *= a0
                o[4 * j + 2] *= a1
                o[4 * j + 3] *= a1
            pv(address_of(s), address_of(sm), at + V_OFF, address_of(o))
            cuda.syncthreads()                 # done with this buffer before it refills
        for off in (1, 2):
            l0 += cuda.shfl_xor_sync(0xFFFFFFFF, l0, off)
            l1 += cuda.shfl_xor_sync(0xFFFFFFFF, l1, off)
        i0 = float32(1.0) / l0 if l0 > 0 else float32(0.0)
        i1 = float32(1.0) / l1 if l1 > 0 else float32(0.0)
        for j in range(OW // 4):
            col = 8 * j + 2 * tq
            if r0 < n:
                O[bh, r0, col] = o[4 * j] * i0
                O[bh, r0, col + 1] = o[4 * j + 1] * i0
            if r0 + 8 < n:
                O[bh, r0 + 8, col] = o[4 * j + 2] * i1
                O[bh, r0 + 8, col + 1] = o[4 * j + 3] * i1

    flash_mma_fwd.head_dim = D
    flash_mma_fwd.rows = BR
    flash_mma_fwd.shared_bytes = SHARED
    return flash_mma_fwd


flash_mma_fwd = make_flash_mma(128)            # the benchmark's build (compiled on first use)
_BUILT = {(128, WARPS): flash_mma_fwd}


def kernel(d: int, warps: int = WARPS):
    """The flash_mma_fwd build for head dim d in HEAD_DIMS (compiled on first use)."""
    if runtime.MODE != "gpu":
        raise RuntimeError("flash_mma links CUDA C++ (tensor cores): it needs a real GPU; "
                           "the simulator cannot run it")
    if d not in HEAD_DIMS:
        raise ValueError(f"flash_mma needs d in {HEAD_DIMS}; got d = {d}")
    if (d, warps) not in _BUILT:
        _BUILT[d, warps] = make_flash_mma(d, warps)
    return _BUILT[d, warps]


PTX_SIGNATURE = ("void(float32[::1], float32[::1], float32[::1], float32[:, :, ::1], float32, "
                 "boolean, int64)")   # what launch passes
# PTX of the Python side only (the C++ helpers stay external until the GPU links them).
PTX_SIGNATURES = {"flash_mma_fwd": PTX_SIGNATURE}


def launch(Q, K, V, O, *, causal: bool = False, window=None, warps: int = WARPS):
    """Launch on float16 device arrays (batch*heads, N, d), d in HEAD_DIMS; O float32."""
    bh, n, d = Q.shape
    cc = cuda.get_current_device().compute_capability
    if cc < (8, 0):
        raise RuntimeError(f"flash_mma needs cp.async and mma.sync (compute capability 8.0 or "
                           f"newer); this GPU has {cc[0]}.{cc[1]}: use flash_wmma")
    k = kernel(d, warps)
    args = half_word_args(Q, K, V, O, causal, window)
    allow_big_shared(k, args, k.shared_bytes)
    k[(math.ceil(n / k.rows), bh), 32 * warps, 0, k.shared_bytes](*args)


def flash_mma(Q, K, V, causal: bool = False, window=None):
    """Attention O for (batch, heads, N, d) float16 Q, K, V with mma.sync (GPU only)."""
    return on_tensor_cores("flash_mma", launch, HEAD_DIMS, Q, K, V, causal, window)
