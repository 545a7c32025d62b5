"""Lesson 09 - multi-channel histogram: global atomics, privatized shared histograms,
the two-phase design of the CS149 leaderboard work log, and a tuned kernel.

The problem (CS149 histogram leaderboard, H100): ``data`` is uint8 of shape
(length, channels), row-major; the answer is int32 (channels, 256), the histogram of each
channel's column.  Leaderboard shape: length 1,048,576 x 512 channels (512 MiB).

Host side: :func:`to_device` validates and uploads the data once (padding the channel count
to a multiple of 4 with zero columns, so that rows can be read as packed uint16/uint32 words;
padded channels are never counted); :func:`launch` runs one variant on device arrays and
returns the device histogram; ``VARIANTS[name](data, **settings)`` does both, numpy in and out.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, int32

from ..platform import runtime
from .histogram_tuned import (  # noqa: F401 - re-exported
    LANES,
    MAX_TUNED_ROWS,
    NUM_BINS,
    TUNED_KERNELS,
    W4_SHARED,
    W8_SHARED,
    histogram_pairs,
    histogram_tuned,
    histogram_tuned_wide,
)

NOT_SHOWN = {"zero_fill"}          # a helper that zeroes the output before atomics

TP_CHANNELS = 32                   # two_phase: default channels per block (8 uint32 words)
# tuned: the launch settings of the GPU benchmark (H100, 2026-11-23, after its 12-word
# batches: slots 1 beat 2-11 and 33, 28 warps beat 32); the leaderboard's entry uses them too
TUNED_GPU = {"load_bytes": 4, "warps": 28, "chunks": 33, "slots": 1}
TP_STRIDE = NUM_BINS + 1           # two_phase: padded shared row per channel (bank spread)


# --- single channel ------------------------------------------------------------------------

@cuda.jit
def hist1d_global_atomics(x, hist):
    # Thread g owns x[g], x[g + T], ... (T = all threads); hist (256,) int32 in global memory.
    for k in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(hist, x[k], 1)


@cuda.jit
def hist1d_shared(x, hist):
    # Same elements per thread, but counted in the block's private copy in shared memory;
    # the block then adds its 256 counts to the global hist: one atomic per bin and block.
    sdata = cuda.shared.array(NUM_BINS, int32)
    t = cuda.threadIdx.x
    for b in range(t, NUM_BINS, cuda.blockDim.x):
        sdata[b] = 0
    cuda.syncthreads()
    for k in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(sdata, x[k], 1)
    cuda.syncthreads()
    for b in range(t, NUM_BINS, cuda.blockDim.x):
        if sdata[b] > 0:
            cuda.atomic.add(hist, b, sdata[b])


# --- multi channel --------------------------------------------------------------------------

@cuda.jit
def histogram_global_atomics(data, hist):
    # Thread g owns elements g, g + T, ... of the flattened row-major data (coalesced reads);
    # every element is one atomic on hist[channel, value] in global memory.
    n_ch = data.shape[1]
    for k in range(cuda.grid(1), data.shape[0] * n_ch, cuda.gridsize(1)):
        r = k // n_ch
        c = k - r * n_ch
        if c < hist.shape[0]:
            cuda.atomic.add(hist, (c, data[r, c]), 1)


@cuda.jit
def histogram_block_per_channel(data, hist):
    # Block c owns channel c (the column data[:, c]); thread t reads rows t, t + blockDim, ...
    # Neighbouring threads read bytes one row (= channels bytes) apart: uncoalesced.
    sdata = cuda.shared.array(NUM_BINS, int32)
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    for b in range(t, NUM_BINS, cuda.blockDim.x):
        sdata[b] = 0
    cuda.syncthreads()
    for r in range(t, data.shape[0], cuda.blockDim.x):
        cuda.atomic.add(sdata, data[r, c], 1)
    cuda.syncthreads()
    for b in range(t, NUM_BINS, cuda.blockDim.x):
        hist[c, b] = sdata[b]


@cuda.jit
def histogram_two_phase(words, partial, rows_per_block, channels_per_block):
    # words (length, channels/4) uint32 in global memory: words[r, w] packs channels 4w..4w+3.
    # Block (bx, by) owns channels [bx * cpb, bx * cpb + cpb) x rows [by * rows_per_block, ...)
    # (cpb = channels_per_block, a multiple of 4): cpb/4 threads cover the block's channels of
    # one row, so thread t owns word column bx * cpb/4 + t % (cpb/4) of rows t // (cpb/4),
    # + rows_step, ...  sh (dynamic shared memory): cpb histograms, each padded to 257 ints;
    # the block writes them to its own slice partial[by] (global).
    sh = cuda.shared.array(0, int32)
    t = cuda.threadIdx.x
    for i in range(t, channels_per_block * TP_STRIDE, cuda.blockDim.x):
        sh[i] = 0
    cuda.syncthreads()
    per_row = channels_per_block // 4
    rows_step = cuda.blockDim.x // per_row
    w = t % per_row
    col = cuda.blockIdx.x * per_row + w
    r0 = cuda.blockIdx.y * rows_per_block
    r1 = min(r0 + rows_per_block, words.shape[0])
    if col < words.shape[1] and t < rows_step * per_row:
        base = 4 * w * TP_STRIDE
        for r in range(r0 + t // per_row, r1, rows_step):
            v = words[r, col]
            cuda.atomic.add(sh, base + (v & 0xFF), 1)
            cuda.atomic.add(sh, base + TP_STRIDE + ((v >> 8) & 0xFF), 1)
            cuda.atomic.add(sh, base + 2 * TP_STRIDE + ((v >> 16) & 0xFF), 1)
            cuda.atomic.add(sh, base + 3 * TP_STRIDE + (v >> 24), 1)
    cuda.syncthreads()
    for i in range(t, channels_per_block * NUM_BINS, cuda.blockDim.x):
        ch = i // NUM_BINS
        b = i - ch * NUM_BINS
        c = cuda.blockIdx.x * channels_per_block + ch
        if c < partial.shape[1]:
            partial[cuda.blockIdx.y, c, b] = sh[ch * TP_STRIDE + b]


@cuda.jit
def reduce_partials(partial, hist):
    # Thread g owns hist element g of the flattened (channels, 256) output and sums the
    # partial histograms of every row chunk: partial[k, c, b] for k = 0 .. chunks - 1.
    for g in range(cuda.grid(1), hist.shape[0] * NUM_BINS, cuda.gridsize(1)):
        c = g // NUM_BINS
        b = g - c * NUM_BINS
        s = 0
        for k in range(partial.shape[0]):
            s += partial[k, c, b]
        hist[c, b] = s


@cuda.jit
def zero_fill(a):
    # Thread g zeroes elements g, g + T, ... of the flattened 3-D int32 array a.
    n1, n2 = a.shape[1], a.shape[2]
    for g in range(cuda.grid(1), a.shape[0] * n1 * n2, cuda.gridsize(1)):
        k = g // (n1 * n2)
        rest = g - k * n1 * n2
        a[k, rest // n2, rest - (rest // n2) * n2] = 0


PTX_SIGNATURES = {
    "hist1d_global_atomics": "void(uint8[::1], int32[::1])",
    "hist1d_shared": "void(uint8[::1], int32[::1])",
    "histogram_global_atomics": "void(uint8[:, ::1], int32[:, ::1])",
    "histogram_block_per_channel": "void(uint8[:, ::1], int32[:, ::1])",
    "histogram_two_phase": "void(uint32[:, ::1], int32[:, :, ::1], int64, int64)",
    "reduce_partials": "void(int32[:, :, ::1], int32[:, ::1])",
    "zero_fill": "void(int32[:, :, ::1])",
}


# --- host side ------------------------------------------------------------------------------

def validate(data) -> np.ndarray:
    """``data`` as a C-contiguous uint8 (length, channels) array, or a clear ValueError."""
    a = np.asarray(data)
    if a.dtype != np.uint8:
        raise ValueError(f"data must be uint8 (one byte per value, 256 bins); got {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"data must be 2-D (length, channels); got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"data is empty (shape {a.shape}): need length >= 1 and channels >= 1")
    return np.ascontiguousarray(a)


def to_device(data):
    """Upload validated data once: (device uint8 array with channels padded to a multiple
    of 8 by zero columns, so rows can be read as uint16/32/64 words; true channel count)."""
    a = validate(data)
    n_ch = a.shape[1]
    pad = -n_ch % 8
    if pad:
        a = np.concatenate([a, np.zeros((a.shape[0], pad), np.uint8)], axis=1)
    return cuda.to_device(a), n_ch


def chunking(length: int, chunks: int, max_rows: int | None = None) -> tuple[int, int]:
    """(rows per block, number of row chunks) for about ``chunks`` chunks of ``length`` rows."""
    rows = max(1, math.ceil(length / max(1, chunks)))
    if max_rows:
        rows = min(rows, max_rows)
    return rows, math.ceil(length / rows)


def launch(variant: str, d_bytes, n_ch: int, *, hist=None, threads_per_block: int = 256,
           chunks: int | None = None, channels_per_block: int = TP_CHANNELS, warps: int = 8,
           slots: int = 1, load_bytes: int = 4):
    """Run ``variant`` on device data from :func:`to_device` and return the device histogram
    (n_ch, 256) int32 (``hist``: a preallocated one, to keep allocation out of timings).
    ``chunks``: row chunks (default: about 4 blocks per SM); two_phase:
    ``channels_per_block`` (multiple of 4, <= 44); tuned: ``warps`` per block (of 32 lanes),
    ``slots`` partial histograms (1: atomics straight into hist; >= chunks: every block
    stores its own, summed by reduce_partials), ``load_bytes`` per lane and load (2, 4, 8)."""
    length = d_bytes.shape[0]
    if hist is None:
        hist = cuda.device_array((n_ch, NUM_BINS), np.int32)
    blocks = lambda n: math.ceil(n / 256)  # noqa: E731 - one thread per output element
    if variant == "global_atomics":
        zero_fill[blocks(hist.size), 256](hist.reshape(1, n_ch, NUM_BINS))
        # 32 blocks per SM, grid-stride - but no more blocks than elements to cover (a tiny
        # input, as in the simulator, would otherwise launch thousands of idle threads)
        grid = min(32 * runtime.sm_count(), math.ceil(d_bytes.size / threads_per_block))
        histogram_global_atomics[max(1, grid), threads_per_block](d_bytes, hist)
    elif variant == "block_per_channel":
        histogram_block_per_channel[n_ch, threads_per_block](d_bytes, hist)
    elif variant == "two_phase":
        cpb = channels_per_block
        if cpb % 4 or not 4 <= cpb <= 44 or threads_per_block < cpb // 4:
            raise ValueError(f"channels_per_block must be a multiple of 4 in [4, 44] and at "
                             f"most 4 x threads_per_block; got {cpb}")
        gx = math.ceil(n_ch / cpb)
        rows, gy = chunking(length, chunks or math.ceil(4 * runtime.sm_count() / gx))
        partial = cuda.device_array((gy, n_ch, NUM_BINS), np.int32)
        histogram_two_phase[(gx, gy), threads_per_block, 0, cpb * TP_STRIDE * 4](
            d_bytes.view(np.uint32), partial, rows, cpb)
        reduce_partials[blocks(hist.size), 256](partial, hist)
    elif variant == "tuned":
        if load_bytes not in TUNED_KERNELS:
            raise ValueError(f"load_bytes must be 2, 4 or 8; got {load_bytes!r}")
        kernel, view, shmem, per_sm = TUNED_KERNELS[load_bytes]
        gx = math.ceil(d_bytes.shape[1] // load_bytes / LANES)
        rows, gy = chunking(length, chunks or math.ceil(per_sm * runtime.sm_count() / gx),
                            MAX_TUNED_ROWS)
        if slots == 1:                      # atomics straight into the zeroed histogram
            out = hist.reshape(1, n_ch, NUM_BINS)
        else:                               # slots >= chunks: each block stores its own slot
            out = scratch((min(slots, gy), n_ch, NUM_BINS))
        if out.shape[0] != gy or load_bytes == 2:      # atomics need a zeroed output
            zero_fill[blocks(out.size), 256](out)
        args = (d_bytes.view(view), out, rows)
        allow_shared(kernel, args, shmem)
        kernel[(gx, gy), (LANES, warps), 0, shmem](*args)
        if slots != 1:
            reduce_partials[blocks(hist.size), 256](out, hist)
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")
    return hist


_SCRATCH: dict = {}
_SHARED_OK: set = set()


def scratch(shape):
    """A cached int32 device array of this shape (keeps cudaMalloc out of timed launches)."""
    if shape not in _SCRATCH:
        _SCRATCH[shape] = cuda.device_array(shape, np.int32)
    return _SCRATCH[shape]


def allow_shared(kernel, args, nbytes: int) -> None:
    """Let ``kernel`` (compiled for ``args``) use ``nbytes`` of dynamic shared memory: above
    48 KB CUDA needs an explicit opt-in per kernel (no-op in the simulator)."""
    if runtime.MODE != "gpu" or nbytes <= 48 * 1024:
        return
    from numba import typeof
    from numba.cuda.cudadrv.driver import binding, driver

    sig = tuple(typeof(a) for a in args)
    if (kernel, sig) in _SHARED_OK:
        return
    fn = kernel.compile(sig)._codelibrary.get_cufunc()
    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, nbytes, fn.handle, fn.device.id)
    _SHARED_OK.add((kernel, sig))


def _host(variant):
    def run(data, **settings):
        d_bytes, n_ch = to_device(data)
        return launch(variant, d_bytes, n_ch, **settings).copy_to_host()
    run.__name__ = f"histogram_{variant}"
    run.__doc__ = (f"(channels, 256) int32 histogram of uint8 (length, channels) data by the "
                   f"{variant!r} kernel(s); settings as in launch().")
    return run


VARIANTS = {name: _host(name) for name in
            ("global_atomics", "block_per_channel", "two_phase", "tuned")}


def hist1d(x, variant: str = "shared", blocks: int | None = None, threads_per_block: int = 256):
    """Single-channel histogram (256,) int32 of a 1-D uint8 array ('global_atomics'|'shared')."""
    x = np.ascontiguousarray(x)
    if x.dtype != np.uint8 or x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D uint8 array; got {x.dtype} {x.shape}")
    kernel = {"global_atomics": hist1d_global_atomics, "shared": hist1d_shared}[variant]
    d_hist = cuda.to_device(np.zeros(NUM_BINS, np.int32))
    grid = blocks or max(1, min(8 * runtime.sm_count(), math.ceil(x.size / threads_per_block)))
    kernel[grid, threads_per_block](cuda.to_device(x), d_hist)
    return d_hist.copy_to_host()


def reference(data) -> np.ndarray:
    """The exact answer: (channels, 256) int32 counts by numpy (one bincount per channel)."""
    a = validate(data)
    offsets = a.astype(np.int64) + NUM_BINS * np.arange(a.shape[1])
    return np.bincount(offsets.ravel(), minlength=a.shape[1] * NUM_BINS) \
        .reshape(a.shape[1], NUM_BINS).astype(np.int32)


def make_data(length: int, channels: int, distribution: str = "uniform", seed: int = 0):
    """uint8 (length, channels): 'uniform' random, 'skewed' (90% of values in 4 bins) or
    'constant' (every channel holds one value)."""
    rng = np.random.default_rng(seed)
    if distribution == "uniform":
        return rng.integers(0, 256, size=(length, channels), dtype=np.uint8)
    if distribution == "skewed":
        a = rng.integers(0, 256, size=(length, channels), dtype=np.uint8)
        hot = rng.random((length, channels)) < 0.9
        a[hot] = rng.choice(np.array([0, 1, 7, 200], np.uint8), size=int(hot.sum()))
        return a
    if distribution == "constant":
        return np.broadcast_to(rng.integers(0, 256, size=channels, dtype=np.uint8),
                               (length, channels)).copy()
    raise ValueError(f"unknown distribution {distribution!r}: uniform, skewed or constant")
