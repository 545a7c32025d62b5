"""Lesson 01 - vector add: one thread, one block, many blocks, grid-stride loop.

Follows CSE P 524 (UW, Andrew Lumsdaine), Lecture 9: ``y[i] = x[i] + y[i]`` for N = 2^20
floats, first with one CUDA thread, then one block of 256 threads, then many blocks.
Also the 2-D ``matrixAdd`` of CSE/DSC 291 (UCSD).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..platform import runtime

NOT_SHOWN = {"matrix_add"}  # notebook 01 shows it as text: its exercise 2 (A + B transposed)
# defines a kernel of the same name


@cuda.jit
def add_one_thread(n, x, y):
    # Launched as [1, 1]: the single thread walks all n elements (x, y in global memory).
    for i in range(n):
        y[i] = x[i] + y[i]


@cuda.jit
def add_one_block(n, x, y):
    # One block: thread t owns elements t, t + blockDim.x, t + 2 * blockDim.x, ...
    index = cuda.threadIdx.x
    stride = cuda.blockDim.x
    for i in range(index, n, stride):
        y[i] = x[i] + y[i]


@cuda.jit
def add_partitioned(n, x, y):
    # One block, the CPU way: thread t owns the contiguous chunk [t * chunk, (t + 1) * chunk).
    chunk = (n + cuda.blockDim.x - 1) // cuda.blockDim.x
    begin = cuda.threadIdx.x * chunk
    end = min(begin + chunk, n)
    for i in range(begin, end):
        y[i] = x[i] + y[i]


@cuda.jit
def add_grid_stride(n, x, y):
    # Any grid: thread g owns elements g, g + T, g + 2T, ... where T = all threads launched.
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    for i in range(index, n, stride):
        y[i] = x[i] + y[i]


@cuda.jit
def add_grid_stride_x4(n, x, y):
    # Grid-stride loop that keeps 4 independent loads of x and of y in flight per thread:
    # thread g owns elements g, g + T, g + 2T, g + 3T, then jumps by 4T (T = threads launched).
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    while i + 3 * stride < n:
        x0, x1, x2, x3 = x[i], x[i + stride], x[i + 2 * stride], x[i + 3 * stride]
        y0, y1, y2, y3 = y[i], y[i + stride], y[i + 2 * stride], y[i + 3 * stride]
        y[i] = x0 + y0
        y[i + stride] = x1 + y1
        y[i + 2 * stride] = x2 + y2
        y[i + 3 * stride] = x3 + y3
        i += 4 * stride
    while i < n:                      # the last partial round
        y[i] = x[i] + y[i]
        i += stride


@cuda.jit
def add_pairs(n, x, y, x2, y2):
    # x2, y2 are x, y seen as complex64: element k is the pair (2k, 2k + 1), one 8-byte load.
    # Adding two complex numbers adds their two lanes separately: two float additions. One
    # pair per thread, ceil(n / 2) threads; the last thread adds the odd element, if any.
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n // 2:
        y2[i] = x2[i] + y2[i]
    elif i == n // 2 and n % 2 == 1:
        y[n - 1] = x[n - 1] + y[n - 1]


@cuda.jit
def matrix_add(A, B, C):
    # 2-D grid of 2-D blocks: thread (i, j) owns C[j, i]; arrays are (Ny, Nx), row-major.
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if i < C.shape[1] and j < C.shape[0]:   # guard: Nx, Ny need not be multiples of the block
        C[j, i] = A[j, i] + B[j, i]


@cuda.jit
def count_threads(nx, ny, counts):
    # lesson 01's predict experiment: every thread of a launch counts itself, and the idle ones twice
    i, j = cuda.grid(2)
    cuda.atomic.add(counts, 0, 1)
    if not (i < nx and j < ny):
        cuda.atomic.add(counts, 1, 1)


PTX_SIGNATURES = {
    "add_one_thread": "void(int64, float32[::1], float32[::1])",
    "add_one_block": "void(int64, float32[::1], float32[::1])",
    "add_partitioned": "void(int64, float32[::1], float32[::1])",
    "add_grid_stride": "void(int64, float32[::1], float32[::1])",
    "add_grid_stride_x4": "void(int64, float32[::1], float32[::1])",
    "add_pairs": "void(int64, float32[::1], float32[::1], complex64[::1], complex64[::1])",
    "matrix_add": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])",
    "count_threads": "void(int64, int64, int64[::1])",
}


def default_blocks() -> int:
    """A grid that fills the device: 32 blocks per SM on a GPU, 2 blocks in the simulator."""
    if runtime.MODE == "gpu":
        return 32 * cuda.get_current_device().MULTIPROCESSOR_COUNT
    return 2


def launch(variant: str, n: int, x, y, threads_per_block: int = 256, blocks: int | None = None):
    """Launch one variant on device arrays x, y (y is updated in place)."""
    if variant == "one_thread":
        add_one_thread[1, 1](n, x, y)
    elif variant == "one_block":
        add_one_block[1, threads_per_block](n, x, y)
    elif variant == "one_block_partitioned":
        add_partitioned[1, threads_per_block](n, x, y)
    elif variant == "many_blocks":
        add_grid_stride[math.ceil(n / threads_per_block), threads_per_block](n, x, y)
    elif variant == "grid_stride":
        add_grid_stride[blocks or default_blocks(), threads_per_block](n, x, y)
    elif variant == "grid_stride_x4":
        add_grid_stride_x4[blocks or default_blocks(), threads_per_block](n, x, y)
    elif variant == "pairs":
        x2, y2 = pair_views(n, x, y)
        add_pairs[math.ceil((n // 2 + 1) / threads_per_block), threads_per_block](n, x, y, x2, y2)
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")


def pair_views(n: int, x, y):
    """The first 2 * (n // 2) floats of x and y as complex64 (float pairs, 8-byte aligned)."""
    m = 2 * (n // 2)                 # n == 1: empty views; the kernel adds the odd one
    return x[:m].view(np.complex64), y[:m].view(np.complex64)


def _host(variant):
    def run(x, y, threads_per_block: int = 256, blocks: int | None = None):
        x, y = _validate(x, y)
        d_x, d_y = cuda.to_device(x), cuda.to_device(y)
        launch(variant, x.size, d_x, d_y, threads_per_block, blocks)
        return d_y.copy_to_host()
    run.__name__ = f"vector_add_{variant}"
    run.__doc__ = f"x + y computed by the {variant!r} kernel (numpy in, numpy out)."
    return run


def _validate(x, y):
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-D arrays of the same length; got {x.shape}, {y.shape}")
    if x.size == 0:
        raise ValueError("x and y are empty: nothing to add")
    return x, y


VARIANTS = {name: _host(name) for name in ("one_thread", "one_block", "one_block_partitioned",
                                           "many_blocks", "grid_stride", "grid_stride_x4",
                                           "pairs")}


def reference(x, y):
    """x + y in float64."""
    return np.asarray(x, dtype=np.float64) + np.asarray(y, dtype=np.float64)


# The lecture's table (CSE P 524, Lecture 9): N = 2^20 floats; time in ms.
LECTURE_TABLE = {
    "one_thread": {"GT 750M": 411.0, "K80": 463.0},
    "one_block": {"GT 750M": 3.2, "K80": 2.7},
    "many_blocks": {"GT 750M": 0.68, "K80": 0.09},
}
