"""The given kernel of every tune exercise, as the student copy has it: the starter.

On a GPU a tune target is a speed-up over this kernel, timed in the same run, on the same
card, by the same loop and judged like the student's (``course/grading/judging/starter.py``); a
test (``tests/test_tune_cards.py``) proves each one is the notebook's given code, statement
for statement.  The course's kernels live in ``course/kernels``; these are the slow starting
points, kept here so the judge never needs a notebook to time them.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32

TILE_T = 32  # the transpose's tile side (the notebook's cell defines the same)


@cuda.jit
def add_fast(n, x, y):
    # each thread adds one contiguous chunk of ceil(n / threads) elements
    threads = cuda.gridsize(1)
    chunk = (n + threads - 1) // threads
    start = cuda.grid(1) * chunk
    for k in range(start, min(start + chunk, n)):
        y[k] = x[k] + y[k]


@cuda.jit
def reduce_fast(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    s = 1
    while s < cuda.blockDim.x:
        index = 2 * s * tid
        if index < cuda.blockDim.x:
            sdata[index] += sdata[index + s]
        cuda.syncthreads()
        s *= 2
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def matmul_fast(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def center_fast(D, mean):
    k = cuda.grid(1)
    m, n = D.shape
    if k < m * n:
        j = k // m
        i = k - j * m
        D[i, j] -= mean[j]


@cuda.jit
def covariance_fast(data, cov, num_entries, num_features):
    x, y = cuda.grid(2)
    if x < num_features and y < num_features:
        acc = float32(0)
        for i in range(num_entries):
            acc += data[i * num_features + y] * data[i * num_features + x]
        cov[y * num_features + x] = acc / num_entries


@cuda.jit
def histogram_fast(data, hist):
    # this block's tile: at most 4 channels x ceil(rows / gridDim.y) rows (the check's grid)
    t = cuda.threadIdx.x
    ch_per_block = (data.shape[1] + cuda.gridDim.x - 1) // cuda.gridDim.x
    rows_per_block = (data.shape[0] + cuda.gridDim.y - 1) // cuda.gridDim.y
    c0 = cuda.blockIdx.x * ch_per_block
    r0 = cuda.blockIdx.y * rows_per_block
    n_ch = max(0, min(ch_per_block, data.shape[1] - c0))
    n_rows = max(0, min(rows_per_block, data.shape[0] - r0))
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        cuda.atomic.add(hist, (c0 + c, int32(data[r0 + r, c0 + c])), 1)


@cuda.jit
def transpose_fast(A, B):
    tile = cuda.shared.array((32, 32), np.float32)
    bx, by = cuda.blockIdx.x * TILE_T, cuda.blockIdx.y * TILE_T
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for k in range(0, TILE_T, cuda.blockDim.y):  # load rows ty, ty + 8, ... of the tile
        r, c = by + ty + k, bx + tx
        if r < A.shape[0] and c < A.shape[1]:
            tile[ty + k, tx] = A[r, c]
    cuda.syncthreads()
    for k in range(0, TILE_T, cuda.blockDim.y):  # write them transposed, coalesced
        r, c = bx + ty + k, by + tx
        if r < B.shape[0] and c < B.shape[1]:
            B[r, c] = tile[tx, ty + k]


STARTERS = {  # tune exercise -> its given kernel
    "tune_vector_add": add_fast,
    "tune_reduction": reduce_fast,
    "tune_matmul": matmul_fast,
    "tune_centering": center_fast,
    "tune_covariance": covariance_fast,
    "tune_histogram": histogram_fast,
    "tune_transpose": transpose_fast,
}
