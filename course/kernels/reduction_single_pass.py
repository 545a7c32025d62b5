"""Lesson 02, kernel 8 - one launch, no memset: the last block to finish sums the partial sums.

Kernel 7 (``reduction_beyond.py``) adds each block's sum into ``out[0]`` with an atomic, so
``out`` must be zeroed before every launch.  Kernel 8 writes one partial sum per block and
lets the block that draws the last ticket from a counter add them up (the "last block"
pattern of CUDA's threadFenceReduction sample).  ``reduction.py`` launches it (``Reducer``) and
re-exports what is here; nothing here imports ``reduction``.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

NOT_SHOWN = {"reduce8_x4"}   # an ablation of kernel 8 for the benchmark (4 loads in flight)


@cuda.jit(device=True, inline=True)
def block_sum(v, warp_sums):
    # The sum of v over the block, returned to thread 0 (other threads get part sums):
    # kernel 6's warp shuffles, one value per warp in warp_sums (shared, 32 slots), then
    # the first warp sums those.  Needs blockDim.x a multiple of 32.
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if lane == 0:
        warp_sums[warp] = v
    cuda.syncthreads()
    if warp == 0:
        v = warp_sums.dtype.type(0)
        if lane < cuda.blockDim.x // 32:
            v = warp_sums[lane]
        offset = 16
        while offset > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
            offset //= 2
    return v


@cuda.jit
def reduce8(g_idata, partials, count, out):
    # Kernel 8: kernel 7 in one launch with no memset.  Thread g (of T in the grid) sums
    # g_idata[g], g_idata[g + T], ... with eight loads in flight; block b writes its sum to
    # partials[b] (global) and draws a ticket from count[0] (global, 0 before the launch).
    # The block that draws the last ticket sums partials into out[0] and resets count[0].
    warp_sums = cuda.shared.array(32, dtype=g_idata.dtype)
    is_last = cuda.shared.array(1, dtype=count.dtype)
    tid = cuda.threadIdx.x
    n = g_idata.size
    stride = cuda.blockDim.x * cuda.gridDim.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = g_idata.dtype.type(0)
    while i + 7 * stride < n:               # eight independent loads in flight per thread
        a0 += g_idata[i]
        a1 += g_idata[i + stride]
        a2 += g_idata[i + 2 * stride]
        a3 += g_idata[i + 3 * stride]
        a4 += g_idata[i + 4 * stride]
        a5 += g_idata[i + 5 * stride]
        a6 += g_idata[i + 6 * stride]
        a7 += g_idata[i + 7 * stride]
        i += 8 * stride
    while i < n:                            # the last few elements
        a0 += g_idata[i]
        i += stride
    mysum = block_sum(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)), warp_sums)

    if tid == 0:
        partials[cuda.blockIdx.x] = mysum
        cuda.threadfence()                  # partials[b] is visible GPU-wide before ...
        ticket = cuda.atomic.add(count, 0, 1)   # ... the ticket says "block b is done"
        is_last[0] = ticket == cuda.gridDim.x - 1
    cuda.syncthreads()

    if is_last[0]:                          # all other blocks have drawn their tickets
        cuda.threadfence()                  # so read their partials only after that
        mysum = g_idata.dtype.type(0)
        j = tid
        while j < cuda.gridDim.x:
            mysum += partials[j]
            j += cuda.blockDim.x
        mysum = block_sum(mysum, warp_sums)
        if tid == 0:
            out[0] = mysum
            count[0] = 0                    # the next launch starts from ticket 0 again


@cuda.jit
def reduce8_x4(g_idata, partials, count, out):
    # Kernel 8 with kernel 7's four loads in flight (the benchmark compares the two).
    warp_sums = cuda.shared.array(32, dtype=g_idata.dtype)
    is_last = cuda.shared.array(1, dtype=count.dtype)
    tid = cuda.threadIdx.x
    n = g_idata.size
    stride = cuda.blockDim.x * cuda.gridDim.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    a0 = a1 = a2 = a3 = g_idata.dtype.type(0)
    while i + 3 * stride < n:
        a0 += g_idata[i]
        a1 += g_idata[i + stride]
        a2 += g_idata[i + 2 * stride]
        a3 += g_idata[i + 3 * stride]
        i += 4 * stride
    while i < n:
        a0 += g_idata[i]
        i += stride
    mysum = block_sum((a0 + a1) + (a2 + a3), warp_sums)
    if tid == 0:
        partials[cuda.blockIdx.x] = mysum
        cuda.threadfence()
        ticket = cuda.atomic.add(count, 0, 1)
        is_last[0] = ticket == cuda.gridDim.x - 1
    cuda.syncthreads()
    if is_last[0]:
        cuda.threadfence()
        mysum = g_idata.dtype.type(0)
        j = tid
        while j < cuda.gridDim.x:
            mysum += partials[j]
            j += cuda.blockDim.x
        mysum = block_sum(mysum, warp_sums)
        if tid == 0:
            out[0] = mysum
            count[0] = 0


SINGLE_PASS_KERNELS = {8: reduce8, 4: reduce8_x4}   # loads in flight -> kernel 8


_SINGLE_PASS_BUFFERS: dict = {}


def single_pass_buffers(blocks: int, dtype):
    """Kernel 8's ``partials`` (one per block) and ticket counter ``count`` (int32, zero),
    allocated once per device, grid size and dtype and re-used by every call: the kernel's
    last block leaves ``count[0]`` at 0 again, so no call needs a memset.  Calls that share
    buffers must not run at the same time (one stream, as in this course)."""
    key = (_device_key(), int(blocks), np.dtype(dtype).str)
    if key not in _SINGLE_PASS_BUFFERS:
        _SINGLE_PASS_BUFFERS[key] = (cuda.device_array(blocks, dtype=dtype),
                                     cuda.to_device(np.zeros(1, dtype=np.int32)))
    return _SINGLE_PASS_BUFFERS[key]


def _device_key():
    try:
        return cuda.get_current_device().id
    except Exception:  # noqa: BLE001 - the simulator's fake device may have no id
        return 0


PTX_SIGNATURES = {
    "reduce8": "void(float32[::1], float32[::1], int32[::1], float32[::1])",
    "reduce8_x4": "void(int32[::1], int32[::1], int32[::1], int32[::1])",
}
