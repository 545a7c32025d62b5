"""Lesson 04, past v5 - matmul_v6: the copy runs while the warps compute (``cp.async``).

v5 brings the next K tile in through registers: each thread loads its share of A and B into
16 registers before the inner loop and stores them to shared memory after it, so those 16
registers are held across all the FMAs.  At v5's launch bound (two 256-thread blocks an SM,
so at most 128 registers a thread) the compiler runs out and spills.  Compute capability
8.0 (A100) added ``cp.async``: a copy from global to shared memory that never passes through
a register and runs in the background.  v6 keeps v5's block tile, thread layout and inner
loop (the same ``make_steps``) and only changes how tiles arrive:

- ``STAGES`` shared buffers, the copies of the next ``STAGES - 1`` tiles in flight while the
  current one is used: each thread issues its copies (``copy4``: one float of A, stored
  transposed as v5 stores it; ``copy16``: a run of four floats of B, where B's rows are
  16-byte aligned), closes them into a group (``commit``), and before using a tile waits
  until at most ``STAGES - 2`` groups are still on their way (``wait_group``), then one
  ``syncthreads`` so that every thread's copies have landed.
- a copy whose element lies outside the matrix asks for 0 bytes and gets zeros: no edge
  test in the loop (``copy4`` also makes any K and any N work, no alignment needed).

The simulator has no ``cp.async``: there ``copy4`` / ``copy16`` are plain assignments and
the waits do nothing, so the kernel runs (and is checked) there as an ordinary tiled SGEMM.
"""

from __future__ import annotations

import functools

from numba import config, cuda, float32, int64, uint64

from .matmul_tuned import bounds, store_c
from .matmul_v5 import add_c, make_steps, on_device, prepare

NOT_SHOWN: set = set()

if config.ENABLE_CUDASIM:
    def copy4(dst, d, src, e, ok):
        """dst[d] = element e of src (row-major) if ok else 0 (on a GPU: a 4-byte cp.async)."""
        i, j = divmod(e, src.shape[1])
        dst[d] = src[i, j] if ok else float32(0.0)

    def copy16(dst, d, src, e, ok):
        """dst[d : d + 4] = elements e .. e + 3 of src if ok else 0 (a 16-byte cp.async)."""
        i, j = divmod(e, src.shape[1])
        for q in range(4):
            dst[d + q] = src[i, j + q] if ok else float32(0.0)

    def commit():
        """Close this thread's copies issued so far into one group (nothing to do here)."""

    def waiter(n):
        """cp.async.wait_group n (here the copies are done when issued: nothing to wait for)."""
        def wait_group():
            pass
        return wait_group

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    from .matmul_tuned import SHARED

    def _copier(nbytes: int, cache: str):
        @intrinsic
        def copy(typingctx, dst, d, src, e, ok):
            """cp.async of ``nbytes`` from element ``e`` (row-major) of src, a C-contiguous
            float32 matrix, to dst[d] (a shared float32 array); zeros where ``ok`` is false
            (the copy asks for 0 bytes of the source: e may then be anything in range)."""
            if not (isinstance(dst, types.Array) and dst.ndim == 1
                    and isinstance(src, types.Array) and src.ndim == 2
                    and src.dtype == dst.dtype == types.float32
                    and isinstance(d, types.Integer) and isinstance(e, types.Integer)
                    and isinstance(ok, types.Boolean)):
                return None

            def codegen(context, builder, signature, args):
                i32, i64 = ir.IntType(32), ir.IntType(64)
                index = context.cast(builder, args[1], signature.args[1], types.intp)
                elem = context.cast(builder, args[3], signature.args[3], types.int64)
                darr = context.make_array(dst)(context, builder, value=args[0])
                sarr = context.make_array(src)(context, builder, value=args[2])
                target = cgutils.get_item_pointer(context, builder, dst, darr, [index],
                                                  wraparound=False)
                shared = builder.addrspacecast(target, ir.PointerType(ir.FloatType(), SHARED))
                source = builder.add(builder.ptrtoint(sarr.data, i64),
                                     builder.shl(elem, ir.Constant(i64, 2)))
                size = builder.select(args[4], ir.Constant(i32, nbytes), ir.Constant(i32, 0))
                builder.asm(ir.FunctionType(ir.VoidType(), [i32, i64, i32]),
                            f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;",
                            "r,l,r,~{memory}", [builder.ptrtoint(shared, i32), source, size],
                            side_effect=True)
                return context.get_dummy_value()

            return types.none(dst, d, src, e, ok), codegen
        return copy

    copy4 = _copier(4, "ca")           # one float (.ca: through L1)
    copy16 = _copier(16, "cg")         # a run of four (.cg: L2 only; 16 bytes is all it takes)

    def _asm(text: str):
        @intrinsic
        def emit(typingctx):
            def codegen(context, builder, signature, args):
                builder.asm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}", [],
                            side_effect=True)
                return context.get_dummy_value()
            return types.none(), codegen
        return emit

    commit = _asm("cp.async.commit_group;")

    def waiter(n):
        """cp.async.wait_group n: wait until at most n of this thread's groups are in flight."""
        return _asm(f"cp.async.wait_group {n};")


