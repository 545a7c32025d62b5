"""Lesson 03 - window average (conv1d): global reads, a shared ``support`` array, constant weights.

Follows CSE/DSC 291 Deep Learning Systems (UCSD), "GPU and CUDA basics": the CPU loop
``output[i] = (input[i] + input[i+1] + input[i+2]) / 3`` for N = 1024 * 1024 outputs and
an input of N + 2, then GPU v1 (three global reads per thread) and GPU v2 (a block loads
THREADS_PER_BLK + 2 inputs once into shared memory).  The constant-memory variant follows
the CS 483 GPT-2 final report (Req 6: layernorm weights in ``__constant__`` memory).

The shared kernels use THREADS_PER_BLK as a compile-time constant, exactly as the lecture's
``#define``; :func:`make_shared_kernels` compiles them for another block size (the slider).
"""
from __future__ import annotations

import functools
import math
import threading

import numpy as np
from numba import cuda, float32

from ..sim.counting import CountingArray, counting, counting_shared, in_simulator  # noqa: F401

THREADS_PER_BLK = 128                                  # the lecture's #define
WEIGHTS = np.full(3, 1.0 / 3.0, dtype=np.float32)      # lives in constant memory below


@cuda.jit
def convolve_global(N, input, output):
    # v1: thread `index` owns output[index]; three reads of input, all from global memory.
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if index < N:                       # guard: N need not be a multiple of the block
        result = float32(0.0)
        for i in range(3):
            result += input[index + i]
        output[index] = result / float32(3.0)


@cuda.jit
def convolve_global_x4(N, input, output):
    # v1 with more reads in flight: thread g owns output[g], output[g + T], output[g + 2T] and
    # output[g + 3T] (T = all threads of the grid), then jumps by 4T.  All reads go to global
    # memory; neighbouring threads share inputs through the L1 cache.
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    T = cuda.blockDim.x * cuda.gridDim.x
    while i + 3 * T < N:
        a0, a1, a2 = input[i], input[i + 1], input[i + 2]
        b0, b1, b2 = input[i + T], input[i + T + 1], input[i + T + 2]
        c0, c1, c2 = input[i + 2 * T], input[i + 2 * T + 1], input[i + 2 * T + 2]
        d0, d1, d2 = input[i + 3 * T], input[i + 3 * T + 1], input[i + 3 * T + 2]
        output[i] = (a0 + a1 + a2) / float32(3.0)
        output[i + T] = (b0 + b1 + b2) / float32(3.0)
        output[i + 2 * T] = (c0 + c1 + c2) / float32(3.0)
        output[i + 3 * T] = (d0 + d1 + d2) / float32(3.0)
        i += 4 * T
    while i < N:                        # the last partial round
        output[i] = (input[i] + input[i + 1] + input[i + 2]) / float32(3.0)
        i += T


def make_shared_kernels(THREADS_PER_BLK):
    """The two shared-memory kernels compiled for one block size (a compile-time constant)."""
    SUPPORT_LEN = THREADS_PER_BLK + 2    # numba needs the shape as one constant, not an expression

    @cuda.jit
    def convolve_shared(N, input, output):
        # v2: thread `index` owns output[index]; the block first copies its THREADS_PER_BLK + 2
        # inputs from global memory into `support` (shared memory), once each.
        index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        tx = cuda.threadIdx.x
        support = cuda.shared.array(SUPPORT_LEN, float32)   # per-block: THREADS_PER_BLK + 2
        if index < N + 2:
            support[tx] = input[index]
        if tx < 2 and index + THREADS_PER_BLK < N + 2:               # the halo: two more inputs
            support[THREADS_PER_BLK + tx] = input[index + THREADS_PER_BLK]
        cuda.syncthreads()                  # every load is done before anyone reads support
        if index < N:
            result = float32(0.0)
            for i in range(3):
                result += support[tx + i]
            output[index] = result / float32(3.0)

    @cuda.jit
    def convolve_shared_const(N, input, output):
        # v2 with the three weights in constant memory (read through the constant cache,
        # one broadcast per warp); thread `index` owns output[index].
        weights = cuda.const.array_like(WEIGHTS)
        index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        tx = cuda.threadIdx.x
        support = cuda.shared.array(SUPPORT_LEN, float32)
        if index < N + 2:
            support[tx] = input[index]
        if tx < 2 and index + THREADS_PER_BLK < N + 2:
            support[THREADS_PER_BLK + tx] = input[index + THREADS_PER_BLK]
        cuda.syncthreads()
        if index < N:
            result = float32(0.0)
            for i in range(3):
                result += weights[i] * support[tx + i]
            output[index] = result

    return convolve_shared, convolve_shared_const


convolve_shared, convolve_shared_const = make_shared_kernels(THREADS_PER_BLK)


