"""Lesson 04, past v4 - one SGEMM for every shape: matmul_v5 and the waves it fills.

v4 is fast on 4096 x 4096 and slow on GPT-2's narrow matrices: 4096 x 768 outputs are 192
tiles of 128 x 128, and 132 SMs that hold two such blocks each have 264 places for them, so
a quarter of the GPU waits (0.73 of a wave).  v5 is v4 with two changes that let one kernel
fit every shape:

- **16-byte global loads.**  Each thread fetches its share of the A and B tiles in runs of
  four floats (``gload4``: one ld.global.v4.f32 instead of four loads) and writes its run
  of B into shared memory in one 16-byte store (``store4``).  Only where the rows of A and B
  are 16-byte aligned (K and N multiples of 4): the launch compiles a scalar build otherwise.
- **split-K.**  ``blockIdx.z`` picks a slice of K: ``gridDim.z`` blocks share one tile of C,
  each adds its partial sum into C with an atomic add (``ADD``) - more, smaller pieces of
  work for the same tile shape, so the last wave is fuller.  The first slice stores through
  ``STORE`` (the epilogue: bias, residual); with more than one slice it must add too, into
  a C the launch zeroed first (or the residual stream, which already holds x).

The tile shape (BM, BN, BK, TM, TN), blocks per SM and the split come from a table chosen per
problem shape by a sweep on the GPU (:mod:`course.kernels.matmul_shapes`).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import config, cuda, float32, uint64

from .matmul_tuned import ALIGN, SHARED, bounds, load4, store_c

NOT_SHOWN = {"zero_kernel"}           # C = 0 before split-K slices add: a plain loop

if config.ENABLE_CUDASIM:
    def gload4(array, i, j):
        """array[i, j : j + 4] as four floats (on a GPU: one ld.global.v4.f32)."""
        return array[i, j], array[i, j + 1], array[i, j + 2], array[i, j + 3]

    def store4(array, i, v0, v1, v2, v3):
        """array[i : i + 4] = v0, v1, v2, v3 (on a GPU: one st.shared.v4.f32)."""
        array[i], array[i + 1], array[i + 2], array[i + 3] = v0, v1, v2, v3

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    @intrinsic
    def gload4(typingctx, array, i, j):
        """array[i, j : j + 4] of a C-contiguous float32 matrix whose rows start 16-byte
        aligned, j a multiple of 4: one <4 x float> load (PTX ld.global.v4.f32)."""
        if not (isinstance(array, types.Array) and array.ndim == 2
                and array.dtype == types.float32 and isinstance(i, types.Integer)
                and isinstance(j, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            arr = context.make_array(array)(context, builder, value=args[0])
            idx = [context.cast(builder, args[1], i, types.intp),
                   context.cast(builder, args[2], j, types.intp)]
            element = cgutils.get_item_pointer(context, builder, array, arr, idx,
                                               wraparound=False)
            vec = ir.VectorType(ir.FloatType(), 4)
            glob = builder.addrspacecast(builder.bitcast(element, vec.as_pointer()),
                                         vec.as_pointer(1))
            value = builder.load(glob, align=16)
            parts = [builder.extract_element(value, ir.Constant(ir.IntType(32), k))
                     for k in range(4)]
            return context.make_tuple(builder, signature.return_type, parts)

        return types.UniTuple(types.float32, 4)(array, i, j), codegen

    @intrinsic
    def store4(typingctx, array, i, v0, v1, v2, v3):
        """array[i : i + 4] = v0..v3 in a 16-byte aligned shared float32 array, i a multiple
        of 4: one <4 x float> store (PTX st.shared.v4.f32)."""
        if not (isinstance(array, types.Array) and array.ndim == 1
                and array.dtype == types.float32 and isinstance(i, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            arr = context.make_array(array)(context, builder, value=args[0])
            index = context.cast(builder, args[1], i, types.intp)
            element = cgutils.get_item_pointer(context, builder, array, arr, [index],
                                               wraparound=False)
            vec = ir.VectorType(ir.FloatType(), 4)
            value = ir.Constant(vec, ir.Undefined)
            for k in range(4):
                part = context.cast(builder, args[2 + k], signature.args[2 + k], types.float32)
                value = builder.insert_element(value, part, ir.Constant(ir.IntType(32), k))
            shared = builder.addrspacecast(builder.bitcast(element, vec.as_pointer()),
                                           vec.as_pointer(SHARED))
            builder.store(value, shared, align=16)
            return context.get_dummy_value()

        return types.none(array, i, v0, v1, v2, v3), codegen


@cuda.jit(device=True, inline=True)
def add_c(C, row, col, value):
    # a split-K slice's share of C[row, col]: added, since other slices add theirs too.
    cuda.atomic.add(C, (row, col), value)


def make_steps(TM, TN, PA, BN, RY, RX, STEPS):
    """A device function doing STEPS k steps of a thread's TM x TN tile: a and b by 16-byte
    shared loads from sA[k*PA + ...] / sB[k*BN + ...] (runs of four RY / RX apart), then
    c += a b^T.  Written out step by step (``twice``): numba's compiler unrolls only about
    two of v4's steps by itself, and each turn of a loop costs address arithmetic."""
    @cuda.jit(device=True, inline=True)
    def step(sA, sB, c, a, b, abase, bbase):
        # one k of the tile: a (TM) and b (TN) by 16-byte shared loads, c += a b^T
        for h in range(TM // 4):
            a[4 * h], a[4 * h + 1], a[4 * h + 2], a[4 * h + 3] = load4(
                sA, abase + uint64(h * RY))
        for g in range(TN // 4):
            b[4 * g], b[4 * g + 1], b[4 * g + 2], b[4 * g + 3] = load4(
                sB, bbase + uint64(g * RX))
        for y in range(TM):
            for x in range(TN):
                c[y, x] += a[y] * b[x]

    def twice(f, k):
        # f on k steps, then on the next k: 2k steps written out, whatever the compiler unrolls
        @cuda.jit(device=True, inline=True)
        def f2(sA, sB, c, a, b, abase, bbase):
            f(sA, sB, c, a, b, abase, bbase)
            f(sA, sB, c, a, b, abase + uint64(k * PA), bbase + uint64(k * BN))
        return f2

    steps, n = step, 1
    while n < STEPS:
        steps, n = twice(steps, n), 2 * n
    return steps


def make_v5(BM, BN, BK, TM, TN, min_blocks=1, VEC=True, STORE=store_c, ADD=add_c, STEPS=4):
    """v5: v4's tile, pipeline and 16-byte shared loads; 16-byte global loads of A and B
    (``VEC``: rows 16-byte aligned) and split-K over ``gridDim.z`` (slice 0 ends with
    ``STORE``, the others with ``ADD``).  The K loop is written out ``STEPS`` steps at a
    time (a power of two: numba's compiler unrolls only about 2 of v4's steps by itself, and
    each turn of the loop costs address arithmetic)."""
    TY, TX = BM // TM, BN // TN    # threads along rows / columns of the block tile
    NT = TX * TY                   # threads per block
    RY, RX = 4 * TY, 4 * TX        # rows / columns between a thread's runs of four
    PA = BM + 4                    # sA row length: a multiple of 4 (16-byte runs), padded
    SA, SB = BK * PA, BK * BN      # floats in one buffer of sA / sB
    QA, QB = BK // 4, BN // 4      # runs of four along a row of the A tile / of the B tile
    LA, LB = BM * QA // NT, BK * QB // NT   # runs each thread fetches of A / of B
    RA, RB = NT // QA, NT // QB    # tile rows of A / of B one fetch round covers
    SA2, SB2 = 2 * SA, 2 * SB      # both buffers (numba needs shapes as plain constants)
    FA, FB = 4 * LA, 4 * LB        # floats each thread holds of the next A / B tile

    steps = make_steps(TM, TN, PA, BN, RY, RX, STEPS)   # STEPS k steps of c += a b^T

    @cuda.jit(**bounds(NT, min_blocks))
    def matmul_v5(A, B, C):
        # v4's block tile and thread layout.  Thread tid fetches runs of four: A[row0 + ar
        # + f*RA, ko + ak .. ko + ak + 3] (stored transposed, one float at a time) and
        # B[ko + bk + f*RB, col0 + bc .. col0 + bc + 3] (stored as one 16-byte run).
        # Slice z = blockIdx.z covers the K tiles [z*per, z*per + per).
        sA = cuda.shared.array(SA2, float32, alignment=ALIGN)
        sB = cuda.shared.array(SB2, float32, alignment=ALIGN)
        c = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        ra = cuda.local.array(FA, float32)
        rb = cuda.local.array(FB, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TX + tx
        ar, ak = tid // QA, (tid % QA) * 4
        bk, bc = tid // QB, (tid % QB) * 4
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        for y in range(TM):
            for x in range(TN):
                c[y, x] = float32(0.0)
        ntiles = (K + BK - 1) // BK
        per = (ntiles + cuda.gridDim.z - 1) // cuda.gridDim.z
        t0 = cuda.blockIdx.z * per
        t1 = min(ntiles, t0 + per)
        whole = row0 + BM <= M and col0 + BN <= N    # no edge inside this block's tile
        ra0, bc0 = uint64(row0 + ar), uint64(col0 + bc)
        for t in range(t0, t1 + 1):
            # global -> registers: tile t (nothing past the slice's last tile)
            ko = uint64(t * BK)
            if VEC and whole and t < t1 and (t + 1) * BK <= K:
                for f in range(LA):
                    ra[4 * f], ra[4 * f + 1], ra[4 * f + 2], ra[4 * f + 3] = gload4(
                        A, ra0 + uint64(f * RA), ko + uint64(ak))
                for f in range(LB):
                    rb[4 * f], rb[4 * f + 1], rb[4 * f + 2], rb[4 * f + 3] = gload4(
                        B, ko + uint64(bk + f * RB), bc0)
            else:
                for f in range(LA):
                    r = ra0 + uint64(f * RA)
                    for j in range(4):
                        k = ko + uint64(ak + j)
                        ra[4 * f + j] = A[r, k] if t < t1 and r < M and k < K else float32(0.0)
                for f in range(LB):
                    k = ko + uint64(bk + f * RB)
                    for j in range(4):
                        col = bc0 + uint64(j)
                        rb[4 * f + j] = B[k, col] if t < t1 and k < K and col < N \
                            else float32(0.0)
            if t > t0:
                # shared buffer (t - 1) % 2 -> registers -> c: v4's 16-byte loads of a and b
                abase = uint64(((t - 1) & 1) * SA + ty * 4)
                bbase = uint64(((t - 1) & 1) * SB + tx * 4)
                for k0 in range(0, BK, STEPS):
                    steps(sA, sB, c, a, b, abase + uint64(k0 * PA), bbase + uint64(k0 * BN))
            # registers -> shared buffer t % 2, then one syncthreads before anyone reads it
            abase = uint64((t & 1) * SA + ak * PA + ar)
            bbase = uint64((t & 1) * SB + bk * BN + bc)
            for f in range(LA):
                for j in range(4):
                    sA[abase + uint64(j * PA + f * RA)] = ra[4 * f + j]
            for f in range(LB):
                store4(sB, bbase + uint64(f * RB * BN),
                       rb[4 * f], rb[4 * f + 1], rb[4 * f + 2], rb[4 * f + 3])
            cuda.syncthreads()
        first = cuda.blockIdx.z == 0
        for y in range(TM):
            for x in range(TN):
                row = row0 + ty * 4 + (y & 3) + (y >> 2) * RY
                col = col0 + tx * 4 + (x & 3) + (x >> 2) * RX
                if row < M and col < N:
                    if first:
                        STORE(C, row, col, c[y, x])
                    else:
                        ADD(C, row, col, c[y, x])

    return matmul_v5


def v5_invalid(BM: int, BN: int, BK: int, TM: int, TN: int) -> str | None:
    """Why a v5 tile cannot run, or None when it can."""
    if TM % 4 or TN % 4 or BK % 4:
        return f"TM = {TM}, TN = {TN} and BK = {BK} must be multiples of 4 (runs of four)"
    if BM % TM or BN % TN:
        return f"TM = {TM} must divide BM = {BM} and TN = {TN} must divide BN = {BN}"
    nt = (BM // TM) * (BN // TN)
    if nt > 1024:
        return f"{nt} threads per block > 1024, the hardware limit"
    qa, qb = BK // 4, BN // 4
    if nt % qa or nt % qb or (BM * qa) % nt or (BK * qb) % nt:
        return (f"{nt} threads must split the {BM} x {BK} A tile and the {BK} x {BN} B tile "
                "into whole rows of runs of four (cooperative fetching)")
    if 4 * 2 * BK * (BM + 4 + BN) > 48 * 1024:
        return "two buffers of sA and sB pass the 48 KiB of static shared memory per block"
    if TM * TN + TM + TN + 4 * (BM * qa + BK * qb) // nt > 200:
        return f"the {TM} x {TN} tile and its fetch buffers need too many registers"
    return None


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
V5_DEFAULT = (128, 128, 16, 8, 8)
matmul_v5 = make_v5(*V5_DEFAULT, 2)
PTX_SIGNATURES = {"matmul_v5": _SIG, "zero_kernel": "void(float32[:, ::1])"}


STEPS = (1, 2, 4, 8, 16)              # k steps written out per turn of the K loop


@functools.cache
def kernel(tile: tuple, min_blocks: int, vec: bool, store=None, add=None, steps: int = 4):
    """The compiled v5 for one tile, launch bound, load width, epilogue pair and steps."""
    return make_v5(*tile, min_blocks, VEC=vec, STORE=store or store_c, ADD=add or add_c,
                   STEPS=steps)


@cuda.jit
def zero_kernel(C):
    # C = 0 (before split-K slices add into it), a grid-stride loop over the rows.
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    for row in range(cuda.blockIdx.y, C.shape[0], cuda.gridDim.y):
        if col < C.shape[1]:
            C[row, col] = float32(0.0)


def aligned(d_A, d_B) -> bool:
    """Can v5 read A and B in 16-byte runs (K and N multiples of 4, 16-byte aligned bases)?"""
    if d_A.shape[1] % 4 or d_B.shape[1] % 4:
        return False
    if config.ENABLE_CUDASIM:
        return True
    return all(x.device_ctypes_pointer.value % 16 == 0 for x in (d_A, d_B))


def prepare(d_A, d_B, d_C, tile: tuple, split: int, steps: int, store, add, zero, stream,
            name: str = "v5", invalid=v5_invalid) -> tuple:
    """What v5's and v6's launches share: check the tile, split and steps; pick the epilogue
    pair (``split`` > 1: every slice adds into C, so C is zeroed first - ``zero``, the
    default for the plain store - and ``store`` must add too); zero C on ``stream``.
    Returns (store, add, grid, block)."""
    why = invalid(*tile)
    if why:
        raise ValueError(f"invalid {name} tile {tuple(tile)}: {why}")
    if split < 1:
        raise ValueError(f"split must be >= 1, got {split}")
    BM, BN, BK, TM, TN = tile
    if steps not in STEPS or BK % steps:
        raise ValueError(f"steps must be one of {STEPS} and divide BK = {BK}, got {steps}")
    M, N = d_A.shape[0], d_B.shape[1]
    if split > 1 and store is None:
        store, add, zero = add_c, add or add_c, True if zero is None else zero
    if split > 1 and add is None:
        raise ValueError("split-K needs add=: the epilogue of the slices after the first")
    add = add or store            # one slice: ADD never runs, but both branches compile
    if zero:                          # C, or the output of an epilogue's (out, ...)
        zero_kernel[(-(-N // 256), min(M, 1024)), 256, stream](
            d_C[0] if isinstance(d_C, tuple) else d_C)
    return store, add, ((N + BN - 1) // BN, (M + BM - 1) // BM, split), (BN // TN, BM // TM)


def launch(d_A, d_B, d_C, tile: tuple = V5_DEFAULT, min_blocks: int = 2, split: int = 1,
           store=None, add=None, zero: bool | None = None, steps: int = 4, stream=0):
    """C = A @ B by v5 on device arrays (``d_C`` whatever ``store`` takes).  ``split`` > 1
    slices K: every slice adds into C, so C is zeroed first (``zero``, the default for the
    plain store) and ``store`` must add too (an atomic epilogue).  Every launch goes to
    ``stream`` (0: numba's default)."""
    store, add, grid, block = prepare(d_A, d_B, d_C, tile, split, steps, store, add, zero,
                                      stream)
    k = kernel(tuple(tile), min_blocks, aligned(d_A, d_B), store, add, steps)
    k[grid, block, stream](d_A, d_B, d_C)


def on_device(A, B, run):
    """numpy in, numpy out: A and B checked (2-D, inner sizes equal) and copied to the GPU as
    float32, ``run(d_A, d_B, d_C)`` launched on them, C (M x N) copied back."""
    A = np.ascontiguousarray(A, dtype=np.float32)
    B = np.ascontiguousarray(B, dtype=np.float32)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"cannot multiply {A.shape} by {B.shape}")
    d_C = cuda.device_array((A.shape[0], B.shape[1]), np.float32)
    run(cuda.to_device(A), cuda.to_device(B), d_C)
    return d_C.copy_to_host()


def host(A, B, tile: tuple = V5_DEFAULT, min_blocks: int = 2, split: int = 1, steps: int = 4):
    """numpy in, numpy out: C = A @ B by v5."""
    return on_device(A, B, lambda d_A, d_B, d_C: launch(d_A, d_B, d_C, tile, min_blocks, split,
                                                         steps=steps))