def make_fetch(BM, BN, BK, NT, VEC=True):
    """The device function that copies K tile t into one shared stage: each of the block's NT
    threads issues its cp.async copies (A transposed, a float each; B in runs of four where
    ``VEC``, else a float each) and closes them into one group."""
    PA = BM + 4                    # sA row length (sA holds the A tile transposed)
    SA = BK * PA                   # floats of a stage's A tile; its B tile follows
    ST = SA + BK * BN              # floats a stage
    LA, RA = BM * BK // NT, NT // BK            # A floats a thread copies / rows a round
    QB = BN // 4                   # runs of four along a row of the B tile
    LB, RB = BK * QB // NT, NT // QB            # B runs a thread copies / rows a round

    @cuda.jit(device=True, inline=True)
    def fetch(sm, A, B, t, live, stage, row0, col0, tid):
        # this thread's copies of K tile t into shared stage ``stage`` (none unless ``live``),
        # closed into one group either way (the waits count groups).  A[row0 + ar + f*RA,
        # ko + ak] goes to sA[ak, ar + f*RA] (transposed), B[ko + bk + f*RB, col0 + bc ..
        # + 3] to sB[bk + f*RB, bc .. + 3]; elements are counted row-major from [0, 0].
        if live:
            M, K, N = A.shape[0], A.shape[1], B.shape[1]
            base = stage * ST
            ak, ar = tid % BK, tid // BK
            bk, bc = tid // QB, (tid % QB) * 4
            ko = t * BK
            ea = int64(row0 + ar) * K + ko + ak
            eb = int64(ko + bk) * N + col0 + bc
            if row0 + BM <= M and col0 + BN <= N and ko + BK <= K:   # all inside: no tests
                for f in range(LA):
                    copy4(sm, base + ak * PA + ar + f * RA, A, ea + f * RA * K, True)
                for f in range(LB):
                    at = base + SA + (bk + f * RB) * BN + bc
                    if VEC:
                        copy16(sm, at, B, eb + f * RB * N, True)
                    else:
                        for q in range(4):
                            copy4(sm, at + q, B, eb + f * RB * N + q, True)
            else:                                   # an edge: zeros outside A and B
                for f in range(LA):
                    ok = row0 + ar + f * RA < M and ko + ak < K
                    copy4(sm, base + ak * PA + ar + f * RA, A, ea + f * RA * K if ok else 0, ok)
                for f in range(LB):
                    at = base + SA + (bk + f * RB) * BN + bc
                    e = eb + f * RB * N
                    if VEC:
                        ok = ko + bk + f * RB < K and col0 + bc < N
                        copy16(sm, at, B, e if ok else 0, ok)
                    else:
                        for q in range(4):
                            ok = ko + bk + f * RB < K and col0 + bc + q < N
                            copy4(sm, at + q, B, e + q if ok else 0, ok)
        commit()

    return fetch


def make_v6(BM, BN, BK, TM, TN, min_blocks=1, STAGES=3, VEC=True, STORE=store_c, ADD=add_c,
            STEPS=4):
    """v6: v5's tile, thread layout, inner loop and split-K; tiles copied by cp.async into
    ``STAGES`` shared buffers (dynamic shared memory: ``shared_bytes`` of the result).
    ``VEC``: B's rows are 16-byte aligned (16-byte copies; 4-byte copies otherwise)."""
    TY, TX = BM // TM, BN // TN    # threads along rows / columns of the block tile
    NT = TX * TY                   # threads per block
    RY, RX = 4 * TY, 4 * TX        # rows / columns between a thread's runs of four
    PA = BM + 4                    # sA row length (sA holds the A tile transposed)
    SA = BK * PA                   # floats of a stage's A tile; its B tile follows
    ST = SA + BK * BN              # floats a stage
    steps = make_steps(TM, TN, PA, BN, RY, RX, STEPS)   # STEPS k steps of c += a b^T
    fetch = make_fetch(BM, BN, BK, NT, VEC)             # K tile t -> one stage
    wait_group = waiter(STAGES - 2)
    wait_all = waiter(0)

    @cuda.jit(**bounds(NT, min_blocks))
    def matmul_v6(A, B, C):
        # Thread (tx, ty) owns v5's TM x TN runs of C.  Slice z = blockIdx.z covers the K
        # tiles [t0, t1); tile t lives in stage (t - t0) % STAGES.
        sm = cuda.shared.array(0, float32)
        c = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TX + tx
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        for y in range(TM):
            for x in range(TN):
                c[y, x] = float32(0.0)
        ntiles = (K + BK - 1) // BK
        per = (ntiles + cuda.gridDim.z - 1) // cuda.gridDim.z
        t0 = cuda.blockIdx.z * per
        t1 = min(ntiles, t0 + per)
        for s in range(STAGES - 1):                 # the first tiles on their way
            fetch(sm, A, B, t0 + s, t0 + s < t1, s, row0, col0, tid)
        rd, wr = 0, STAGES - 1                      # the stages read and filled next
        for t in range(t0, t1):
            wait_group()                            # my copies of tile t have landed ...
            cuda.syncthreads()                      # ... and everyone's; stage wr is free
            nxt = t + STAGES - 1
            fetch(sm, A, B, nxt, nxt < t1, wr, row0, col0, tid)
            abase, bbase = uint64(rd * ST + ty * 4), uint64(rd * ST + SA + tx * 4)
            for k0 in range(0, BK, STEPS):
                steps(sm, sm, c, a, b, abase + uint64(k0 * PA), bbase + uint64(k0 * BN))
            rd = rd + 1 if rd + 1 < STAGES else 0   # no modulo: a compare and a select
            wr = wr + 1 if wr + 1 < STAGES else 0
        wait_all()                                  # nothing left in flight at exit
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

    matmul_v6.shared_bytes = 4 * STAGES * ST
    return matmul_v6


