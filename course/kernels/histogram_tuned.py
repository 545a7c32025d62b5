"""Lesson 09, section 5 - the tuned multi-channel histogram kernels.

Bin-major, lane-private shared counters (lane x only touches bank x), two 16-bit counters in
each 32-bit word, wide loads with the next batch in flight, uint32 index math.
``histogram_pairs`` reads 2 bytes a lane, ``histogram_tuned`` 4 (12 rows a batch, the next 12
loading while they are counted), ``histogram_tuned_wide`` 8.  :mod:`course.kernels.histogram`
launches them (``launch("tuned", ...)``) beside the lecture-style kernels.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, uint32

NUM_BINS = 256                     # one bin per uint8 value
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


# tuned: load_bytes -> (kernel, word dtype, dynamic shared bytes, blocks per SM by default)
TUNED_KERNELS = {2: (histogram_pairs, np.uint16, 0, 2),
                 4: (histogram_tuned, np.uint32, 4 * W4_SHARED, 2),
                 8: (histogram_tuned_wide, np.uint64, 4 * W8_SHARED, 1)}

PTX_SIGNATURES = {
    "histogram_pairs": "void(uint16[:, ::1], int32[:, :, ::1], int64)",
    "histogram_tuned": "void(uint32[:, ::1], int32[:, :, ::1], int64)",
    "histogram_tuned_wide": "void(uint64[:, ::1], int32[:, :, ::1], int64)",
}
