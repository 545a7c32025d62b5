"""Lessons 05-06 - faces: mean face, centering (coalesced or not); 07 is covariance.py.

Follows CSE P 524 (UW, Andrew Lumsdaine), Lecture 9: CelebA, m = 202,599 images of
n = 55 x 45 = 2,475 pixels, stored row by row in one flat float32 array ``data`` of
m * n values: pixel j of image i is ``data[i * num_features + j]``.
Kernels keep the lecture's names (compute_mean_kernel, correction_kernel,
correction_kernel_ortho, covariance_kernel, symmetric_covariance_kernel,
shared_covariance_kernel with chunk_size tiles).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from ..measure.pairs import pack2, unpack2
from ..platform import runtime
from ..platform.data import face_matrix as _validate
from . import covariance as _cov
from .covariance import (  # noqa: F401 - re-exported
    REGISTER_TILES,
    cgma,
    covariance_kernel,
    flops_performed,
    launch_cov,
    register_tiled_covariance_kernel,
    register_tiled_covariance_kernel_8,
    shared_covariance_kernel,
    symmetric_covariance_kernel,
    zero_kernel,
)

THREADS_PER_BLK = 32   # the lecture's block size for the mean and centering kernels
CENTER_ILP = 8         # correction_kernel_flat: pairs loaded before any is stored


# ---------------------------------------------------------------------------------------
# 05 - mean face

@cuda.jit
def compute_mean_kernel(data, mean, num_entries, num_features):
    # Thread thid owns pixel thid of the mean image; data (m * n) and mean (n) in global memory.
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)                      # a register, not global memory
        for entry in range(num_entries):
            accum += data[entry * num_features + thid]
        mean[thid] = accum / num_entries        # one global write per thread


@cuda.jit
def mean_split_kernel(data, mean, num_entries, num_features):
    # Grid (ceil(n / tpb), S): thread (j, s) sums pixel j over images s, s + S, s + 2S, ...
    # then adds its partial mean to mean[j] atomically (mean must start at zero).
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)
        for entry in range(cuda.blockIdx.y, num_entries, cuda.gridDim.y):
            accum += data[entry * num_features + thid]
        cuda.atomic.add(mean, thid, accum / num_entries)


@cuda.jit
def mean_split_x4_kernel(data, mean, num_entries, num_features):
    # mean_split_kernel with 4 independent partial sums, so each thread keeps 4 loads in
    # flight (images s, s + S, s + 2S, s + 3S) instead of waiting for one at a time.
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        S = cuda.gridDim.y
        e = cuda.blockIdx.y
        a0 = float32(0)
        a1 = float32(0)
        a2 = float32(0)
        a3 = float32(0)
        while e + 3 * S < num_entries:
            a0 += data[e * num_features + thid]
            a1 += data[(e + S) * num_features + thid]
            a2 += data[(e + 2 * S) * num_features + thid]
            a3 += data[(e + 3 * S) * num_features + thid]
            e += 4 * S
        while e < num_entries:
            a0 += data[e * num_features + thid]
            e += S
        cuda.atomic.add(mean, thid, ((a0 + a1) + (a2 + a3)) / num_entries)


# ---------------------------------------------------------------------------------------
# 06 - centering

@cuda.jit
def correction_kernel(data, mean, num_entries, num_features):
    # Thread thid owns pixel (column) thid and walks down all images: at each step the
    # 32 threads of a warp touch 32 neighbouring floats of one image (coalesced).
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        value = mean[thid]
        for entry in range(num_entries):
            data[entry * num_features + thid] -= value


@cuda.jit
def correction_kernel_ortho(data, mean, num_entries, num_features):
    # Thread thid owns image (row) thid and walks along its pixels: at each step the
    # 32 threads of a warp touch 32 floats num_features apart (not coalesced).
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_entries:
        for feat in range(num_features):
            data[thid * num_features + feat] -= mean[feat]


@cuda.jit
def correction_kernel_2d(data, mean, num_entries, num_features):
    # 2-D grid: x picks the pixel j (coalesced, as in correction_kernel), y spreads the
    # images over enough blocks to fill the GPU; each thread strides over images.
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if j < num_features:
        value = mean[j]
        start = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        stride = cuda.gridDim.y * cuda.blockDim.y
        for entry in range(start, num_entries, stride):
            data[entry * num_features + j] -= value


@cuda.jit
def correction_kernel_2d_ilp(data, mean, num_entries, num_features):
    # As correction_kernel_2d, but each step handles 4 images (e0 + 0..3 * stride) and loads
    # all 4 values before storing any: 4 loads in flight per thread instead of 1.
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if j < num_features:
        value = mean[j]
        start = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        stride = cuda.gridDim.y * cuda.blockDim.y
        for e0 in range(start, num_entries, 4 * stride):
            e1 = e0 + stride
            e2 = e1 + stride
            e3 = e2 + stride
            v0 = data[e0 * num_features + j]
            v1 = data[e1 * num_features + j] if e1 < num_entries else float32(0)
            v2 = data[e2 * num_features + j] if e2 < num_entries else float32(0)
            v3 = data[e3 * num_features + j] if e3 < num_entries else float32(0)
            data[e0 * num_features + j] = v0 - value
            if e1 < num_entries:
                data[e1 * num_features + j] = v1 - value
            if e2 < num_entries:
                data[e2 * num_features + j] = v2 - value
            if e3 < num_entries:
                data[e3 * num_features + j] = v3 - value


@cuda.jit
def correction_kernel_flat(pairs, data, mean, num_features):
    # Beyond the lecture: forget rows and columns.  data is one flat run of m * n floats and
    # pairs a float64 view of it (pair p = floats 2p and 2p + 1), so each load moves 8 bytes.
    # Block b owns the CENTER_ILP * B consecutive pairs from b * B * CENTER_ILP on (B threads):
    # thread t takes pairs t, t + B, t + 2B, ... and loads all of them before it stores any.
    # The pixel j of float 2p is computed once; moving B pairs on moves it by 2B mod n, so
    # the next pixels cost an addition and a compare, not a division.
    B = cuda.blockDim.x
    p = cuda.blockIdx.x * B * CENTER_ILP + cuda.threadIdx.x
    step = (2 * B) % num_features
    j = (2 * p) % num_features
    cols = cuda.local.array(CENTER_ILP, np.int32)
    vals = cuda.local.array(CENTER_ILP, np.float64)
    if p + (CENTER_ILP - 1) * B < pairs.size:    # every block but the last one
        for u in range(CENTER_ILP):
            cols[u] = j
            j += step
            if j >= num_features:
                j -= num_features
        for u in range(CENTER_ILP):       # all loads in flight ...
            vals[u] = pairs[p + u * B]
        for u in range(CENTER_ILP):       # ... then the stores
            x0, x1 = unpack2(vals[u])
            j1 = cols[u] + 1              # the second float may start the next image
            if j1 == num_features:
                j1 = 0
            pairs[p + u * B] = pack2(x0 - mean[cols[u]], x1 - mean[j1])
    else:                                 # the end of the array: one pair at a time
        for u in range(CENTER_ILP):
            if p + u * B < pairs.size:
                x0, x1 = unpack2(pairs[p + u * B])
                j1 = j + 1
                if j1 == num_features:
                    j1 = 0
                pairs[p + u * B] = pack2(x0 - mean[j], x1 - mean[j1])
            j += step
            if j >= num_features:
                j -= num_features
    last = data.size - 1                  # an odd m * n leaves one float without a partner
    if last % 2 == 0 and cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
        data[last] -= mean[last % num_features]


_SIG = "void(float32[::1], float32[::1], int64, int64)"
PTX_SIGNATURES = {name: _SIG for name in (
    "compute_mean_kernel", "mean_split_kernel", "mean_split_x4_kernel", "correction_kernel",
    "correction_kernel_ortho", "correction_kernel_2d", "correction_kernel_2d_ilp")}
PTX_SIGNATURES["correction_kernel_flat"] = "void(float64[::1], float32[::1], float32[::1], int64)"


# ---------------------------------------------------------------------------------------
# launch helpers (device arrays in, results in place)

def launch_mean(d_data, d_mean, m, n, split: int | None = 0, tpb: int = THREADS_PER_BLK,
                unroll: bool = False):
    """mean of the rows of d_data into d_mean; split=0: lecture kernel, else S slices
    (``unroll``: 4 loads in flight per thread). The atomics need d_mean zeroed first: on the
    device, one small launch (a host-to-device copy would wait for the host each call)."""
    if not split:
        compute_mean_kernel[math.ceil(n / tpb), tpb](d_data, d_mean, m, n)
        return
    zero_kernel[math.ceil(n / 256), 256](d_mean)
    kernel = mean_split_x4_kernel if unroll else mean_split_kernel
    kernel[(math.ceil(n / tpb), split), tpb](d_data, d_mean, m, n)


def default_split(m: int, n: int, tpb: int = 128) -> int:
    """Image slices for mean_split_kernel: enough blocks for ~16 per SM, at most m."""
    return max(1, min(m, 16 * runtime.sm_count() // max(1, math.ceil(n / tpb)) + 1))


def launch_center(kind, d_data, d_mean, m, n, tpb: int = THREADS_PER_BLK,
                  block_y: int = 8, blocks_y: int | None = None):
    """Subtract d_mean from every row of d_data in place with the chosen kernel."""
    if kind == "coalesced":
        correction_kernel[math.ceil(n / tpb), tpb](d_data, d_mean, m, n)
    elif kind == "noncoalesced":
        correction_kernel_ortho[math.ceil(m / tpb), tpb](d_data, d_mean, m, n)
    elif kind in ("2d", "2d_ilp"):
        gx = math.ceil(n / tpb)
        fill = 32 * runtime.sm_count() // gx + 1 if runtime.MODE == "gpu" else 1   # ~32 blocks per SM
        gy = blocks_y or max(1, min(math.ceil(m / block_y), fill))
        kernel = correction_kernel_2d if kind == "2d" else correction_kernel_2d_ilp
        kernel[(gx, gy), (tpb, block_y)](d_data, d_mean, m, n)
    elif kind == "flat":                  # 1-D grid: CENTER_ILP * tpb pairs per block
        pairs = d_data[: 2 * (m * n // 2)].view(np.float64)
        blocks = max(1, math.ceil(pairs.size / (CENTER_ILP * tpb)))
        correction_kernel_flat[blocks, tpb](pairs, d_data, d_mean, n)
    else:
        raise ValueError(f"unknown centering kernel {kind!r}: coalesced, noncoalesced, 2d, "
                         "2d_ilp, flat")


# ---------------------------------------------------------------------------------------
# host functions: the VARIANTS contract (numpy in, numpy out)

def mean_face(D, split: int | None = 0, threads_per_block: int = THREADS_PER_BLK,
              unroll: bool = False):
    """Mean of the rows of D (m, n) -> (n,) float32; split > 0 uses mean_split_kernel."""
    D = _validate(D)
    m, n = D.shape
    d_data = cuda.to_device(D.ravel())
    d_mean = cuda.device_array(n, dtype=np.float32)
    launch_mean(d_data, d_mean, m, n, split=split, tpb=threads_per_block, unroll=unroll)
    return d_mean.copy_to_host()


def _center_host(kind):
    def run(D, threads_per_block: int = THREADS_PER_BLK, **kw):
        D = _validate(D)
        m, n = D.shape
        d_data = cuda.to_device(D.ravel())
        d_mean = cuda.device_array(n, dtype=np.float32)
        launch_mean(d_data, d_mean, m, n)
        launch_center(kind, d_data, d_mean, m, n, tpb=threads_per_block, **kw)
        return d_data.copy_to_host().reshape(m, n)
    run.__name__ = f"center_{kind}"
    run.__doc__ = f"D - mean(D) (m, n) float32, centered by the {kind!r} kernel."
    return run


def mean_face_split(D, split: int | None = None, threads_per_block: int = 128,
                    unroll: bool = False):
    """Mean of the rows of D by mean_split_kernel (split: image slices; default fills the GPU)."""
    D = _validate(D)
    return mean_face(D, split=split or default_split(*D.shape, threads_per_block),
                     threads_per_block=threads_per_block, unroll=unroll)


def timing_breakdown(D, pinned: bool = False) -> dict:
    """The lecture's breakdown for the mean face, in ms: H2D copy, kernel, D2H copy."""
    from ..measure.timing import benchmark

    D = _validate(D)
    m, n = D.shape
    host = D.ravel()
    if pinned:
        host = cuda.pinned_array(m * n, dtype=np.float32)
        host[:] = D.ravel()
    d_data = cuda.device_array(m * n, dtype=np.float32)
    d_mean = cuda.device_array(n, dtype=np.float32)
    reps = dict(repeat=5, warmup=1) if runtime.MODE == "gpu" else dict(repeat=1, warmup=0)
    h2d = benchmark(lambda: d_data.copy_to_device(host), **reps)
    kernel = benchmark(lambda: launch_mean(d_data, d_mean, m, n), **reps)
    d2h = benchmark(lambda: d_mean.copy_to_host(), **reps)
    return {"H2D copy": h2d.median_ms, "compute_mean_kernel": kernel.median_ms,
            "mean D2H": d2h.median_ms}