def v6_invalid(BM: int, BN: int, BK: int, TM: int, TN: int, stages: int = 3) -> str | None:
    """Why a v6 tile cannot run, or None when it can."""
    if TM % 4 or TN % 4 or BK % 4:
        return f"TM = {TM}, TN = {TN} and BK = {BK} must be multiples of 4 (runs of four)"
    if BM % TM or BN % TN:
        return f"TM = {TM} must divide BM = {BM} and TN = {TN} must divide BN = {BN}"
    nt = (BM // TM) * (BN // TN)
    if nt > 1024:
        return f"{nt} threads per block > 1024, the hardware limit"
    qb = BN // 4
    if nt % BK or (BM * BK) % nt or nt % qb or (BK * qb) % nt:
        return (f"{nt} threads must split the {BM} x {BK} A tile into whole rows of floats "
                f"and the {BK} x {BN} B tile into whole rows of runs of four")
    if stages < 2:
        return f"stages must be >= 2 (one tile in use, one on its way), got {stages}"
    if 4 * stages * BK * (BM + 4 + BN) > 227 * 1024:
        return f"{stages} stages of sA and sB pass the 227 KiB of shared memory a block may have"
    return None


_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
V6_DEFAULT = (64, 128, 16, 8, 8)      # the tile the H200 sweep found fastest at every shape
matmul_v6 = make_v6(*V6_DEFAULT, 4, 3, STEPS=16)
PTX_SIGNATURES = {"matmul_v6": _SIG}


@functools.cache
def kernel(tile: tuple, min_blocks: int, stages: int, vec: bool, store=None, add=None,
           steps: int = 4):
    """The compiled v6 for one tile, launch bound, stage count, copy width, epilogue, steps."""
    return make_v6(*tile, min_blocks, STAGES=stages, VEC=vec, STORE=store or store_c,
                   ADD=add or add_c, STEPS=steps)


def b_aligned(d_B) -> bool:
    """Can v6 copy B in 16-byte runs (N a multiple of 4, a 16-byte aligned base)?"""
    if d_B.shape[1] % 4:
        return False
    return config.ENABLE_CUDASIM or d_B.device_ctypes_pointer.value % 16 == 0


@functools.cache
def supported() -> bool:
    """Can this machine run v6?  cp.async needs compute capability 8.0 (A100) or newer; the
    simulator imitates it anywhere.  Asked once a process (every launch asks)."""
    return config.ENABLE_CUDASIM or cuda.get_current_device().compute_capability >= (8, 0)


def launch(d_A, d_B, d_C, tile: tuple = V6_DEFAULT, min_blocks: int = 4, split: int = 1,
           store=None, add=None, zero: bool | None = None, steps: int = 16, stream=0,
           stages: int = 3):
    """C = A @ B by v6 on device arrays, as ``matmul_v5.launch`` (the same epilogues,
    split-K and stream), with ``stages`` K tiles in shared memory at once."""
    if not supported():
        cc = cuda.get_current_device().compute_capability
        raise RuntimeError(f"matmul_v6 needs cp.async (compute capability 8.0 or newer); this "
                           f"GPU has {cc[0]}.{cc[1]}: use matmul_v5")
    store, add, grid, block = prepare(d_A, d_B, d_C, tile, split, steps, store, add, zero,
                                      stream, "v6", lambda *t: v6_invalid(*t, stages))
    k = kernel(tuple(tile), min_blocks, stages, b_aligned(d_B), store, add, steps)
    if k.shared_bytes > 48 * 1024:     # past the default: the kernel must ask for it
        from .attention_common import allow_big_shared
        allow_big_shared(k, (d_A, d_B, d_C), k.shared_bytes)
    k[grid, block, stream, k.shared_bytes](d_A, d_B, d_C)


def host(A, B, tile: tuple = V6_DEFAULT, min_blocks: int = 4, split: int = 1, steps: int = 16,
         stages: int = 3):
    """numpy in, numpy out: C = A @ B by v6."""
    return on_device(A, B, lambda d_A, d_B, d_C: launch(d_A, d_B, d_C, tile, min_blocks, split,
                                                         steps=steps, stages=stages))