def make_shared_x4_kernel(THREADS_PER_BLK):
    """v2 with 4 loads in flight per thread, compiled for one block size."""
    TILE = 4 * THREADS_PER_BLK           # outputs per block and round
    SUPPORT_X4_LEN = TILE + 2            # one constant, as numba needs

    @cuda.jit
    def convolve_shared_x4(N, input, output):
        # v2 with more bytes in flight: a block owns a tile of 4 * THREADS_PER_BLK outputs and
        # stages its 4 * THREADS_PER_BLK + 2 inputs in `support`.  Each thread issues its 4
        # coalesced loads (a, b, c, d) before the first use, then computes 4 outputs.
        # Grid-stride: the block then jumps gridDim.x tiles further on.
        tx = cuda.threadIdx.x
        support = cuda.shared.array(SUPPORT_X4_LEN, float32)
        start = cuda.blockIdx.x * TILE
        while start < N:
            i = start + tx
            a = input[i] if i < N + 2 else float32(0.0)
            b = input[i + THREADS_PER_BLK] if i + THREADS_PER_BLK < N + 2 else float32(0.0)
            c = input[i + 2 * THREADS_PER_BLK] if i + 2 * THREADS_PER_BLK < N + 2 else float32(0.0)
            d = input[i + 3 * THREADS_PER_BLK] if i + 3 * THREADS_PER_BLK < N + 2 else float32(0.0)
            support[tx] = a
            support[tx + THREADS_PER_BLK] = b
            support[tx + 2 * THREADS_PER_BLK] = c
            support[tx + 3 * THREADS_PER_BLK] = d
            if tx < 2 and i + TILE < N + 2:                # the halo: two more inputs
                support[TILE + tx] = input[i + TILE]
            cuda.syncthreads()              # the whole tile is loaded before anyone reads it
            for k in range(4):
                j = tx + k * THREADS_PER_BLK
                if start + j < N:
                    output[start + j] = (support[j] + support[j + 1] + support[j + 2]) / float32(3.0)
            cuda.syncthreads()              # everyone is done with support before it is refilled
            start += cuda.gridDim.x * TILE

    return convolve_shared_x4


convolve_shared_x4 = make_shared_x4_kernel(THREADS_PER_BLK)

_LOCK = threading.Lock()


@functools.cache
def _shared_kernels(threads_per_blk: int):
    if threads_per_blk == THREADS_PER_BLK:
        return convolve_shared, convolve_shared_const
    return make_shared_kernels(threads_per_blk)


@functools.cache
def _shared_x4_kernel(threads_per_blk: int):
    if threads_per_blk == THREADS_PER_BLK:
        return convolve_shared_x4
    return make_shared_x4_kernel(threads_per_blk)


@functools.cache
def _sm_count() -> int:
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


PTX_SIGNATURES = {name: "void(int64, float32[::1], float32[::1])"
                  for name in ("convolve_global", "convolve_global_x4", "convolve_shared",
                               "convolve_shared_const", "convolve_shared_x4")}


# ---------------------------------------------------------------------------------------
# host side

def cpu_loop(input):
    """The lecture's CPU loop, in plain Python (slow: for small inputs only)."""
    output = np.empty(len(input) - 2, dtype=np.float32)
    for i in range(len(input) - 2):
        output[i] = (input[i] + input[i + 1] + input[i + 2]) / np.float32(3.0)
    return output


def launch(variant: str, n: int, d_input, d_output, threads_per_block: int = THREADS_PER_BLK,
           blocks: int | None = None):
    """Launch one variant on device arrays (d_input has n + 2 elements, d_output n).

    ``blocks``: the grid of the grid-stride variants (global_x4, shared_x4); by default
    :func:`default_blocks`.  The other variants always get one thread per output."""
    if variant == "global":
        convolve_global[math.ceil(n / threads_per_block), threads_per_block](n, d_input, d_output)
    elif variant == "global_x4":       # a grid sized for the device, not for the data
        blocks = blocks or default_blocks(variant, n, threads_per_block)
        convolve_global_x4[blocks, threads_per_block](n, d_input, d_output)
    elif variant == "shared_x4":
        blocks = blocks or default_blocks(variant, n, threads_per_block)
        _shared_x4_kernel(threads_per_block)[blocks, threads_per_block](n, d_input, d_output)
    elif variant in ("shared", "shared_const_weights"):
        shared, shared_const = _shared_kernels(threads_per_block)
        kernel = shared if variant == "shared" else shared_const
        kernel[math.ceil(n / threads_per_block), threads_per_block](n, d_input, d_output)
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")


