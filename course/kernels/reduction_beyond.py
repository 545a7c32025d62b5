"""Lesson 02, kernels 5-7 - beyond the lecture, written the way that is correct since Volta.

The lecture (CSE P 524, Lecture 9) stops at kernel 4, first add during load.  The classic
continuation (after Mark Harris's *Optimizing Parallel Reduction in CUDA*): kernel 5 unrolls
the last warp with ``cuda.syncwarp()`` between its steps, kernel 6 sums with warp shuffles,
kernel 7 loops over the grid and adds one atomic per block.  ``reduction.py`` launches them
(``Reducer``) and re-exports them; nothing here imports ``reduction``.
"""
from __future__ import annotations

from numba import cuda


@cuda.jit
def reduce5(g_idata, g_odata):
    # Kernel 5: kernel 4, with the last warp's six steps unrolled - no block barrier, but
    # cuda.syncwarp() between every read and write (needed since Volta: the 32 threads of
    # a warp are no longer guaranteed to run in lockstep).  Needs blockDim.x >= 64.
    # Thread tid owns elements i and i + blockDim.x of g_idata (global), slot tid of sdata.
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * (cuda.blockDim.x * 2) + cuda.threadIdx.x
    mysum = g_idata.dtype.type(0)
    if i < g_idata.size:
        mysum = g_idata[i]
    if i + cuda.blockDim.x < g_idata.size:
        mysum += g_idata[i + cuda.blockDim.x]
    sdata[tid] = mysum
    cuda.syncthreads()

    s = cuda.blockDim.x // 2
    while s > 32:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1

    if tid < 32:                            # the last warp: sdata[0..63] -> sdata[0]
        mysum = sdata[tid] + sdata[tid + 32]
        s = 16
        while s > 0:
            cuda.syncwarp()                 # every lane has read before any lane writes
            sdata[tid] = mysum
            cuda.syncwarp()                 # every lane has written before any lane reads
            mysum += sdata[tid + s]
            s >>= 1
        if tid == 0:
            g_odata[cuda.blockIdx.x] = mysum


@cuda.jit
def reduce6(g_idata, g_odata):
    # Kernel 6: first add during load, then warp shuffles: registers instead of shared
    # memory, one barrier per block.  Thread tid owns elements i and i + blockDim.x of
    # g_idata (global); warp_sums (shared) holds one value per warp.
    warp_sums = cuda.shared.array(32, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    i = cuda.blockIdx.x * (cuda.blockDim.x * 2) + cuda.threadIdx.x
    mysum = g_idata.dtype.type(0)
    if i < g_idata.size:
        mysum = g_idata[i]
    if i + cuda.blockDim.x < g_idata.size:
        mysum += g_idata[i + cuda.blockDim.x]

    offset = 16                             # lane 0 of each warp ends with its warp's sum
    while offset > 0:
        mysum += cuda.shfl_down_sync(0xFFFFFFFF, mysum, offset)
        offset //= 2
    if lane == 0:
        warp_sums[warp] = mysum
    cuda.syncthreads()

    if warp == 0:                           # the first warp sums the warps' sums
        mysum = g_idata.dtype.type(0)
        if lane < cuda.blockDim.x // 32:
            mysum = warp_sums[lane]
        offset = 16
        while offset > 0:
            mysum += cuda.shfl_down_sync(0xFFFFFFFF, mysum, offset)
            offset //= 2
        if lane == 0:
            g_odata[cuda.blockIdx.x] = mysum


@cuda.jit
def reduce7(g_idata, out):
    # Kernel 7: grid-stride loop, many elements per thread, one atomic per block, a single
    # launch for any grid size.  Thread g (of T in the grid) owns elements g, g + T,
    # g + 2T, ... of g_idata (global), summed in registers; sdata (shared) combines the
    # block with kernel 3's tree; out[0] (global) must be zero before the launch.
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    n = g_idata.size
    stride = cuda.blockDim.x * cuda.gridDim.x
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    a0 = g_idata.dtype.type(0)
    a1 = g_idata.dtype.type(0)
    a2 = g_idata.dtype.type(0)
    a3 = g_idata.dtype.type(0)
    while i + 3 * stride < n:               # four independent loads in flight per thread
        a0 += g_idata[i]
        a1 += g_idata[i + stride]
        a2 += g_idata[i + 2 * stride]
        a3 += g_idata[i + 3 * stride]
        i += 4 * stride
    while i < n:                            # the last few elements
        a0 += g_idata[i]
        i += stride
    sdata[tid] = (a0 + a1) + (a2 + a3)
    cuda.syncthreads()

    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1

    if tid == 0:
        cuda.atomic.add(out, 0, sdata[0])   # one atomic per block


PTX_SIGNATURES = {
    "reduce5": "void(float32[::1], float32[::1])",
    "reduce6": "void(float32[::1], float32[::1])",
    "reduce7": "void(float32[::1], float32[::1])",
}
