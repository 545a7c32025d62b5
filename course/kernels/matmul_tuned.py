"""Lesson 04, past the lecture - SGEMM kernels tuned for the GPU (float32 CUDA cores, no TF32).

- v3_tuned  v3 with two shared buffers, the next K tile prefetched into registers, launch
            bounds; each thread owns a strided TM x TN tile (scalar shared loads).
- v4        what the fast public SGEMM write-ups add: each thread owns its tile in runs of
            four consecutive rows / columns, so it feeds its registers with 16-byte shared
            loads (``load4``: one LDS.128 instead of four LDS.32), and the runs of a warp
            sit side by side so those loads are free of bank conflicts.

The kernels take any M x K @ K x N (edges are guarded when tiles are fetched and when C is
written).  :mod:`course.kernels.matmul` launches them; it holds the lecture's v1 -> v3.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
from numba import config, cuda, float32, uint64

from ..measure.pairs import unpack2

NOT_SHOWN = {"matmul_v3_tuned"}       # GPU tuning of v3; notebook 04 shows v4 instead
SHARED = 3                            # NVVM's address space of shared memory
TUNED_DEFAULT = (128, 128, 8, 8, 8)   # v3_tuned (BM, BN, BK, TM, TN): H200 sweep best, 27.2 TFLOP/s
MIN_BLOCKS_DEFAULT = 1                # v3_tuned launch bounds (it gets 127 registers: 2 blocks/SM)
V4_DEFAULT = (128, 128, 16, 8, 8)     # v4 (BM, BN, BK, TM, TN): H100 sweep best, 39.7 TFLOP/s
V4_MIN_BLOCKS = 2                     # v4 launch bounds: 128 registers, 2 blocks/SM

# ---------------------------------------------------------------------------------------
# load4: four float32 of a shared array in one 16-byte load

if config.ENABLE_CUDASIM:
    ALIGN = None                      # the simulator refuses an alignment (numpy arrays)

    def load4(array, i):
        """array[i : i + 4] as four floats (on a GPU: one ld.shared.v4.f32); of a float64
        array of float32 pairs (course/measure/pairs.py), the pairs in slots i and i + 1."""
        if array.dtype == np.float64:
            return (*unpack2(array[i]), *unpack2(array[i + 1]))
        return array[i], array[i + 1], array[i + 2], array[i + 3]

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    ALIGN = 16                        # shared arrays read by load4 must be 16-byte aligned

    @intrinsic
    def load4(typingctx, array, i):
        """array[i : i + 4] of a 16-byte aligned shared float32 array, i a multiple of 4:
        the element's address, marked as shared (address space 3), loaded as one
        <4 x float> vector - PTX ld.shared.v4.f32 - and unpacked into four floats.  Of a
        float64 array of float32 pairs (course/measure/pairs.py), i even: the pairs in slots i and
        i + 1, the same 16 bytes."""
        if not (isinstance(array, types.Array) and array.ndim == 1
                and array.dtype in (types.float32, types.float64)
                and isinstance(i, types.Integer)):
            return None                   # numba reports "no matching signature"

        def codegen(context, builder, signature, args):
            arr = context.make_array(array)(context, builder, value=args[0])
            index = context.cast(builder, args[1], i, types.intp)
            element = cgutils.get_item_pointer(context, builder, array, arr, [index],
                                               wraparound=False)
            vec = ir.VectorType(ir.FloatType(), 4)
            shared = builder.addrspacecast(builder.bitcast(element, vec.as_pointer()),
                                           vec.as_pointer(SHARED))
            value = builder.load(shared, align=16)
            parts = [builder.extract_element(value, ir.Constant(ir.IntType(32), k))
                     for k in range(4)]
            return context.make_tuple(builder, signature.return_type, parts)

        return types.UniTuple(types.float32, 4)(array, i), codegen


def bounds(threads: int, min_blocks: int) -> dict:
    """Launch bounds (threads per block, blocks per SM) for cuda.jit; the simulator has none."""
    ok = "launch_bounds" in inspect.signature(cuda.jit).parameters
    return {"launch_bounds": (threads, min_blocks)} if ok else {}


def make_v3_tuned(BM, BN, BK, TM, TN, min_blocks=2):
    """v3 tuned: a BM x BN block tile, K step BK, TM x TN per thread, (BM/TM)(BN/TN) threads;
    the next K tile is prefetched into registers while the current one is used from shared
    memory (two shared buffers: one syncthreads per K step); ``min_blocks`` blocks per SM
    are asked of the compiler (launch bounds: it caps registers per thread to fit)."""
    TY, TX = BM // TM, BN // TN    # threads along rows / columns of the block tile
    NT = TX * TY                   # threads per block
    PA = BM + 32 // BK             # sA row length: the transposed stores hit 32 banks
    SA, SB = BK * PA, BK * BN      # floats in one buffer of sA / sB
    LA, LB = BM * BK // NT, BK * BN // NT   # A / B tile elements each thread fetches
    RA, RB = NT // BK, NT // BN    # tile rows of A / of B one fetch round covers
    SA2, SB2 = 2 * SA, 2 * SB      # both buffers (numba needs shapes as plain constants)

    @cuda.jit(**bounds(NT, min_blocks))
    def matmul_v3_tuned(A, B, C):
        # Block (bx, by) owns the BM x BN tile of C at (by*BM, bx*BN); thread (tx, ty) owns
        # C[by*BM + ty + y*TY, bx*BN + tx + x*TX] for y < TM, x < TN.  Shared memory: two
        # buffers of sA[k*PA + row] (A tile, transposed) and sB[k*BN + col]; registers: c, a,
        # b and ra, rb (the next tile on its way from global memory); A, B, C: global memory.
        sA = cuda.shared.array(SA2, float32)
        sB = cuda.shared.array(SB2, float32)
        c = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        ra = cuda.local.array(LA, float32)
        rb = cuda.local.array(LB, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TX + tx
        ar, ak = tid // BK, tid % BK       # this thread fetches A[row0 + ar + f*RA, ko + ak]
        bk, bc = tid // BN, tid % BN       # and B[ko + bk + f*RB, col0 + bc]
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        for y in range(TM):
            for x in range(TN):
                c[y, x] = float32(0.0)
        ntiles = (K + BK - 1) // BK
        for t in range(ntiles + 1):
            # global -> registers: tile t (zeros past the edges and after the last tile)
            ko = t * BK
            for f in range(LA):
                r = row0 + ar + f * RA
                ra[f] = A[r, ko + ak] if r < M and ko + ak < K else float32(0.0)
            for f in range(LB):
                k = ko + bk + f * RB
                rb[f] = B[k, col0 + bc] if k < K and col0 + bc < N else float32(0.0)
            if t > 0:
                # registers and shared memory -> c: tile t - 1 from buffer (t - 1) % 2
                # unsigned indices: no negative-index wraparound code in the inner loop
                abase = uint64(((t - 1) & 1) * SA + ty)
                bbase = uint64(((t - 1) & 1) * SB + tx)
                for ki in range(BK):
                    for y in range(TM):
                        a[y] = sA[abase + uint64(ki * PA + y * TY)]
                    for x in range(TN):
                        b[x] = sB[bbase + uint64(ki * BN + x * TX)]
                    for y in range(TM):
                        for x in range(TN):
                            c[y, x] += a[y] * b[x]
            # registers -> shared buffer t % 2 (its last readers finished before the
            # previous syncthreads), then one syncthreads before anyone reads it
            abase = uint64((t & 1) * SA + ak * PA + ar)
            bbase = uint64((t & 1) * SB + bk * BN + bc)
            for f in range(LA):
                sA[abase + uint64(f * RA)] = ra[f]
            for f in range(LB):
                sB[bbase + uint64(f * RB * BN)] = rb[f]
            cuda.syncthreads()
        for y in range(TM):
            for x in range(TN):
                row, col = row0 + ty + y * TY, col0 + tx + x * TX
                if row < M and col < N:
                    C[row, col] = c[y, x]

    return matmul_v3_tuned


def v3_tuned_invalid(BM: int, BN: int, BK: int, TM: int, TN: int,
                     pad: int | None = None) -> str | None:
    """Why a v3_tuned tile (BM, BN, BK, TM, TN) cannot run, or None when it can; ``pad``:
    floats added to each sA row (v3_tuned: 32 / BK, v4: 4)."""
    pad = 32 // BK if pad is None else pad
    if BM % TM or BN % TN:
        return f"TM = {TM} must divide BM = {BM} and TN = {TN} must divide BN = {BN}"
    nt = (BM // TM) * (BN // TN)
    if nt > 1024:
        return f"{nt} threads per block > 1024, the hardware limit"
    if 32 % BK or nt % BK or nt % BN or (BM * BK) % nt or (BK * BN) % nt:
        return (f"BK = {BK} must divide 32, and {nt} threads must split the {BM} x {BK} A tile "
                f"and the {BK} x {BN} B tile into whole rows (cooperative fetching)")
    if 4 * 2 * BK * (BM + pad + BN) > 48 * 1024:
        return "two buffers of sA and sB pass the 48 KiB of static shared memory per block"
    if TM * TN + TM + TN > 160:
        return f"TM*TN + TM + TN = {TM * TN + TM + TN} registers for the tile alone: too many"
    return None


@cuda.jit(device=True, inline=True)
def store_c(C, row, col, value):
    # v4's epilogue: what happens to each finished element of A @ B.  Lesson 04 stores it;
    # lesson 11 passes another device function (bias, GELU, residual) and a tuple as C.
    C[row, col] = value


def make_v4(BM, BN, BK, TM, TN, min_blocks=1, UNROLL=2, STORE=store_c):
    """v4: v3_tuned's pipeline (two shared buffers, register prefetch, launch bounds) with
    each thread's TM x TN tile made of runs of 4 consecutive rows and columns, read from
    shared memory 16 bytes at a time.  TM and TN are multiples of 4.  ``STORE(C, row, col,
    value)`` (an inline device function) writes each element of the result: the epilogue,
    fused into the store (``store_c`` stores it; C may then be any argument STORE reads)."""
    TY, TX = BM // TM, BN // TN    # threads along rows / columns of the block tile
    NT = TX * TY                   # threads per block
    RY, RX = 4 * TY, 4 * TX        # rows / columns between a thread's runs of four
    PA = BM + 4                    # sA row length: a multiple of 4 (16-byte runs), padded
    SA, SB = BK * PA, BK * BN      # floats in one buffer of sA / sB
    LA, LB = BM * BK // NT, BK * BN // NT   # A / B tile elements each thread fetches
    RA, RB = NT // BK, NT // BN    # tile rows of A / of B one fetch round covers
    SA2, SB2 = 2 * SA, 2 * SB      # both buffers (numba needs shapes as plain constants)

    @cuda.jit(**bounds(NT, min_blocks))
    def matmul_v4(A, B, C):
        # Block (bx, by) owns the BM x BN tile of C at (by*BM, bx*BN).  Thread (tx, ty) owns
        # rows ty*4 + j + h*RY (j < 4, h < TM/4) and columns tx*4 + i + g*RX (i < 4,
        # g < TN/4): runs of four, so a[] and b[] are filled by load4 from sA[k*PA + row]
        # (A tile, transposed) and sB[k*BN + col]; the 16 threads of a half-warp read 64
        # consecutive floats of sB - no bank conflicts.  Two shared buffers; ra, rb hold
        # the next tile on its way from global memory; c, a, b are registers.
        sA = cuda.shared.array(SA2, float32, alignment=ALIGN)
        sB = cuda.shared.array(SB2, float32, alignment=ALIGN)
        c = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        ra = cuda.local.array(LA, float32)
        rb = cuda.local.array(LB, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TX + tx
        ar, ak = tid // BK, tid % BK       # this thread fetches A[row0 + ar + f*RA, ko + ak]
        bk, bc = tid // BN, tid % BN       # and B[ko + bk + f*RB, col0 + bc]
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        for y in range(TM):
            for x in range(TN):
                c[y, x] = float32(0.0)
        ntiles = (K + BK - 1) // BK
        whole = row0 + BM <= M and col0 + BN <= N    # no edge inside this block's tile
        ra0, bc0 = uint64(row0 + ar), uint64(col0 + bc)
        for t in range(ntiles + 1):
            # global -> registers: tile t.  Unsigned indices (no negative-index code), and
            # no edge tests for a whole tile; else zeros past the edges and the last tile
            ko = uint64(t * BK)
            if whole and t < ntiles and (t + 1) * BK <= K:
                for f in range(LA):
                    ra[f] = A[ra0 + uint64(f * RA), ko + uint64(ak)]
                for f in range(LB):
                    rb[f] = B[ko + uint64(bk + f * RB), bc0]
            else:
                for f in range(LA):
                    r, k = ra0 + uint64(f * RA), ko + uint64(ak)
                    ra[f] = A[r, k] if r < M and k < K else float32(0.0)
                for f in range(LB):
                    k = ko + uint64(bk + f * RB)
                    rb[f] = B[k, bc0] if k < K and bc0 < N else float32(0.0)
            if t > 0:
                # shared buffer (t - 1) % 2 -> registers -> c: 16-byte loads of a and b
                abase = uint64(((t - 1) & 1) * SA + ty * 4)
                bbase = uint64(((t - 1) & 1) * SB + tx * 4)
                for k0 in range(0, BK, UNROLL):
                    for ki in range(k0, k0 + UNROLL):
                        for h in range(TM // 4):
                            a[4 * h], a[4 * h + 1], a[4 * h + 2], a[4 * h + 3] = load4(
                                sA, abase + uint64(ki * PA + h * RY))
                        for g in range(TN // 4):
                            b[4 * g], b[4 * g + 1], b[4 * g + 2], b[4 * g + 3] = load4(
                                sB, bbase + uint64(ki * BN + g * RX))
                        for y in range(TM):
                            for x in range(TN):
                                c[y, x] += a[y] * b[x]
            # registers -> shared buffer t % 2 (its last readers finished before the
            # previous syncthreads), then one syncthreads before anyone reads it
            abase = uint64((t & 1) * SA + ak * PA + ar)
            bbase = uint64((t & 1) * SB + bk * BN + bc)
            for f in range(LA):
                sA[abase + uint64(f * RA)] = ra[f]
            for f in range(LB):
                sB[bbase + uint64(f * RB * BN)] = rb[f]
            cuda.syncthreads()
        for y in range(TM):
            for x in range(TN):
                row = row0 + ty * 4 + (y & 3) + (y >> 2) * RY
                col = col0 + tx * 4 + (x & 3) + (x >> 2) * RX
                if row < M and col < N:
                    STORE(C, row, col, c[y, x])

    return matmul_v4


def v4_invalid(BM: int, BN: int, BK: int, TM: int, TN: int) -> str | None:
    """Why a v4 tile cannot run, or None when it can."""
    if TM % 4 or TN % 4:
        return f"TM = {TM} and TN = {TN} must be multiples of 4 (runs of four for load4)"
    return v3_tuned_invalid(BM, BN, BK, TM, TN, pad=4)   # make_v4's PA = BM + 4


matmul_v3_tuned = make_v3_tuned(*TUNED_DEFAULT, MIN_BLOCKS_DEFAULT)
matmul_v4 = make_v4(*V4_DEFAULT, V4_MIN_BLOCKS)
_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
PTX_SIGNATURES = {"matmul_v3_tuned": _SIG, "matmul_v4": _SIG}
# variant -> (maker, why a tile is invalid, default tile, default blocks per SM, default build)
TUNED = {"v3_tuned": (make_v3_tuned, v3_tuned_invalid, TUNED_DEFAULT, MIN_BLOCKS_DEFAULT,
                      matmul_v3_tuned),
         "v4": (make_v4, v4_invalid, V4_DEFAULT, V4_MIN_BLOCKS, matmul_v4)}


@functools.cache
def kernel(variant: str, tile: tuple, min_blocks: int, store=None):
    """The compiled ``variant`` ("v3_tuned" or "v4") for one tile and launch bound; v4 with
    ``store`` as its epilogue (None: ``store_c``)."""
    make, _, default_tile, default_blocks, built = TUNED[variant]
    if store is not None:
        if variant != "v4":
            raise ValueError(f"only v4 takes an epilogue, not {variant}")
        return make(*tile, min_blocks, STORE=store)
    if (tuple(tile), min_blocks) == (default_tile, default_blocks):
        return built
    return make(*tile, min_blocks)


def launch(variant: str, d_A, d_B, d_C, tile: tuple | None = None,
           min_blocks: int | None = None, store=None):
    """Launch v3_tuned or v4 with tile (BM, BN, BK, TM, TN) on device arrays, C = A @ B.
    With ``store`` (v4 only), d_C is whatever that epilogue takes."""
    _, invalid, default_tile, default_blocks, _ = TUNED[variant]
    BM, BN, BK, TM, TN = tile = tuple(tile or default_tile)
    why = invalid(*tile)
    if why:
        raise ValueError(f"invalid {variant} tile {tile}: {why}")
    M, N = d_A.shape[0], d_B.shape[1]        # the result's shape, as the kernels read it
    k = kernel(variant, tile, min_blocks or default_blocks, store)
    k[((N + BN - 1) // BN, (M + BM - 1) // BM), (BN // TN, BM // TM)](d_A, d_B, d_C)
