"""Warp intrinsics in the simulator (course/sim/warp.py): each checked against its definition."""

import numpy as np
import pytest
from numba import cuda, float32, int32

import course

pytestmark = pytest.mark.skipif(course.MODE != "sim", reason="simulator-only (simwarp)")

FULL = 0xFFFFFFFF
EVEN = 0x55555555
LOW = 0x0000FFFF


# ---------------------------------------------------------------------------------------
# kernels: each thread of a 64-thread block (2 warps) calls one intrinsic; threads whose
# lane is not in `mask` skip it (and write -999)


@cuda.jit
def k_shfl(mode, mask, arg, vals, out):
    i = cuda.threadIdx.x
    lane = i % 32
    if (mask >> lane) & 1:
        v = vals[i]
        if mode == 0:
            out[i] = cuda.shfl_sync(mask, v, arg)
        elif mode == 1:
            out[i] = cuda.shfl_up_sync(mask, v, arg)
        elif mode == 2:
            out[i] = cuda.shfl_down_sync(mask, v, arg)
        else:
            out[i] = cuda.shfl_xor_sync(mask, v, arg)
    else:
        out[i] = -999


@cuda.jit
def k_vote(mask, preds, out):
    i = cuda.threadIdx.x
    lane = i % 32
    if (mask >> lane) & 1:
        p = preds[i]
        out[i, 0] = cuda.ballot_sync(mask, p)
        out[i, 1] = 1 if cuda.all_sync(mask, p) else 0
        out[i, 2] = 1 if cuda.any_sync(mask, p) else 0
        out[i, 3] = cuda.activemask()
        out[i, 4] = cuda.laneid
        cuda.syncwarp(mask)
        out[i, 5] = cuda.popc(cuda.ballot_sync(mask, p))


def shfl_reference(mode, mask, arg, vals):
    out = np.full(vals.shape, -999, dtype=vals.dtype)
    for i in range(vals.size):
        lane, base = i % 32, i - i % 32
        if not (mask >> lane) & 1:
            continue
        b = arg & 31
        src = {0: b, 1: lane - b, 2: lane + b, 3: lane ^ b}[mode]
        if not 0 <= src < 32 or not (mask >> src) & 1:
            src = lane  # out of range (or not participating): own value
        out[i] = vals[base + src]
    return out


@pytest.mark.parametrize("mask", [FULL, EVEN, LOW, 0x80000001])
@pytest.mark.parametrize(
    "mode,arg",
    [(0, 0), (0, 5), (0, 37), (1, 1), (1, 16), (2, 1), (2, 8), (2, 31), (3, 1), (3, 16), (3, 31)],
)
def test_shuffles_match_their_definition(mode, arg, mask):
    vals = np.arange(64, dtype=np.int32) * 7 + 3
    out = np.zeros(64, dtype=np.int32)
    k_shfl[1, 64](mode, mask, arg, vals, out)
    np.testing.assert_array_equal(out, shfl_reference(mode, mask, arg, vals))


def test_shuffle_float64_values_keep_their_type():
    vals = np.random.default_rng(1).standard_normal(64)
    out = np.zeros(64)
    k_shfl[1, 64](2, FULL, 3, vals, out)
    np.testing.assert_array_equal(out, shfl_reference(2, FULL, 3, vals))


@pytest.mark.parametrize("mask", [FULL, EVEN, LOW, 0x1])
def test_votes_match_their_definition(mask):
    rng = np.random.default_rng(mask)
    preds = (rng.random(64) < 0.5).astype(np.int32)
    preds[32:] = 1  # second warp: all true
    out = np.zeros((64, 6), dtype=np.int64)
    k_vote[1, 64](mask, preds, out)
    for i in range(64):
        lane, base = i % 32, i - i % 32
        if not (mask >> lane) & 1:
            continue
        ballot = sum(1 << l for l in range(32) if (mask >> l) & 1 and preds[base + l])
        assert out[i, 0] & FULL == ballot, i
        assert out[i, 0] == np.uint32(ballot).view(np.int32)  # int32 like on a GPU
        assert out[i, 1] == (ballot == mask)
        assert out[i, 2] == (ballot != 0)
        assert out[i, 3] & mask == mask  # lanes outside the mask may have exited
        assert out[i, 4] == lane
        assert out[i, 5] == bin(ballot).count("1")


@cuda.jit
def k_partial_block(out):
    i = cuda.threadIdx.x
    out[i] = cuda.activemask()
    out[i + 40] = cuda.shfl_down_sync(FULL, i, 4)


def test_last_warp_of_an_odd_block_has_only_its_lanes():
    out = np.zeros(80, dtype=np.int64)
    k_partial_block[1, 40](out)
    assert (out[:32] == FULL).all() and (out[32:40] == 0xFF).all()
    assert list(out[40:72]) == [i + 4 if i % 32 < 28 else i for i in range(32)]
    assert list(out[72:80]) == [36, 37, 38, 39, 36, 37, 38, 39]  # lanes 4-7 read own value


