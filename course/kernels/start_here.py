"""Lesson 00 - the first kernel of the start-here notebook: square every element."""
from __future__ import annotations

import numpy as np
from numba import cuda


@cuda.jit
def square(x, out):
    # Thread i owns element i; x and out live in GPU global memory.
    i = cuda.grid(1)
    if i < out.size:   # the grid is whole blocks: usually more threads than elements
        out[i] = x[i] * x[i]


PTX_SIGNATURES = {"square": "void(float32[::1], float32[::1])"}


def _square(x, threads_per_block: int = 32):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    out = cuda.device_array_like(x)
    square[(x.size + threads_per_block - 1) // threads_per_block, threads_per_block](x, out)
    return out.copy_to_host()


VARIANTS = {"square": _square}


def reference(x):
    """x * x in float64."""
    return np.asarray(x, dtype=np.float64) ** 2
