"""Lesson 09: every histogram variant is exact on odd shapes and skewed data; the
histogram_shared check accepts the reference solution and rejects the classic bugs."""

import numpy as np
import pytest
from conftest import rejects
from numba import cuda, int32

import course
from course.exercises import histogram as spec
from course.kernels import histogram as lesson

SMALL = {
    "global_atomics": {"threads_per_block": 64},
    "block_per_channel": {"threads_per_block": 32},
    "two_phase": {"threads_per_block": 32, "chunks": 3},
    "tuned": {"warps": 2, "chunks": 2},
}


@pytest.mark.parametrize("variant", sorted(lesson.VARIANTS))
@pytest.mark.parametrize(
    "shape, dist", [((1, 1), "uniform"), ((61, 7), "skewed"), ((37, 66), "constant")]
)
def test_variant_is_exact(variant, shape, dist):
    data = lesson.make_data(*shape, dist, seed=shape[0])
    got = lesson.VARIANTS[variant](data, **SMALL[variant])
    assert got.dtype == np.int32 and got.shape == (shape[1], 256)
    np.testing.assert_array_equal(got, lesson.reference(data))


def test_two_phase_channel_slices():
    data = lesson.make_data(43, 21, "skewed", seed=5)
    got = lesson.VARIANTS["two_phase"](data, channels_per_block=8, threads_per_block=32, chunks=2)
    np.testing.assert_array_equal(got, lesson.reference(data))


@pytest.mark.parametrize("load_bytes", [2, 4, 8])
@pytest.mark.parametrize("slots", [1, 3])
def test_tuned_load_widths_and_flush_modes(load_bytes, slots):
    # odd length and channels; slots=3 with 3 chunks: every block stores its own partial
    data = lesson.make_data(29, 19, "skewed", seed=load_bytes)
    got = lesson.VARIANTS["tuned"](data, warps=2, chunks=3, slots=slots, load_bytes=load_bytes)
    np.testing.assert_array_equal(got, lesson.reference(data))


@pytest.mark.parametrize("variant", ["global_atomics", "shared"])
def test_single_channel_histograms(variant):
    x = lesson.make_data(997, 1, "skewed", seed=3)[:, 0]
    got = lesson.hist1d(x, variant, blocks=3, threads_per_block=64)
    np.testing.assert_array_equal(got, np.bincount(x, minlength=256))


def test_reference_is_one_bincount_per_channel():
    data = lesson.make_data(50, 3, "uniform", seed=1)
    for c in range(3):
        np.testing.assert_array_equal(
            lesson.reference(data)[c], np.bincount(data[:, c], minlength=256)
        )


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones((4, 3), np.int32), "uint8"),
        (np.ones(5, np.uint8), "2-D"),
        (np.ones((0, 3), np.uint8), "empty"),
        (np.ones((3, 0), np.uint8), "empty"),
    ],
)
def test_bad_input_is_a_clear_error(bad, match):
    for fn in lesson.VARIANTS.values():
        with pytest.raises(ValueError, match=match):
            fn(bad)


def test_bad_settings_are_clear_errors():
    data = lesson.make_data(5, 4)
    with pytest.raises(ValueError, match="channels_per_block"):
        lesson.VARIANTS["two_phase"](data, channels_per_block=6)
    with pytest.raises(ValueError, match="load_bytes"):
        lesson.VARIANTS["tuned"](data, load_bytes=3)
    with pytest.raises(ValueError, match="unknown variant"):
        lesson.launch("nope", *lesson.to_device(data))


@pytest.mark.gpu
@pytest.mark.parametrize("dist", ["uniform", "skewed", "constant"])
def test_leaderboard_shape_on_gpu(dist):
    data = lesson.make_data(1 << 20, 512, dist, seed=7)
    expected = lesson.reference(data)
    for name, fn in lesson.VARIANTS.items():
        np.testing.assert_array_equal(fn(data), expected, err_msg=name)


# -- histogram_shared: the solution and its mutants -----------------------------------------

CHANNELS_PER_BLOCK = 4  # read by the spec from these kernels' globals
ROWS_PER_BLOCK = 64
SHARED_BINS = CHANNELS_PER_BLOCK * 256


