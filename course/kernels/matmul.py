"""Lesson 04 - matrix multiply C = A @ B, following the lecture's v1, v1.5, v2 and v3.

CSE/DSC 291 Deep Learning Systems (UCSD), "Case study: matmul on GPU":
- v1   one thread per C element                     global reads 2 N^3
- v1.5 each thread a V x V tile of C (thread tiling)  global reads N^3 / V + N^3
- v2   V x V tile by outer products in registers      global reads 2 N^3 / V
- v3   a block computes an L x L tile, stepping over K by S with cooperative fetching into
       shared sA[S][L], sB[S][L]; each thread a V x V register tile
                                                     global 2 N^3 / L, shared 2 N^3 / V
Float32 throughout; every kernel guards rows/columns past the edge, so any M x K @ K x N
works.  Tile sizes are compile-time constants (register arrays need them): each
``make_*`` compiles a kernel for one setting; the module-level kernels use the defaults.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float32

from ..sim.counting import counting, counting_shared, in_simulator
from . import matmul_tuned
from .matmul_tuned import (  # noqa: F401 - re-exported
    MIN_BLOCKS_DEFAULT,
    TUNED_DEFAULT,
    V4_DEFAULT,
    V4_MIN_BLOCKS,
    v3_tuned_invalid,
    v4_invalid,
)

THREADS = (16, 16)                    # threads per block (x, y) for v1, v1.5, v2
V_DEFAULT = 4                         # the lecture's register tile for v1.5 / v2
KC = 16                               # v1.5: the lecture's row buffer a[N], streamed KC at a time
L_DEFAULT, V3_DEFAULT, S_DEFAULT = 128, 8, 4   # v3: best of the H200 sweep (22.3 TFLOP/s at 4096)
SA_PAD = 4                            # extra columns in sA: its transposed stores avoid bank conflicts


@cuda.jit
def matmul_v1(A, B, C):
    # Thread (x, y) owns C[y, x]; A, B, C in global memory; 2K global reads per thread.
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x    # column of C
    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y    # row of C
    if y < C.shape[0] and x < C.shape[1]:
        result = float32(0.0)
        for k in range(A.shape[1]):
            result += A[y, k] * B[k, x]
        C[y, x] = result


def make_v1_5(V, KC):
    """v1.5 for one register-tile size V (and row-buffer chunk KC)."""

    @cuda.jit
    def matmul_v1_5(A, B, C):
        # Thread (xbase, ybase) owns the V x V tile C[ybase*V : ybase*V+V, xbase*V : xbase*V+V].
        # For each of its V rows it streams the row of A through a[KC] (registers) and
        # re-reads a column of B from global memory for each of its V columns.
        xbase = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        ybase = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        c = cuda.local.array((V, V), float32)
        a = cuda.local.array(KC, float32)
        for y in range(V):
            for x in range(V):
                c[y, x] = float32(0.0)
        for y in range(V):
            row = ybase * V + y
            if row < M:
                for k0 in range(0, K, KC):
                    for kk in range(KC):                  # a[:] = A[row, k0 : k0 + KC]
                        a[kk] = A[row, k0 + kk] if k0 + kk < K else float32(0.0)
                    for x in range(V):
                        col = xbase * V + x
                        if col < N:
                            for kk in range(KC):
                                if k0 + kk < K:
                                    c[y, x] += a[kk] * B[k0 + kk, col]
        for y in range(V):
            for x in range(V):
                if ybase * V + y < M and xbase * V + x < N:
                    C[ybase * V + y, xbase * V + x] = c[y, x]

    return matmul_v1_5


def make_v2(V):
    """v2 for one register-tile size V."""

    @cuda.jit
    def matmul_v2(A, B, C):
        # Thread (xbase, ybase) owns the V x V tile C[ybase*V : +V, xbase*V : +V]; for each k
        # it loads V values of A's column and V of B's row (registers) and adds their outer
        # product to c: 2V global reads per k instead of 2V^2.
        xbase = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        ybase = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        c = cuda.local.array((V, V), float32)
        a = cuda.local.array(V, float32)
        b = cuda.local.array(V, float32)
        for y in range(V):
            for x in range(V):
                c[y, x] = float32(0.0)
        for k in range(K):
            for y in range(V):
                a[y] = A[ybase * V + y, k] if ybase * V + y < M else float32(0.0)
            for x in range(V):
                b[x] = B[k, xbase * V + x] if xbase * V + x < N else float32(0.0)
            for y in range(V):
                for x in range(V):
                    c[y, x] += a[y] * b[x]
        for y in range(V):
            for x in range(V):
                if ybase * V + y < M and xbase * V + x < N:
                    C[ybase * V + y, xbase * V + x] = c[y, x]

    return matmul_v2


def make_v3(L, V, S):
    """v3 for one (L, V, S): (L/V)^2 threads per block, shared sA[S][L + pad], sB[S][L]."""
    T = L // V                     # threads along each side of the block
    NT = T * T                     # threads per block
    LP = L + SA_PAD                # sA's row length (numba needs shapes as plain constants)

    @cuda.jit
    def matmul_v3(A, B, C):
        # Block (bx, by) owns the L x L tile of C at (by*L, bx*L); thread (tx, ty) owns the
        # V x V elements C[by*L + ty + y*T, bx*L + tx + x*T] (strided by T, so a warp's shared
        # reads and its stores to C touch consecutive addresses).  sA, sB: shared memory;
        # c, a, b: registers; A, B, C: global memory.
        sA = cuda.shared.array((S, LP), float32)   # sA[k, row]: the A tile, transposed
        sB = cuda.shared.array((S, L), float32)         # sB[k, col]
        c = cuda.local.array((V, V), float32)
        a = cuda.local.array(V, float32)
        b = cuda.local.array(V, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * T + tx
        row0, col0 = cuda.blockIdx.y * L, cuda.blockIdx.x * L
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        for y in range(V):
            for x in range(V):
                c[y, x] = float32(0.0)
        for ko in range(0, K, S):
            # cooperative fetching: NT threads copy the S x L tiles, consecutive threads
            # reading consecutive addresses of A (along k) and of B (along columns)
            for f in range(L * S // NT):
                e = f * NT + tid
                r, kk = e // S, e % S
                inside = row0 + r < M and ko + kk < K
                sA[kk, r] = A[row0 + r, ko + kk] if inside else float32(0.0)
                kk, cc = e // L, e % L
                inside = ko + kk < K and col0 + cc < N
                sB[kk, cc] = B[ko + kk, col0 + cc] if inside else float32(0.0)
            cuda.syncthreads()              # the tiles are complete before anyone uses them
            for ki in range(S):
                for y in range(V):
                    a[y] = sA[ki, ty + y * T]
                for x in range(V):
                    b[x] = sB[ki, tx + x * T]
                for y in range(V):
                    for x in range(V):
                        c[y, x] += a[y] * b[x]
            cuda.syncthreads()              # everyone is done before the next tiles overwrite
        for y in range(V):
            for x in range(V):
                row, col = row0 + ty + y * T, col0 + tx + x * T
                if row < M and col < N:
                    C[row, col] = c[y, x]

    return matmul_v3


matmul_v1_5 = make_v1_5(V_DEFAULT, KC)
matmul_v2 = make_v2(V_DEFAULT)
matmul_v3 = make_v3(L_DEFAULT, V3_DEFAULT, S_DEFAULT)

_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
PTX_SIGNATURES = {name: _SIG for name in ("matmul_v1", "matmul_v1_5", "matmul_v2", "matmul_v3")}


@functools.cache
def kernel_v1_5(V: int):
    return matmul_v1_5 if V == V_DEFAULT else make_v1_5(V, KC)


@functools.cache
def kernel_v2(V: int):
    return matmul_v2 if V == V_DEFAULT else make_v2(V)


@functools.cache
def kernel_v3(L: int, V: int, S: int):
    if (L, V, S) == (L_DEFAULT, V3_DEFAULT, S_DEFAULT):
        return matmul_v3
    return make_v3(L, V, S)


# ---------------------------------------------------------------------------------------
# which (L, V, S) are valid

MAX_REGS_PER_THREAD = 255


def v3_resources(L: int, V: int, S: int) -> dict:
    """What one v3 block asks for: threads, static shared bytes, ~registers for c, a, b."""
    return {"threads": (L // V) ** 2, "shared_bytes": 4 * S * (2 * L + SA_PAD),
            "tile_registers": V * V + 2 * V}


def v3_invalid(L: int, V: int, S: int) -> str | None:
    """Why (L, V, S) cannot run (a sentence), or None when it is a valid setting."""
    if L % V:
        return f"V = {V} must divide L = {L} (each thread owns V x V of the L x L tile)"
    r = v3_resources(L, V, S)
    if r["threads"] > 1024:
        return f"(L/V)^2 = {r['threads']} threads per block > 1024, the hardware limit"
    if (L * S) % r["threads"]:
        return (f"the S x L = {S * L} tile elements do not split evenly over "
                f"{r['threads']} threads (cooperative fetching)")
    if r["shared_bytes"] > 48 * 1024:
        return f"{r['shared_bytes']} bytes of static shared memory > 48 KiB per block"
    if r["threads"] * (r["tile_registers"] + 48) > 65536:
        return (f"{r['threads']} threads x ~{r['tile_registers'] + 48} registers (V^2 + 2V for "
                "the tile, ~48 for indices and addresses) > the 65,536 registers of an SM")
    if r["tile_registers"] > 160:
        return (f"V^2 + 2V = {r['tile_registers']} registers just for the tile: with indices "
                f"and addresses that passes the {MAX_REGS_PER_THREAD} per thread")
    return None


# ---------------------------------------------------------------------------------------
# host side

def launch(variant: str, d_A, d_B, d_C, *, V: int | None = None, L: int = L_DEFAULT,
           S: int = S_DEFAULT, threads=THREADS, tile: tuple | None = None,
           min_blocks: int | None = None):
    """Launch one variant on device arrays (C = A @ B; C is M x N).  ``tile`` and
    ``min_blocks`` are v3_tuned's and v4's (BM, BN, BK, TM, TN) and blocks per SM
    (:mod:`course.kernels.matmul_tuned`)."""
    M, N = d_C.shape
    tx, ty = threads
    if variant == "v1_naive":
        matmul_v1[(math.ceil(N / tx), math.ceil(M / ty)), (tx, ty)](d_A, d_B, d_C)
    elif variant in ("v1_5_thread_tile", "v2_register_outer"):
        V = V or V_DEFAULT
        k = kernel_v1_5(V) if variant == "v1_5_thread_tile" else kernel_v2(V)
        k[(math.ceil(N / (tx * V)), math.ceil(M / (ty * V))), (tx, ty)](d_A, d_B, d_C)
    elif variant == "v3_shared_tiled":
        V = V or V3_DEFAULT
        why = v3_invalid(L, V, S)
        if why:
            raise ValueError(f"invalid v3 setting L={L}, V={V}, S={S}: {why}")
        kernel_v3(L, V, S)[(math.ceil(N / L), math.ceil(M / L)), (L // V, L // V)](d_A, d_B, d_C)
    elif variant in TUNED_VARIANTS:
        matmul_tuned.launch(variant, d_A, d_B, d_C, tile=tile, min_blocks=min_blocks)
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from "
                         f"{sorted(VARIANTS) + sorted(TUNED_VARIANTS)}")


def _validate(A, B):
    A = np.ascontiguousarray(A, dtype=np.float32)
    B = np.ascontiguousarray(B, dtype=np.float32)
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"A and B must be 2-D; got shapes {A.shape} and {B.shape}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"shapes {A.shape} and {B.shape} do not chain: A's columns must "
                         "equal B's rows")
    if 0 in A.shape or 0 in B.shape:
        raise ValueError(f"empty matrix: shapes {A.shape} and {B.shape}")
    return A, B


def _host(variant):
    def run(A, B, **launch_settings):
        A, B = _validate(A, B)
        d_A, d_B = cuda.to_device(A), cuda.to_device(B)
        d_C = cuda.device_array((A.shape[0], B.shape[1]), dtype=np.float32)
        launch(variant, d_A, d_B, d_C, **launch_settings)
        return d_C.copy_to_host()
    run.__name__ = f"matmul_{variant}"
    run.__doc__ = (f"A @ B (float32) by the {variant!r} kernel; launch settings "
                   "(V, L, S, threads; tile, min_blocks for v3_tuned) as keywords.")
    return run


VARIANTS = {name: _host(name) for name in
            ("v1_naive", "v1_5_thread_tile", "v2_register_outer", "v3_shared_tiled")}
# v3 tuned for the GPU (double-buffered shared tiles, register prefetch, launch bounds):
# the same contract, kept beside VARIANTS so the notebook's per-version tables stay the lecture's
TUNED_VARIANTS = {"v3_tuned": _host("v3_tuned"), "v4": _host("v4")}


def reference(A, B):
    """A @ B in float64."""
    return np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64)


def tolerance(K: int) -> tuple[float, float]:
    """(rtol, atol) for a float32 K-term dot product of values in [-1, 1] vs float64."""
    return 1e-5, 4e-7 * K ** 0.5 * 8 + 1e-6


def inputs(M: int, K: int | None = None, N: int | None = None, seed: int = 0):
    """Random float32 A (M x K) and B (K x N) in [-1, 1), their device copies and a device
    C: ``(A, B, d_A, d_B, d_C)``; ``inputs(n)`` is the square N x N case the notebook's
    tables, its slider panel and the benchmark time."""
    K = M if K is None else K
    N = M if N is None else N
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    return A, B, cuda.to_device(A), cuda.to_device(B), cuda.device_array((M, N), np.float32)


def flops(M: int, N: int, K: int) -> int:
    """2 M N K floating-point operations (one multiply and one add per term)."""
    return 2 * M * N * K


# ---------------------------------------------------------------------------------------
# the lecture's traffic formulas, and counted reads

def formulas(n: int, V: int, L: int) -> dict:
    """The lecture's global (and v3 shared) reads for N x N matrices, in elements."""
    return {"v1_naive": {"global": 2 * n ** 3},
            "v1_5_thread_tile": {"global": n ** 3 // V + n ** 3},
            "v2_register_outer": {"global": 2 * n ** 3 // V},
            "v3_shared_tiled": {"global": 2 * n ** 3 // L, "shared": 2 * n ** 3 // V}}


def count_reads(variant: str, n: int, V: int | None = None, L: int = 16, S: int = 4,
                threads=(4, 4)) -> dict:
    """Run ``variant`` on N x N inputs in the simulator and count element reads of A and B
    (global) and of shared arrays.  Simulator only: see :func:`count_reads_anywhere`."""
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    B = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    reads = [0]
    d_A, d_B = counting(A, reads), counting(B, reads)
    d_C = cuda.device_array((n, n), dtype=np.float32)
    with counting_shared() as sh:
        launch(variant, d_A, d_B, d_C, V=V, L=L, S=S, threads=tuple(threads))
    ok = bool(np.allclose(d_C.copy_to_host(), reference(A, B), rtol=1e-4, atol=1e-4))
    return {"global": reads[0], "shared": sh.reads[0], "correct": ok}


def count_reads_anywhere(variant: str, n: int, **settings) -> dict:
    """:func:`count_reads`, in a simulator subprocess when this process drives a GPU."""
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}
    return in_simulator(__name__, "count_reads", variant=variant, n=n, **settings)
