"""Lesson 02 - parallel reduction: the lecture's kernels 1-4, then on to the bandwidth limit.

Follows CSE P 524 (UW, Andrew Lumsdaine), Lecture 9, "PRAM -> CUDA" and "Reduction #1..4"
(after Mark Harris's *Optimizing Parallel Reduction in CUDA*): the sum of 2^22 ints on a
G80, from 8.054 ms (kernel 1) to 0.965 ms (kernel 4).  Kernels 5-7 are the classic
continuation, written the way that is correct on GPUs since Volta (sm_70); kernel 8 is
kernel 7 in a single launch with no memset (kernels 5-7 in ``reduction_beyond.py``, 8 in
``reduction_single_pass.py``: the "last block" pattern of CUDA's threadFenceReduction
sample, used by library reductions).

Names follow the lecture: ``g_idata`` (input, global memory), ``g_odata`` (one partial sum
per block, global memory), ``sdata`` (the block's scratch array, shared memory), ``tid``.
Every kernel here works for int32 and float32 and for any length n: elements past the
end count as 0.  Threads per block must be a power of two (the tree halves it).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..platform import runtime
from .reduction_beyond import reduce5, reduce6, reduce7
from .reduction_single_pass import (  # noqa: F401 - re-exported
    SINGLE_PASS_KERNELS,
    block_sum,
    reduce8,
    reduce8_x4,
    single_pass_buffers,
)

# ---------------------------------------------------------------------------------------
# the PRAM sum translated literally: wrong on purpose (not in VARIANTS)

@cuda.jit
def reduce_global_inplace(B):
    # WRONG ON PURPOSE.  Thread i owns B[i]; B lives in global memory and is summed in
    # place into B[0].  At step s thread i reads B[i + s], which thread i + s (possibly in
    # another warp or block) may not have finished writing: no barrier orders the steps.
    i = cuda.grid(1)
    n = B.size
    s = 1
    while s < n:
        if i % (2 * s) == 0 and i + s < n:
            B[i] += B[i + s]
        s *= 2


# ---------------------------------------------------------------------------------------
# the lecture's kernels 1-4: one partial sum per block into g_odata[blockIdx.x]

@cuda.jit
def reduce1(g_idata, g_odata):
    # Kernel 1: interleaved addressing with divergent branching.
    # Thread tid owns element i of g_idata (global) and slot tid of sdata (shared).
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    else:
        sdata[tid] = 0                      # past the end: adds nothing
    cuda.syncthreads()

    s = 1
    while s < cuda.blockDim.x:
        if tid % (2 * s) == 0:              # active threads are scattered over all warps
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s *= 2

    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def reduce2(g_idata, g_odata):
    # Kernel 2: interleaved addressing with a strided index: no divergence, bank conflicts.
    # Thread tid owns element i of g_idata (global); at step s it adds sdata[2*s*tid + s].
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    else:
        sdata[tid] = 0
    cuda.syncthreads()

    s = 1
    while s < cuda.blockDim.x:
        index = 2 * s * tid                 # active threads are contiguous: 0, 1, 2, ...
        if index < cuda.blockDim.x:
            sdata[index] += sdata[index + s]
        cuda.syncthreads()
        s *= 2

    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def reduce3(g_idata, g_odata):
    # Kernel 3: sequential addressing: conflict-free, but half the threads idle at once.
    # Thread tid owns element i of g_idata (global); at step s it adds sdata[tid + s].
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    else:
        sdata[tid] = 0
    cuda.syncthreads()

    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1

    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def reduce4(g_idata, g_odata):
    # Kernel 4: first add during the global load; each block covers 2 * blockDim elements.
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
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1

    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


PTX_SIGNATURES = {
    "reduce_global_inplace": "void(int32[::1])",
    "reduce1": "void(int32[::1], int32[::1])",
    "reduce2": "void(int32[::1], int32[::1])",
    "reduce3": "void(int32[::1], int32[::1])",
    "reduce4": "void(float32[::1], float32[::1])",
}

# ---------------------------------------------------------------------------------------
# host side

# variant -> (kernel, elements each block covers per thread, smallest threads per block)
KERNELS = {
    "interleaved_divergent": (reduce1, 1, 2),
    "interleaved_bank_conflicts": (reduce2, 1, 2),
    "sequential": (reduce3, 1, 2),
    "first_add_during_load": (reduce4, 2, 2),
    "unroll_last_warp": (reduce5, 2, 64),
    "warp_shuffle": (reduce6, 2, 32),
    "grid_stride": (reduce7, None, 2),
    "single_pass": (reduce8, None, 32),
}
WARP_VARIANTS = ("unroll_last_warp", "warp_shuffle", "single_pass")   # need syncwarp / shfl
DTYPES = (np.dtype(np.int32), np.dtype(np.float32))
DEFAULT_ELEMENTS_PER_THREAD = 32   # kernels 7, 8: set the grid, blocks = n / (tpb * this)

# The lecture's table (CSE P 524, Lecture 9): 2^22 int32 on a G80; time in ms.
LECTURE_TABLE = {
    "interleaved_divergent": {"G80": 8.054},
    "interleaved_bank_conflicts": {"G80": 3.456},
    "sequential": {"G80": 1.722},
    "first_add_during_load": {"G80": 0.965},
}
LECTURE_GBPS = {"interleaved_divergent": 2.083, "interleaved_bank_conflicts": 4.854,
                "sequential": 9.741, "first_add_during_load": 17.377}


def check_launch(variant: str, threads_per_block: int) -> str | None:
    """Why ``threads_per_block`` is invalid for ``variant`` (None when it is fine)."""
    if variant not in KERNELS:
        return f"unknown variant {variant!r}; choose from {list(KERNELS)}"
    low = KERNELS[variant][2]
    t = threads_per_block
    if not isinstance(t, (int, np.integer)) or t < low or t > 1024 or t & (t - 1):
        return (f"{variant} needs threads_per_block a power of two in [{low}, 1024], "
                f"got {t!r}")
    return None


class Reducer:
    """Device buffers and launches for one variant, size and dtype.

    ``r(d_x)`` only enqueues device work and returns a 1-element device array holding the
    sum (kernels 1-6: the same kernel again on the partial sums until one is left;
    kernel 7: a memset and one launch with atomics; kernel 8: one launch, no memset).
    """

    def __init__(self, variant: str, n: int, dtype, threads_per_block: int = 256,
                 elements_per_thread: int | None = None, loads_in_flight: int = 8):
        why = check_launch(variant, threads_per_block)
        if why:
            raise ValueError(why)
        if n < 1:
            raise ValueError("nothing to sum: n must be >= 1")
        self.variant, self.n, self.dtype = variant, int(n), np.dtype(dtype)
        self.tpb = int(threads_per_block)
        self.kernel, per_thread, _ = KERNELS[variant]
        self.shared = self.tpb * self.dtype.itemsize          # dynamic shared memory, bytes
        if per_thread is None:                                 # kernels 7, 8: one launch
            ept = elements_per_thread or DEFAULT_ELEMENTS_PER_THREAD
            self.elements_per_thread = ept
            blocks = math.ceil(self.n / (self.tpb * ept))
            self.stages = [(blocks, None)]
            self.out = cuda.device_array(1, dtype=self.dtype)
            self.single_pass = variant == "single_pass"
            if self.single_pass:                               # kernel 8: static shared only
                if loads_in_flight not in SINGLE_PASS_KERNELS:
                    raise ValueError(f"loads_in_flight must be one of "
                                     f"{sorted(SINGLE_PASS_KERNELS)}, got {loads_in_flight!r}")
                self.kernel = SINGLE_PASS_KERNELS[loads_in_flight]
                self.shared = 0
                self.partials, self.count = single_pass_buffers(blocks, self.dtype)
            return
        self.stages, m = [], self.n                            # (blocks, partials buffer)
        while m > 1 or not self.stages:
            blocks = math.ceil(m / (self.tpb * per_thread))
            self.stages.append((blocks, cuda.device_array(blocks, dtype=self.dtype)))
            m = blocks

    @property
    def launches(self) -> int:
        return len(self.stages)

    def __call__(self, d_x):
        if self.stages[0][1] is None and self.single_pass:     # kernel 8: one launch
            self.kernel[self.stages[0][0], self.tpb](d_x, self.partials, self.count, self.out)
            return self.out
        if self.stages[0][1] is None:                          # kernel 7
            _zero(self.out)
            self.kernel[self.stages[0][0], self.tpb, 0, self.shared](d_x, self.out)
            return self.out
        src = d_x
        for blocks, dst in self.stages:
            self.kernel[blocks, self.tpb, 0, self.shared](src, dst)
            src = dst
        return src


def _zero(d_out) -> None:
    """Set a small device array to 0 without a kernel launch."""
    if runtime.MODE == "gpu":
        from numba.cuda.cudadrv import driver

        driver.device_memset(d_out, 0, d_out.nbytes)
    else:
        d_out.copy_to_device(np.zeros(d_out.shape, d_out.dtype))


def _validate(x) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.ndim != 1:
        x = x.ravel()
    if x.dtype not in DTYPES:
        raise TypeError(f"sum of {x.dtype} is not offered: use int32 or float32")
    if x.size == 0:
        raise ValueError("x is empty: nothing to sum")
    return x


def _host(variant):
    def run(x, threads_per_block: int = 256, elements_per_thread: int | None = None,
            **options):
        x = _validate(x)
        r = Reducer(variant, x.size, x.dtype, threads_per_block, elements_per_thread,
                    **options)
        return r(cuda.to_device(x)).copy_to_host()[0]
    run.__name__ = f"sum_{variant}"
    run.__doc__ = (f"Sum of a 1-D int32/float32 array by the {variant!r} kernel (numpy in, "
                   "a numpy scalar of the same dtype out; int32 wraps around like C).")
    return run


VARIANTS = {name: _host(name) for name in KERNELS}


def reference(x):
    """The exact sum for integers (int64), the float64 sum for floats."""
    x = np.asarray(x)
    return np.sum(x, dtype=np.int64 if x.dtype.kind in "iu" else np.float64)


def naive_inplace_sum(x, threads_per_block: int = 256):
    """Run the wrong in-place global-memory kernel; returns what it leaves in B[0]."""
    x = _validate(x)
    d = cuda.to_device(x)
    reduce_global_inplace[math.ceil(x.size / threads_per_block), threads_per_block](d)
    return d.copy_to_host()[0]


_WARP_OK = None


def warp_intrinsics_available() -> bool:
    """True on a GPU, and in the simulator once course.sim.warp provides shuffles/syncwarp."""
    global _WARP_OK
    if runtime.MODE == "gpu":
        return True
    if _WARP_OK is None:
        try:
            x = np.arange(1, 101, dtype=np.int32)
            _WARP_OK = bool(VARIANTS["warp_shuffle"](x, threads_per_block=32) == 5050 and
                            VARIANTS["unroll_last_warp"](x, threads_per_block=64) == 5050)
        except Exception:  # noqa: BLE001 - the simulator has no such intrinsics yet
            _WARP_OK = False
    return _WARP_OK