@cuda.jit
def solution_histogram(data, hist):
    sdata = cuda.shared.array(SHARED_BINS, int32)
    t = cuda.threadIdx.x
    for i in range(t, SHARED_BINS, cuda.blockDim.x):
        sdata[i] = 0
    cuda.syncthreads()
    c0 = cuda.blockIdx.x * CHANNELS_PER_BLOCK
    r0 = cuda.blockIdx.y * ROWS_PER_BLOCK
    n_ch = min(CHANNELS_PER_BLOCK, data.shape[1] - c0)
    n_rows = min(ROWS_PER_BLOCK, data.shape[0] - r0)
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        cuda.atomic.add(sdata, c * 256 + int32(data[r0 + r, c0 + c]), 1)
    cuda.syncthreads()
    for i in range(t, n_ch * 256, cuda.blockDim.x):
        if sdata[i] > 0:
            cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])


@cuda.jit
def non_atomic_shared_increment(data, hist):
    sdata = cuda.shared.array(SHARED_BINS, int32)
    t = cuda.threadIdx.x
    for i in range(t, SHARED_BINS, cuda.blockDim.x):
        sdata[i] = 0
    cuda.syncthreads()
    c0 = cuda.blockIdx.x * CHANNELS_PER_BLOCK
    r0 = cuda.blockIdx.y * ROWS_PER_BLOCK
    n_ch = min(CHANNELS_PER_BLOCK, data.shape[1] - c0)
    n_rows = min(ROWS_PER_BLOCK, data.shape[0] - r0)
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        j = c * 256 + int32(data[r0 + r, c0 + c])
        sdata[j] = sdata[j] + 1
    cuda.syncthreads()
    for i in range(t, n_ch * 256, cuda.blockDim.x):
        if sdata[i] > 0:
            cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])


@cuda.jit
def missing_syncthreads_before_flush(data, hist):
    sdata = cuda.shared.array(SHARED_BINS, int32)
    t = cuda.threadIdx.x
    for i in range(t, SHARED_BINS, cuda.blockDim.x):
        sdata[i] = 0
    cuda.syncthreads()
    c0 = cuda.blockIdx.x * CHANNELS_PER_BLOCK
    r0 = cuda.blockIdx.y * ROWS_PER_BLOCK
    n_ch = min(CHANNELS_PER_BLOCK, data.shape[1] - c0)
    n_rows = min(ROWS_PER_BLOCK, data.shape[0] - r0)
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        cuda.atomic.add(sdata, c * 256 + int32(data[r0 + r, c0 + c]), 1)
    for i in range(t, n_ch * 256, cuda.blockDim.x):
        if sdata[i] > 0:
            cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])


@cuda.jit
def missing_shared_zeroing(data, hist):
    sdata = cuda.shared.array(SHARED_BINS, int32)
    t = cuda.threadIdx.x
    cuda.syncthreads()
    c0 = cuda.blockIdx.x * CHANNELS_PER_BLOCK
    r0 = cuda.blockIdx.y * ROWS_PER_BLOCK
    n_ch = min(CHANNELS_PER_BLOCK, data.shape[1] - c0)
    n_rows = min(ROWS_PER_BLOCK, data.shape[0] - r0)
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        cuda.atomic.add(sdata, c * 256 + int32(data[r0 + r, c0 + c]), 1)
    cuda.syncthreads()
    for i in range(t, n_ch * 256, cuda.blockDim.x):
        if sdata[i] > 0:
            cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])


@cuda.jit
def tail_rows_dropped(data, hist):
    sdata = cuda.shared.array(SHARED_BINS, int32)
    t = cuda.threadIdx.x
    for i in range(t, SHARED_BINS, cuda.blockDim.x):
        sdata[i] = 0
    cuda.syncthreads()
    c0 = cuda.blockIdx.x * CHANNELS_PER_BLOCK
    r0 = cuda.blockIdx.y * ROWS_PER_BLOCK
    n_ch = min(CHANNELS_PER_BLOCK, data.shape[1] - c0)
    n_rows = ROWS_PER_BLOCK if r0 + ROWS_PER_BLOCK <= data.shape[0] else 0
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        cuda.atomic.add(sdata, c * 256 + int32(data[r0 + r, c0 + c]), 1)
    cuda.syncthreads()
    for i in range(t, n_ch * 256, cuda.blockDim.x):
        if sdata[i] > 0:
            cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])


def test_solution_passes():
    result = course.check("histogram_shared", solution_histogram, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize(
    "mutant",
    [
        non_atomic_shared_increment,
        missing_syncthreads_before_flush,
        missing_shared_zeroing,
        tail_rows_dropped,
    ],
    ids=lambda k: k.py_func.__name__,
)
def test_mutant_is_rejected(mutant):
    assert rejects("histogram_shared", mutant)


def test_launch_constants_come_from_the_kernel_module():
    assert spec.launch_constants(solution_histogram) == {
        "CHANNELS_PER_BLOCK": 4,
        "ROWS_PER_BLOCK": 64,
    }
