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
from numba import cuda, int32, uint32

from .. import runtime

NOTEBOOKS = ["09_histogram"]
NOT_SHOWN = {"zero_fill"}          # a helper that zeroes the output before atomics

NUM_BINS = 256                     # one bin per uint8 value
TP_CHANNELS = 32                   # two_phase: default channels per block (8 uint32 words)
TP_STRIDE = NUM_BINS + 1           # two_phase: padded shared row per channel (bank spread)
LANES = 32                         # tuned: uint16 columns per block = 64 channels
MAX_TUNED_ROWS = 65535             # tuned: 16-bit shared counters hold at most this many rows
TUNED_SHARED = NUM_BINS * LANES        # pairs: uint32 words of shared memory (32 KB)
W4_SHARED = NUM_BINS * 2 * LANES       # tuned: uint32 words of dynamic shared memory (64 KB)
W8_SHARED = NUM_BINS * 4 * LANES       # tuned_wide: the same for 8 channels a lane (128 KB)
# uint32 constants for the tuned kernels' index math (an int literal would promote to int64)
U2, U3, U4, U11, U12, U32 = (np.uint32(k) for k in (2, 3, 4, 11, 12, 32))
S6, S7, S8, S16, S24 = (np.uint32(k) for k in (6, 7, 8, 16, 24))
S32, M32 = np.uint64(32), np.uint64(0xFFFFFFFF)
M8, ONE_LO, ONE_HI = np.uint32(0xFF), np.uint32(1), np.uint32(1 << 16)


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
def histogram_pairs(pairs, out, rows_per_block):
    # pairs (length, channels/2) uint16 in global memory: pairs[r, p] = channels 2p, 2p + 1.
    # Block (bx, by), threads (32, W): lane x owns column bx * 32 + x (2 channels) for the
    # rows [by * rows_per_block, ...) that warp y visits: r0 + y, r0 + y + W, ...
    # sh[v * 32 + x] (shared) packs lane x's two 16-bit counters of value v: every lane
    # only touches its own bank, so no bank conflicts whatever the data.  Flush: atomics
    # into out[by % slots] (global; slots = 1: straight into the histogram).
    sh = cuda.shared.array(TUNED_SHARED, uint32)
    x = cuda.threadIdx.x
    nw = cuda.blockDim.y
    tid = cuda.threadIdx.y * LANES + x
    for i in range(tid, TUNED_SHARED, LANES * nw):
        sh[i] = 0
    cuda.syncthreads()
    col = cuda.blockIdx.x * LANES + x
    r = cuda.blockIdx.y * rows_per_block + cuda.threadIdx.y
    r1 = min(cuda.blockIdx.y * rows_per_block + rows_per_block, pairs.shape[0])
    if col < pairs.shape[1]:
        while r + 3 * nw < r1:              # 4 independent loads in flight per thread
            p0 = pairs[r, col]
            p1 = pairs[r + nw, col]
            p2 = pairs[r + 2 * nw, col]
            p3 = pairs[r + 3 * nw, col]
            cuda.atomic.add(sh, (p0 & 0xFF) * LANES + x, 1)
            cuda.atomic.add(sh, (p0 >> 8) * LANES + x, 65536)
            cuda.atomic.add(sh, (p1 & 0xFF) * LANES + x, 1)
            cuda.atomic.add(sh, (p1 >> 8) * LANES + x, 65536)
            cuda.atomic.add(sh, (p2 & 0xFF) * LANES + x, 1)
            cuda.atomic.add(sh, (p2 >> 8) * LANES + x, 65536)
            cuda.atomic.add(sh, (p3 & 0xFF) * LANES + x, 1)
            cuda.atomic.add(sh, (p3 >> 8) * LANES + x, 65536)
            r += 4 * nw
        while r < r1:
            p0 = pairs[r, col]
            cuda.atomic.add(sh, (p0 & 0xFF) * LANES + x, 1)
            cuda.atomic.add(sh, (p0 >> 8) * LANES + x, 65536)
            r += nw
    cuda.syncthreads()
    slot = cuda.blockIdx.y % out.shape[0]
    for i in range(tid, TUNED_SHARED, LANES * nw):
        v = i // LANES
        c = 2 * (cuda.blockIdx.x * LANES + (i - v * LANES))
        word = sh[i]
        if (word & 0xFFFF) != 0 and c < out.shape[1]:
            cuda.atomic.add(out, (slot, c, v), word & 0xFFFF)
        if (word >> 16) != 0 and c + 1 < out.shape[1]:
            cuda.atomic.add(out, (slot, c + 1, v), word >> 16)


