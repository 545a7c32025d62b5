"""Lesson 11 - the passes of GPT-2's unfused build: the heads apart and together again for
attention (``permute_kernel`` / ``unpermute_kernel``), and the residual add (x + f(x)).

The fast build needs none of them: flash attention reads q, k, v where the qkv matmul left
them, and the projections add into x in their epilogue (``gpt2.py``).  They stay for the
naive attention, head sizes the flash kernel is not built for, and ``fuse=False``.
"""
from __future__ import annotations

from numba import cuda


@cuda.jit
def permute_kernel(q, k, v, qkv, n_head):
    # qkv (B*T, 3C) -> q, k, v (B*n_head, T, hs): block (t, bh), thread d.
    t, bh, d = cuda.blockIdx.x, cuda.blockIdx.y, cuda.threadIdx.x
    T, hs = q.shape[1], q.shape[2]
    if d < hs:
        r = (bh // n_head) * T + t
        c = (bh % n_head) * hs + d
        C = n_head * hs
        q[bh, t, d] = qkv[r, c]
        k[bh, t, d] = qkv[r, C + c]
        v[bh, t, d] = qkv[r, 2 * C + c]


@cuda.jit
def unpermute_kernel(out, o, n_head):
    # o (B*n_head, T, hs) -> out (B*T, C): the heads side by side again.
    t, bh, d = cuda.blockIdx.x, cuda.blockIdx.y, cuda.threadIdx.x
    T, hs = o.shape[1], o.shape[2]
    if d < hs:
        out[(bh // n_head) * T + t, (bh % n_head) * hs + d] = o[bh, t, d]


@cuda.jit
def residual_forward_kernel(out, a, b):
    # out = a + b over (B*T, C); block row = blockIdx.y.
    r = cuda.blockIdx.y
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if c < out.shape[1]:
        out[r, c] = a[r, c] + b[r, c]


_A2 = "float32[:, ::1]"
_A3 = "float32[:, :, ::1]"
PTX_SIGNATURES = {
    "permute_kernel": f"void({_A3}, {_A3}, {_A3}, {_A2}, int64)",
    "unpermute_kernel": f"void({_A2}, {_A3}, int64)",
    "residual_forward_kernel": f"void({_A2}, {_A2}, {_A2})",
}