def default_blocks(variant: str, n: int, threads_per_block: int) -> int:
    """The grid of a grid-stride variant: at most GRID_THREADS_PER_SM threads per SM on a GPU,
    and at most 2 blocks in the simulator (so that every block runs its loop more than once)."""
    per_block = 4 * threads_per_block                      # outputs per block and round
    needed = max(1, math.ceil(n / per_block))
    if not _on_gpu():
        return min(needed, 2)
    return min(needed, max(1, GRID_THREADS_PER_SM[variant] * _sm_count() // threads_per_block))


# threads per SM of the grid-stride variants' default grids (from the sweep in bench/window.py)
GRID_THREADS_PER_SM = {"global_x4": 4096, "shared_x4": 4096}


def _on_gpu() -> bool:
    from ..platform import runtime

    return runtime.MODE == "gpu"


def _validate(x, threads_per_block):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 1 or x.size < 3:
        raise ValueError(f"x must be a 1-D array of at least 3 elements; got shape {x.shape}")
    if not (1 <= threads_per_block <= 1024):
        raise ValueError(f"threads_per_block must be in 1..1024, not {threads_per_block}")
    return x


def _host(variant):
    def run(x, threads_per_block: int = THREADS_PER_BLK):
        x = _validate(x, threads_per_block)
        n = x.size - 2
        d_in, d_out = cuda.to_device(x), cuda.device_array(n, dtype=np.float32)
        launch(variant, n, d_in, d_out, threads_per_block)
        return d_out.copy_to_host()
    run.__name__ = f"window_{variant}"
    run.__doc__ = f"y[i] = mean(x[i:i+3]) by the {variant!r} kernel (float32; len(y) = len(x) - 2)."
    return run


VARIANTS = {name: _host(name) for name in ("global", "shared", "shared_const_weights",
                                           "global_x4", "shared_x4")}


def reference(x):
    """mean(x[i:i+3]) for every i, in float64."""
    x = np.asarray(x, dtype=np.float64)
    return (x[:-2] + x[1:-1] + x[2:]) / 3.0


def moved_bytes(n: int) -> int:
    """The minimum traffic (bytes): read n + 2 floats once, write n floats."""
    return 4 * (2 * n + 2)


# ---------------------------------------------------------------------------------------
# counting reads: run a kernel in the simulator with arrays that count element reads
# (course/sim/counting.py; re-exported here for the notebook)

def count_block_reads(threads_per_blk: int = THREADS_PER_BLK) -> dict:
    """Global and shared reads of one block of v1 and v2 (simulator only; a GPU cannot count)."""
    from ..platform import runtime

    if runtime.MODE != "sim":
        raise RuntimeError("counting runs kernels in the simulator: use count_reads_anywhere")
    n = threads_per_blk
    x = np.random.default_rng(0).uniform(-1, 1, n + 2).astype(np.float32)
    out = {}
    for variant in ("global", "shared"):
        d_in = counting(x)
        d_out = cuda.device_array(n, dtype=np.float32)
        with counting_shared() as sh:
            launch(variant, n, d_in, d_out, threads_per_blk)
        out[variant] = {"global": d_in.reads[0], "shared": sh.reads[0]}
    return out


# ---------------------------------------------------------------------------------------
# what a compiled kernel asks of an SM (GPU only), and how many blocks fit

def block_resources(kernel, threads: int, dynamic_shared: int = 0) -> dict | None:
    """Per-block needs of an already-launched kernel, from numba's inspection (GPU only):
    threads, registers per thread, shared bytes, local bytes per thread, constant bytes.
    Returns None in the simulator, which compiles nothing and so has nothing to inspect."""
    from ..platform import runtime

    if runtime.MODE != "gpu":
        return None
    # kernel.get_regs_per_thread() & co. give one dict entry per compiled signature; we
    # read the (only) compiled specialization directly
    if not kernel.overloads:        # never launched yet: compile it for its PTX signature
        name = next(k for k, v in globals().items() if v is kernel)
        kernel.compile(PTX_SIGNATURES[name])
    compiled = next(iter(kernel.overloads.values()))
    return {"threads": threads,
            "registers_per_thread": compiled.regs_per_thread,
            "shared_bytes": compiled.shared_mem_per_block + dynamic_shared,
            "local_bytes_per_thread": compiled.local_mem_per_thread,
            "const_bytes": compiled.const_mem_size,
            "driver_blocks_per_sm": compiled.max_cooperative_grid_blocks(
                threads, dynamic_shared) // cuda.get_current_device().MULTIPROCESSOR_COUNT}


def blocks_per_sm(res: dict, dev: dict) -> dict:
    """How many blocks of ``res`` fit on one SM of ``dev`` (course.device_info()), per limit.

    Registers are given out per warp in units of 256; the smallest limit wins."""
    warps = -(-res["threads"] // dev["warp_size"])
    regs_per_warp = -(-res["registers_per_thread"] * dev["warp_size"] // 256) * 256
    shared = res["shared_bytes"] + 1024          # the driver reserves 1 KiB per block
    limits = {"blocks": dev["max_blocks_per_sm"] or 32,
              "threads": dev["max_threads_per_sm"] // res["threads"],
              "registers": (dev["max_regs_per_sm"] or 65536) // (regs_per_warp * warps),
              "shared memory": (dev["max_shared_per_sm"] or 0) // shared if shared else 10**9}
    limit = min(limits, key=limits.get)
    return {"per_limit": limits, "blocks_per_sm": limits[limit], "limited_by": limit}