@cuda.jit
def histogram_tuned(words, out, rows_per_block):
    # words (length, channels/4) uint32 in global memory: words[r, w] = channels 4w .. 4w + 3.
    # Block (bx, by), threads (32, W): lane x owns word column bx * 32 + x (4 channels) for the
    # rows r0 + y, r0 + y + W, ... of the chunk [r0, r0 + rows_per_block) that warp y visits.
    # sh (dynamic shared, 64 KB): sh[(v * 2 + j) * 32 + x] packs lane x's 16-bit counters of
    # value v for its channels 2j (low half) and 2j + 1 (high half): a lane only touches its
    # own bank.  Index math in uint32; 12 to 24 loads in flight.  Flush: out[by % slots]
    # (global) with atomics, or plain stores when every block owns its slot (slots = chunks).
    sh = cuda.shared.array(0, uint32)
    x = uint32(cuda.threadIdx.x)
    nw = uint32(cuda.blockDim.y)
    tid = uint32(cuda.threadIdx.y) * U32 + x
    for i in range(tid, W4_SHARED, nw * U32):
        sh[i] = uint32(0)
    cuda.syncthreads()
    col = uint32(cuda.blockIdx.x) * U32 + x
    r0 = uint32(cuda.blockIdx.y) * uint32(rows_per_block)
    r1 = min(r0 + uint32(rows_per_block), uint32(words.shape[0]))
    r = r0 + uint32(cuda.threadIdx.y)
    if col < uint32(words.shape[1]):
        # 12 words a batch (one every nw rows); the next batch loads while this one is counted
        more = r + U11 * nw < r1
        n0 = n1 = n2 = n3 = n4 = n5 = n6 = n7 = n8 = n9 = n10 = n11 = uint32(0)
        if more:
            n0 = words[r, col]
            n1 = words[r + uint32(1) * nw, col]
            n2 = words[r + uint32(2) * nw, col]
            n3 = words[r + uint32(3) * nw, col]
            n4 = words[r + uint32(4) * nw, col]
            n5 = words[r + uint32(5) * nw, col]
            n6 = words[r + uint32(6) * nw, col]
            n7 = words[r + uint32(7) * nw, col]
            n8 = words[r + uint32(8) * nw, col]
            n9 = words[r + uint32(9) * nw, col]
            n10 = words[r + uint32(10) * nw, col]
            n11 = words[r + uint32(11) * nw, col]
        while more:
            batch = (n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11)
            r += U12 * nw
            more = r + U11 * nw < r1
            if more:
                n0 = words[r, col]
                n1 = words[r + uint32(1) * nw, col]
                n2 = words[r + uint32(2) * nw, col]
                n3 = words[r + uint32(3) * nw, col]
                n4 = words[r + uint32(4) * nw, col]
                n5 = words[r + uint32(5) * nw, col]
                n6 = words[r + uint32(6) * nw, col]
                n7 = words[r + uint32(7) * nw, col]
                n8 = words[r + uint32(8) * nw, col]
                n9 = words[r + uint32(9) * nw, col]
                n10 = words[r + uint32(10) * nw, col]
                n11 = words[r + uint32(11) * nw, col]
            for w in batch:
                cuda.atomic.add(sh, ((w & M8) << S6) + x, ONE_LO)
                cuda.atomic.add(sh, (((w >> S8) & M8) << S6) + x, ONE_HI)
                cuda.atomic.add(sh, (((w >> S16) & M8) << S6) + U32 + x, ONE_LO)
                cuda.atomic.add(sh, ((w >> S24) << S6) + U32 + x, ONE_HI)
        while r < r1:
            w = words[r, col]
            cuda.atomic.add(sh, ((w & M8) << S6) + x, ONE_LO)
            cuda.atomic.add(sh, (((w >> S8) & M8) << S6) + x, ONE_HI)
            cuda.atomic.add(sh, (((w >> S16) & M8) << S6) + U32 + x, ONE_LO)
            cuda.atomic.add(sh, ((w >> S24) << S6) + U32 + x, ONE_HI)
            r += nw
    cuda.syncthreads()
    slot = cuda.blockIdx.y % out.shape[0]
    store = out.shape[0] == cuda.gridDim.y
    for i in range(tid, W4_SHARED, nw * U32):
        v = i >> 6                                  # i = (v * 2 + j) * 32 + lane
        c = 4 * (cuda.blockIdx.x * 32 + (i & 31)) + 2 * ((i >> 5) & 1)
        word = sh[i]
        if c < out.shape[1]:
            if store:
                out[slot, c, v] = word & 0xFFFF
            elif (word & 0xFFFF) != 0:
                cuda.atomic.add(out, (slot, c, v), word & 0xFFFF)
        if c + 1 < out.shape[1]:
            if store:
                out[slot, c + 1, v] = word >> 16
            elif (word >> 16) != 0:
                cuda.atomic.add(out, (slot, c + 1, v), word >> 16)