VARIANTS = {
    "mean": mean_face,
    "mean_split": mean_face_split,
    "mean_split_x4": lambda D, **kw: mean_face_split(D, unroll=True, **kw),
    "center_coalesced": _center_host("coalesced"),
    "center_noncoalesced": _center_host("noncoalesced"),
    "center_2d": _center_host("2d"),
    "center_2d_ilp": _center_host("2d_ilp"),
    "center_flat": _center_host("flat"),
    **_cov.VARIANTS,                # lesson 07's, from covariance.py
}


def reference(D, what: str = "mean"):
    """float64 answers: 'mean' (n,), 'center' (m, n) or 'cov' (n, n) of D as given."""
    D = np.asarray(D, dtype=np.float64)
    if what == "mean":
        return D.mean(axis=0)
    if what == "center":
        return D - D.mean(axis=0)
    if what == "cov":
        return D.T @ D / D.shape[0]
    raise ValueError(f"what must be 'mean', 'center' or 'cov', not {what!r}")


# ---------------------------------------------------------------------------------------
# memory transactions, counted from the index pattern (no tracer needed)

def warp_lines(kernel: str, num_features: int, step: int = 0, first_thread: int = 0,
               warp: int = 32, line_bytes: int = 128, itemsize: int = 4) -> int:
    """Distinct cache lines one warp's access to data touches at loop step ``step``.

    'coalesced' (correction_kernel): thread t reads data[step * n + t];
    'noncoalesced' (correction_kernel_ortho): thread t reads data[t * n + step].
    """
    threads = np.arange(first_thread, first_thread + warp, dtype=np.int64)
    if kernel == "coalesced":
        idx = step * num_features + threads
    elif kernel == "noncoalesced":
        idx = threads * num_features + step
    else:
        raise ValueError("kernel must be 'coalesced' or 'noncoalesced'")
    return int(np.unique(idx * itemsize // line_bytes).size)


def transactions_table(num_features: int, num_entries: int, warp: int = 32) -> dict:
    """Average lines and 32-byte sectors per warp request for both centering kernels."""
    out = {}
    for kernel in ("coalesced", "noncoalesced"):
        lines, sectors = [], []
        steps = range(0, min(num_entries if kernel == "coalesced" else num_features, 64))
        for s in steps:
            lines.append(warp_lines(kernel, num_features, s, warp=warp))
            sectors.append(warp_lines(kernel, num_features, s, warp=warp, line_bytes=32))
        out[kernel] = {"lines_per_request": float(np.mean(lines)),
                       "sectors_per_request": float(np.mean(sectors)),
                       "useful_bytes": warp * 4,
                       "moved_bytes": float(np.mean(sectors)) * 32}
    return out