@cuda.jit
def warp_sum(x, out):
    """Block sum: each warp reduces with shfl_down_sync, lane 0 adds to out (atomic)."""
    i = cuda.grid(1)
    v = x[i] if i < x.size else float32(0)
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)


@cuda.jit
def warp_sum_xor(x, out):
    """Butterfly: after five xor steps every lane holds its warp's sum."""
    i = cuda.grid(1)
    v = x[i]
    for k in (16, 8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, k)
    out[i] = v


def test_warp_shuffle_reduction_gives_the_sum():
    x = np.random.default_rng(2).random(1000).astype(np.float32)
    out = np.zeros(1, dtype=np.float32)
    warp_sum[8, 128](x, out)
    assert out[0] == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-5)
    y = np.zeros(256, dtype=np.float32)
    warp_sum_xor[2, 128](x[:256], y)
    expect = x[:256].astype(np.float64).reshape(8, 32).sum(axis=1).repeat(32)
    np.testing.assert_allclose(y, expect, rtol=1e-5)


@cuda.jit
def exits_early(n, out):
    """Lanes >= n return first; the others shuffle with the full mask (undefined in CUDA
    for the exited lanes, but the remaining lanes must not hang)."""
    i = cuda.threadIdx.x
    if i >= n:
        return
    v = cuda.shfl_down_sync(FULL, i * 10, 1)
    cuda.syncwarp()
    out[i] = v + cuda.ballot_sync(cuda.activemask(), True) * 0


@cuda.jit
def exits_then_syncthreads(out):
    i = cuda.threadIdx.x
    if i % 2 == 1:
        return
    cuda.syncthreads()
    out[i] = cuda.shfl_xor_sync(EVEN, i, 2)


def test_no_deadlock_when_lanes_have_exited():
    out = np.zeros(32, dtype=np.int64)
    exits_early[1, 32](20, out)
    assert list(out[:19]) == [10 * (i + 1) for i in range(19)]
    assert out[19] == 190  # lane 20 exited: own value
    out = np.zeros(64, dtype=np.int64)
    exits_then_syncthreads[1, 64](out)
    assert list(out[::2]) == [i ^ 2 for i in range(0, 64, 2)]


@cuda.jit
def shuffle_vs_syncthreads(out):
    i = cuda.threadIdx.x
    if i < 16:
        out[i] = cuda.shfl_sync(FULL, i, 0)  # lanes 16-31 never come: they wait below
    cuda.syncthreads()


@cuda.jit
def caller_not_in_mask(out):
    out[cuda.threadIdx.x] = cuda.shfl_sync(0x1, 1, 0)


@cuda.jit
def mixed_intrinsics(out):
    i = cuda.threadIdx.x
    if i < 16:
        out[i] = cuda.shfl_sync(FULL, i, 0)
    else:
        out[i] = cuda.ballot_sync(FULL, True)


@pytest.mark.parametrize(
    "kernel,words",
    [
        (shuffle_vs_syncthreads, "deadlock"),
        (caller_not_in_mask, "not in the mask"),
        (mixed_intrinsics, "different warp intrinsics"),
    ],
)
def test_misuse_raises_instead_of_hanging(kernel, words):
    out = np.zeros(32, dtype=np.int64)
    with pytest.raises(Exception, match=words):
        kernel[1, 32](out)


@cuda.jit
def sync_then_read(buf, out):
    """shared write, syncwarp, neighbour read: the classic warp-synchronous step."""
    s = cuda.shared.array(32, int32)
    i = cuda.threadIdx.x
    s[i] = buf[i]
    cuda.syncwarp()
    out[i] = s[(i + 1) % 32]


def test_syncwarp_orders_shared_memory():
    buf = np.arange(32, dtype=np.int32) * 3
    out = np.zeros(32, dtype=np.int32)
    sync_then_read[1, 32](buf, out)
    np.testing.assert_array_equal(out, np.roll(buf, -1))


def test_install_is_idempotent_and_bit_helpers_see_32_bits():
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    from course.sim import warp as simwarp

    simwarp.install()
    simwarp.install()
    m = FakeCUDAModule((1, 1, 1), (1, 1, 1), 0)
    assert m.popc(np.int32(-1)) == 32 and m.popc(-1) == 32 and m.popc(5) == 2
    assert m.ffs(np.int32(-(2**31))) == 32 and m.ffs(0) == 0 and m.ffs(12) == 3
    assert m.clz(np.int32(1)) == 31 and m.clz(np.int64(1)) == 63
    assert m.brev(np.uint32(1)) == 1 << 31


@cuda.jit
def one_lane_crashes(out):
    i = cuda.threadIdx.x
    if i == 3:
        out[i + 1000] = 1  # IndexError in lane 3 only
    out[i] = cuda.shfl_sync(FULL, i, 3)
    cuda.syncthreads()


def test_an_exception_in_one_lane_does_not_hang_the_others():
    out = np.zeros(64, dtype=np.int64)
    with pytest.raises(IndexError):
        one_lane_crashes[1, 64](out)