@cuda.jit
def histogram_tuned_wide(dwords, out, rows_per_block):
    # dwords (length, channels/8) uint64 in global memory: dwords[r, w] = channels 8w .. 8w + 7.
    # Same scheme as histogram_tuned with 8-byte loads: lane x owns 8 channels of column
    # bx * 32 + x; sh (dynamic shared, 128 KB): sh[(v * 4 + j) * 32 + x] packs lane x's 16-bit
    # counters of value v for channels 2j and 2j + 1.
    sh = cuda.shared.array(0, uint32)
    x = uint32(cuda.threadIdx.x)
    nw = uint32(cuda.blockDim.y)
    tid = uint32(cuda.threadIdx.y) * U32 + x
    for i in range(tid, W8_SHARED, nw * U32):
        sh[i] = uint32(0)
    cuda.syncthreads()
    col = uint32(cuda.blockIdx.x) * U32 + x
    r0 = uint32(cuda.blockIdx.y) * uint32(rows_per_block)
    r1 = min(r0 + uint32(rows_per_block), uint32(dwords.shape[0]))
    r = r0 + uint32(cuda.threadIdx.y)
    x3 = uint32(x + U2 * U32)           # lane x's counters of channels 4 .. 7
    if col < uint32(dwords.shape[1]):
        while r + U3 * nw < r1:             # 4 independent 8-byte loads in flight
            d0 = dwords[r, col]
            d1 = dwords[r + nw, col]
            d2 = dwords[r + U2 * nw, col]
            d3 = dwords[r + U3 * nw, col]
            for d in (d0, d1, d2, d3):
                for w, xj in ((uint32(d & M32), x), (uint32(d >> S32), x3)):
                    cuda.atomic.add(sh, ((w & M8) << S7) + xj, ONE_LO)
                    cuda.atomic.add(sh, (((w >> S8) & M8) << S7) + xj, ONE_HI)
                    cuda.atomic.add(sh, (((w >> S16) & M8) << S7) + xj + U32, ONE_LO)
                    cuda.atomic.add(sh, ((w >> S24) << S7) + xj + U32, ONE_HI)
            r += U4 * nw
        while r < r1:
            d = dwords[r, col]
            for w, xj in ((uint32(d & M32), x), (uint32(d >> S32), x3)):
                cuda.atomic.add(sh, ((w & M8) << S7) + xj, ONE_LO)
                cuda.atomic.add(sh, (((w >> S8) & M8) << S7) + xj, ONE_HI)
                cuda.atomic.add(sh, (((w >> S16) & M8) << S7) + xj + U32, ONE_LO)
                cuda.atomic.add(sh, ((w >> S24) << S7) + xj + U32, ONE_HI)
            r += nw
    cuda.syncthreads()
    slot = cuda.blockIdx.y % out.shape[0]
    store = out.shape[0] == cuda.gridDim.y
    for i in range(tid, W8_SHARED, nw * U32):
        v = i >> 7                                  # i = (v * 4 + j) * 32 + lane
        c = 8 * (cuda.blockIdx.x * 32 + (i & 31)) + 2 * ((i >> 5) & 3)
        word = sh[i]
        if c < out.shape[1]:
            if store:
                out[slot, c, v] = word & 0xFFFF
            elif (word & 0xFFFF) != 0:
                cuda.atomic.add(out, (slot, c, v), word & 0xFFFF)
        if c + 1 < out.shape[1]:
            if store:
                out[slot, c + 1, v] = word >> 16
            elif (word >> 16) != 0:
                cuda.atomic.add(out, (slot, c + 1, v), word >> 16)


