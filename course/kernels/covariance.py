"""Lesson 07 - covariance C = Dc^T Dc / m of the centred faces, and the eigenfaces.

Follows CSE P 524 (UW, Andrew Lumsdaine), Lecture 9: m = 202,599 images of n = 2,475
pixels in one flat float32 array (pixel j of image i at ``data[i * num_features + j]``).
Kernels keep the lecture's names (covariance_kernel, symmetric_covariance_kernel,
shared_covariance_kernel with chunk_size tiles); the register-tiled ones go beyond it.
The mean and the centring (lessons 05-06) are in ``faces.py``.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float32, uint64

from ..platform import runtime
from ..platform.data import face_matrix as _validate
from .matmul_tuned import ALIGN, bounds, load4

# Beyond the lecture, in the benchmark; notebook 07 points to them.
NOT_SHOWN = {"register_tiled_covariance_kernel", "register_tiled_covariance_kernel_8",
             "zero_kernel", "syrk_covariance_kernel"}


@cuda.jit
def covariance_kernel(data, cov, num_entries, num_features):
    # Thread (J, j) owns cov[j, J]: a dot product of pixel columns j and J over all images.
    J = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if j < num_features and J < num_features:
        accum = float32(0)
        for entry in range(num_entries):
            accum += data[entry * num_features + j] * data[entry * num_features + J]
        cov[j * num_features + J] = accum / num_entries


@cuda.jit
def symmetric_covariance_kernel(data, cov, num_entries, num_features):
    # As covariance_kernel, but only threads on or below the diagonal (J <= j) work;
    # each writes its value twice, to cov[j, J] and cov[J, j].
    J = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if j < num_features and J <= j:
        accum = float32(0)
        for entry in range(num_entries):
            accum += data[entry * num_features + j] * data[entry * num_features + J]
        cov[j * num_features + J] = cov[J * num_features + j] = accum / num_entries


@cuda.jit
def shared_covariance_kernel(data, cov, num_entries, num_features):
    # Block (bx, by) of chunk_size x chunk_size threads owns the tile of cov with rows
    # by * chunk_size + ty and columns bx * chunk_size + tx (tiles above the diagonal exit).
    # Launch with 2 * chunk_size**2 * 4 bytes of dynamic shared memory: cache_x, cache_y.
    chunk_size = cuda.blockDim.x
    base_x = cuda.blockIdx.x * chunk_size
    base_y = cuda.blockIdx.y * chunk_size
    thid_x = cuda.threadIdx.x
    thid_y = cuda.threadIdx.y
    x = base_x + thid_x
    y = base_y + thid_y
    if base_x > base_y:
        return
    shared = cuda.shared.array(0, dtype=float32)
    cache_x = shared[:chunk_size * chunk_size]   # cache_x[r * chunk_size + c]: image r, pixel base_x + c
    cache_y = shared[chunk_size * chunk_size:]   # cache_y[r * chunk_size + c]: image r, pixel base_y + c
    accum = float32(0)
    for chunk in range((num_entries + chunk_size - 1) // chunk_size):
        row = chunk * chunk_size + thid_y        # this thread loads image row, pixels col_x, col_y
        col_x = base_x + thid_x
        col_y = base_y + thid_x
        value_x = float32(0)
        value_y = float32(0)
        if row < num_entries and col_x < num_features:
            value_x = data[row * num_features + col_x]
        if row < num_entries and col_y < num_features:
            value_y = data[row * num_features + col_y]
        cache_x[thid_y * chunk_size + thid_x] = value_x
        cache_y[thid_y * chunk_size + thid_x] = value_y
        cuda.syncthreads()                       # the tiles are complete
        if x <= y:
            for k in range(chunk_size):
                accum += cache_y[k * chunk_size + thid_y] * cache_x[k * chunk_size + thid_x]
        cuda.syncthreads()                       # everyone is done before the next load
    if y < num_features and x <= y:
        cov[y * num_features + x] = cov[x * num_features + y] = accum / num_entries


def _register_tiled(BLK, RT):
    """A register-tiled covariance kernel for BLK x BLK tiles, RT x RT values per thread."""
    KC = 16                                     # images per shared-memory stage
    TPB = BLK // RT                             # threads per block along x and y

    @cuda.jit
    def register_tiled_covariance_kernel(data, cov, num_entries, num_features):
        # Beyond the lecture: TPB x TPB threads per block, each accumulating RT x RT values
        # of cov (rows ty + TPB a, cols tx + TPB b) in registers from shared tiles sx, sy
        # (KC images x BLK pixels): RT*RT FMAs per 2*RT shared loads. Upper tiles exit.
        bx = cuda.blockIdx.x
        by = cuda.blockIdx.y
        if bx > by:
            return
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * TPB + tx
        sx = cuda.shared.array((KC, BLK), dtype=float32)
        sy = cuda.shared.array((KC, BLK), dtype=float32)
        acc = cuda.local.array((RT, RT), dtype=float32)
        ya = cuda.local.array(RT, dtype=float32)
        xb = cuda.local.array(RT, dtype=float32)
        for a in range(RT):
            for b in range(RT):
                acc[a, b] = float32(0)
        for e0 in range(0, num_entries, KC):
            for r in range(KC * BLK // (TPB * TPB)):   # the block loads KC x BLK per tile
                idx = tid + r * TPB * TPB
                k = idx // BLK
                c = idx % BLK
                row = e0 + k
                value_x = float32(0)
                value_y = float32(0)
                if row < num_entries:
                    if bx * BLK + c < num_features:
                        value_x = data[row * num_features + bx * BLK + c]
                    if by * BLK + c < num_features:
                        value_y = data[row * num_features + by * BLK + c]
                sx[k, c] = value_x
                sy[k, c] = value_y
            cuda.syncthreads()
            for k in range(KC):
                for a in range(RT):
                    ya[a] = sy[k, ty + TPB * a]
                for b in range(RT):
                    xb[b] = sx[k, tx + TPB * b]
                for a in range(RT):
                    for b in range(RT):
                        acc[a, b] += ya[a] * xb[b]
            cuda.syncthreads()
        for a in range(RT):
            y = by * BLK + ty + TPB * a
            for b in range(RT):
                x = bx * BLK + tx + TPB * b
                if y < num_features and x <= y:
                    cov[y * num_features + x] = cov[x * num_features + y] = acc[a, b] / num_entries

    return register_tiled_covariance_kernel


REGISTER_TILES = {4: (64, 4), 8: (128, 8)}       # name suffix -> (BLK, RT); 16 x 16 threads
register_tiled_covariance_kernel = _register_tiled(64, 4)
register_tiled_covariance_kernel_8 = _register_tiled(128, 8)


def make_syrk(BM, BK, TM, min_blocks=2):
    """SYRK-style covariance: lesson 04's v4 SGEMM (BM x BM tiles, K step BK, TM x TM per
    thread in runs of four, 16-byte shared loads, two shared buffers, register prefetch)
    on the lower-triangle tiles only, each tile's images split over ``gridDim.y`` blocks."""
    T = BM // TM                   # threads along each side of the block
    NT = T * T                     # threads per block
    R = 4 * T                      # rows / columns between a thread's runs of four
    LD, RD = BM * BK // NT, NT // BM   # tile elements a thread fetches; rows one round covers
    S1 = BK * BM                   # floats in one buffer of a tile (k-major: no transpose)
    S2 = 2 * S1

    @cuda.jit(**bounds(NT, min_blocks))
    def syrk_covariance_kernel(data, cov, num_entries, num_features):
        # Block (p, s): lower tile p = (by, bx), bx <= by, of cov, summed over images slice
        # s of gridDim.y.  Both tiles are BK images x BM pixels of data, stored k-major as
        # they lie in memory: sy[k*BM + row], sx[k*BM + col].  Thread (tx, ty) owns rows
        # ty*4 + j + h*R and columns tx*4 + i + g*R; its sums are added (atomics) to cov
        # and, off the diagonal, to the mirrored entry.  cov must be zero before.
        p = cuda.blockIdx.x
        by = int((math.sqrt(8.0 * p + 1.0) - 1.0) * 0.5)    # p = by (by + 1) / 2 + bx
        while by * (by + 1) // 2 > p:
            by -= 1
        while (by + 1) * (by + 2) // 2 <= p:
            by += 1
        bx = p - by * (by + 1) // 2
        n = uint64(num_features)
        per = (num_entries + cuda.gridDim.y - 1) // cuda.gridDim.y
        e_lo = cuda.blockIdx.y * per
        e_hi = min(num_entries, e_lo + per)
        sy = cuda.shared.array(S2, float32, alignment=ALIGN)
        sx = cuda.shared.array(S2, float32, alignment=ALIGN)
        c = cuda.local.array((TM, TM), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TM, float32)
        ry = cuda.local.array(LD, float32)
        rx = cuda.local.array(LD, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * T + tx
        fk, fc = tid // BM, tid % BM       # this thread fetches image e0 + fk + f*RD, pixel fc
        py, px = uint64(by * BM + fc), uint64(bx * BM + fc)
        whole = (by + 1) * BM <= num_features
        for y in range(TM):
            for x in range(TM):
                c[y, x] = float32(0.0)
        ntiles = (e_hi - e_lo + BK - 1) // BK
        for t in range(ntiles + 1):
            e0 = e_lo + t * BK
            if whole and t < ntiles and e0 + BK <= e_hi:
                for f in range(LD):
                    row = uint64(e0 + fk + f * RD) * n
                    ry[f] = data[row + py]
                    rx[f] = data[row + px]
            else:
                for f in range(LD):
                    e = e0 + fk + f * RD
                    row = uint64(e) * n
                    inside = e < e_hi and t < ntiles
                    ry[f] = data[row + py] if inside and py < n else float32(0.0)
                    rx[f] = data[row + px] if inside and px < n else float32(0.0)
            if t > 0:
                ybase = uint64(((t - 1) & 1) * S1 + ty * 4)
                xbase = uint64(((t - 1) & 1) * S1 + tx * 4)
                for k0 in range(0, BK, 2):
                    for k in range(k0, k0 + 2):
                        for h in range(TM // 4):
                            a[4 * h], a[4 * h + 1], a[4 * h + 2], a[4 * h + 3] = load4(
                                sy, ybase + uint64(k * BM + h * R))
                            b[4 * h], b[4 * h + 1], b[4 * h + 2], b[4 * h + 3] = load4(
                                sx, xbase + uint64(k * BM + h * R))
                        for y in range(TM):
                            for x in range(TM):
                                c[y, x] += a[y] * b[x]
            base = uint64((t & 1) * S1 + fk * BM + fc)
            for f in range(LD):
                sy[base + uint64(f * RD * BM)] = ry[f]
                sx[base + uint64(f * RD * BM)] = rx[f]
            cuda.syncthreads()
        scale = float32(1.0) / float32(num_entries)
        for y in range(TM):
            row = uint64(by * BM + ty * 4 + (y & 3) + (y >> 2) * R)
            for x in range(TM):
                col = uint64(bx * BM + tx * 4 + (x & 3) + (x >> 2) * R)
                if row < n and col < n:
                    cuda.atomic.add(cov, row * n + col, c[y, x] * scale)
                    if bx != by:
                        cuda.atomic.add(cov, col * n + row, c[y, x] * scale)

    return syrk_covariance_kernel


@cuda.jit
def zero_kernel(a):
    # a helper: zeroes an array on the device before kernels add into it with atomics
    i = cuda.grid(1)
    if i < a.size:
        a[i] = float32(0.0)


SYRK_DEFAULT = (128, 16, 8)                      # (BM, BK, TM): lesson 04's v4 tile
SYRK_SIM = (16, 4, 4)                            # the simulator's: 16 threads a block
syrk_covariance_kernel = make_syrk(*SYRK_DEFAULT)


_SIG = "void(float32[::1], float32[::1], int64, int64)"
PTX_SIGNATURES = {name: _SIG for name in (
    "covariance_kernel", "symmetric_covariance_kernel", "shared_covariance_kernel",
    "register_tiled_covariance_kernel", "register_tiled_covariance_kernel_8",
    "syrk_covariance_kernel")}
PTX_SIGNATURES["zero_kernel"] = "void(float32[::1])"


def flops_performed(kind: str, m: int, n: int, chunk_size: int = 8) -> float:
    """FLOPs (a multiply and an add per image) of the cov entries ``kind`` really computes.

    naive: all n^2 entries.  symmetric and tiled: the n (n + 1) / 2 entries on or below the
    diagonal (the other threads skip the sum).  register / register8 / syrk: every entry in the
    matrix of the tiles on or below the diagonal, whole tiles (a diagonal tile computes its
    upper half too).  Mirrored entries are copies, not work.
    """
    if kind == "naive":
        entries = n * n
    elif kind in ("symmetric", "tiled"):
        entries = n * (n + 1) // 2
    elif kind in ("register", "register8", "syrk"):
        blk = SYRK_DEFAULT[0] if kind == "syrk" else REGISTER_TILES[8 if kind == "register8" else 4][0]
        tiles = math.ceil(n / blk)
        side = [min(blk, n - t * blk) for t in range(tiles)]        # rows inside the matrix
        entries = sum(side[bx] * side[by] for by in range(tiles) for bx in range(by + 1))
    else:
        raise ValueError(f"unknown covariance kernel {kind!r}")
    return 2.0 * m * entries


# ---------------------------------------------------------------------------------------
# launches (device arrays in, results in place) and the VARIANTS contract (numpy in and out)

def launch_cov(kind, d_data, d_cov, m, n, chunk_size: int = 8, tile: tuple | None = None,
               splits: int | None = None):
    """cov = data^T data / m into d_cov (n * n) with the chosen kernel (``chunk_size``: the
    tiled kernel's; ``tile``, ``splits``: the SYRK's, see :func:`launch_syrk`)."""
    if kind in ("naive", "symmetric"):
        kernel = covariance_kernel if kind == "naive" else symmetric_covariance_kernel
        kernel[(math.ceil(n / 8), math.ceil(n / 8)), (8, 8)](d_data, d_cov, m, n)
    elif kind == "tiled":
        if chunk_size < 1 or chunk_size * chunk_size > 1024:
            raise ValueError(f"chunk_size must be 1..32 (chunk_size**2 threads), got {chunk_size}")
        g = math.ceil(n / chunk_size)
        shared_covariance_kernel[(g, g), (chunk_size, chunk_size), 0, 8 * chunk_size ** 2](
            d_data, d_cov, m, n)
    elif kind in ("register", "register8"):
        blk, rt = REGISTER_TILES[8 if kind == "register8" else 4]
        kernel = register_tiled_covariance_kernel_8 if kind == "register8" else \
            register_tiled_covariance_kernel
        g = math.ceil(n / blk)
        kernel[(g, g), (blk // rt, blk // rt)](d_data, d_cov, m, n)
    elif kind == "syrk":
        launch_syrk(d_data, d_cov, m, n, tile=tile, splits=splits)
    else:
        raise ValueError(f"unknown covariance kernel {kind!r}: naive, symmetric, tiled, "
                         "register, register8, syrk")


@functools.cache
def syrk_kernel(tile: tuple):
    return syrk_covariance_kernel if tuple(tile) == SYRK_DEFAULT else make_syrk(*tile)


def syrk_splits(tiles: int, m: int, slots: int, bk: int = SYRK_DEFAULT[1]) -> int:
    """How many image slices (blocks per tile) fill the GPU best: the S in 1..8 whose
    waves of ``tiles * S`` blocks over ``slots`` resident blocks take the least time
    (waves / S), each slice at least 64 K steps long; the smaller S on a tie."""
    options = [s for s in range(1, 9) if s == 1 or m / s >= 64 * bk]
    return min(options, key=lambda s: (math.ceil(tiles * s / slots) / s, s))


def syrk_grid(m: int, n: int, tile: tuple | None = None, splits: int | None = None
              ) -> tuple[tuple, int, int]:
    """(tile, lower tiles, image slices) of a SYRK launch for m images of n pixels: ``tile``
    (BM, BK, TM) is SYRK_DEFAULT on a GPU, SYRK_SIM (16 threads a block) in the simulator;
    ``splits`` by default :func:`syrk_splits` for two blocks per SM (one slot in the
    simulator).  A ValueError for a tile the kernel cannot use."""
    BM, BK, TM = tile = tuple(tile or (SYRK_DEFAULT if runtime.MODE == "gpu" else SYRK_SIM))
    if BM % TM or TM % 4 or (BM * BK) % ((BM // TM) ** 2) or (BM // TM) ** 2 % BM:
        raise ValueError(f"invalid SYRK tile (BM, BK, TM) = {tile}: TM must be a multiple "
                         "of 4 dividing BM, and (BM/TM)^2 threads must split BK x BM "
                         "into whole rows")
    g = math.ceil(n / BM)
    tiles = g * (g + 1) // 2
    if splits is None:
        slots = 2 * runtime.sm_count() if runtime.MODE == "gpu" else 1
        splits = syrk_splits(tiles, m, slots, BK)
    return tile, tiles, splits


def launch_syrk(d_data, d_cov, m, n, tile: tuple | None = None, splits: int | None = None):
    """cov = data^T data / m by the SYRK kernel: zero cov, then lower tiles x image slices
    (``tile`` and ``splits`` as :func:`syrk_grid` chooses them by default)."""
    tile, tiles, splits = syrk_grid(m, n, tile, splits)
    BM, _, TM = tile
    zero_kernel[math.ceil(n * n / 256), 256](d_cov)
    syrk_kernel(tile)[(tiles, splits), (BM // TM, BM // TM)](d_data, d_cov, m, n)


def cgma(chunk_size: int) -> float:
    """The lecture's compute-to-global-memory-access ratio of a chunk_size tile (= chunk_size)."""
    loads = 2 * chunk_size ** 2                 # floats one block loads per chunk
    flops = chunk_size ** 2 * 2 * chunk_size    # each thread: chunk_size multiply-adds
    return flops / loads


def _cov_host(kind):
    def run(Dc, **kw):
        Dc = _validate(Dc)
        m, n = Dc.shape
        d_data = cuda.to_device(Dc.ravel())
        d_cov = cuda.device_array(n * n, dtype=np.float32)
        launch_cov(kind, d_data, d_cov, m, n, **kw)
        return d_cov.copy_to_host().reshape(n, n)
    run.__name__ = f"cov_{kind}"
    run.__doc__ = f"Dc^T Dc / m (n, n) float32 by the {kind!r} covariance kernel."
    return run


VARIANTS = {f"cov_{kind}": _cov_host(kind)
            for kind in ("naive", "symmetric", "tiled", "register", "register8", "syrk")}