@cuda.jit
def zero_fill(a):
    # Thread g zeroes elements g, g + T, ... of the flattened 3-D int32 array a.
    n1, n2 = a.shape[1], a.shape[2]
    for g in range(cuda.grid(1), a.shape[0] * n1 * n2, cuda.gridsize(1)):
        k = g // (n1 * n2)
        rest = g - k * n1 * n2
        a[k, rest // n2, rest - (rest // n2) * n2] = 0


# tuned: load_bytes -> (kernel, word dtype, dynamic shared bytes, blocks per SM by default)
TUNED_KERNELS = {2: (histogram_pairs, np.uint16, 0, 2),
                 4: (histogram_tuned, np.uint32, 4 * W4_SHARED, 2),
                 8: (histogram_tuned_wide, np.uint64, 4 * W8_SHARED, 1)}

PTX_SIGNATURES = {
    "hist1d_global_atomics": "void(uint8[::1], int32[::1])",
    "hist1d_shared": "void(uint8[::1], int32[::1])",
    "histogram_global_atomics": "void(uint8[:, ::1], int32[:, ::1])",
    "histogram_block_per_channel": "void(uint8[:, ::1], int32[:, ::1])",
    "histogram_two_phase": "void(uint32[:, ::1], int32[:, :, ::1], int64, int64)",
    "reduce_partials": "void(int32[:, :, ::1], int32[:, ::1])",
    "histogram_pairs": "void(uint16[:, ::1], int32[:, :, ::1], int64)",
    "histogram_tuned": "void(uint32[:, ::1], int32[:, :, ::1], int64)",
    "histogram_tuned_wide": "void(uint64[:, ::1], int32[:, :, ::1], int64)",
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


def sm_count() -> int:
    """Streaming multiprocessors of this GPU (2 in the simulator, to keep launches small)."""
    return cuda.get_current_device().MULTIPROCESSOR_COUNT if runtime.MODE == "gpu" else 2


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
        histogram_global_atomics[32 * sm_count(), threads_per_block](d_bytes, hist)
    elif variant == "block_per_channel":
        histogram_block_per_channel[n_ch, threads_per_block](d_bytes, hist)
    elif variant == "two_phase":
        cpb = channels_per_block
        if cpb % 4 or not 4 <= cpb <= 44 or threads_per_block < cpb // 4:
            raise ValueError(f"channels_per_block must be a multiple of 4 in [4, 44] and at "
                             f"most 4 x threads_per_block; got {cpb}")
        gx = math.ceil(n_ch / cpb)
        rows, gy = chunking(length, chunks or math.ceil(4 * sm_count() / gx))
        partial = cuda.device_array((gy, n_ch, NUM_BINS), np.int32)
        histogram_two_phase[(gx, gy), threads_per_block, 0, cpb * TP_STRIDE * 4](
            d_bytes.view(np.uint32), partial, rows, cpb)
        reduce_partials[blocks(hist.size), 256](partial, hist)
    elif variant == "tuned":
        if load_bytes not in TUNED_KERNELS:
            raise ValueError(f"load_bytes must be 2, 4 or 8; got {load_bytes!r}")
        kernel, view, shmem, per_sm = TUNED_KERNELS[load_bytes]
        gx = math.ceil(d_bytes.shape[1] // load_bytes / LANES)
        rows, gy = chunking(length, chunks or math.ceil(per_sm * sm_count() / gx),
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
    kernel[blocks or 8 * sm_count(), threads_per_block](cuda.to_device(x), d_hist)
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
