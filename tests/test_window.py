"""Lesson 03: window-average variants, the counted reads, the exercise and its mutants."""

import numpy as np
import pytest
from conftest import rejects
from numba import cuda, float32

import course
from course.kernels import window

SIZES = [1, 2, 31, 127, 129, 301]


@pytest.mark.parametrize("variant", sorted(window.VARIANTS))
@pytest.mark.parametrize("tpb", [32, 128])
def test_variant_matches_reference_on_odd_sizes(variant, tpb):
    rng = np.random.default_rng(3)
    for n in SIZES:
        x = rng.uniform(-1, 1, n + 2).astype(np.float32)
        y = window.VARIANTS[variant](x, threads_per_block=tpb)
        assert y.dtype == np.float32 and len(y) == len(x) - 2
        np.testing.assert_allclose(y, window.reference(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_shared_x4_grid_stride_loop_on_odd_sizes(blocks):
    """A small grid makes each block run several tiles, the last one partial."""
    rng = np.random.default_rng(7)
    for n in (1, 127, 128, 129, 130, 300, 641):
        x = rng.uniform(-1, 1, n + 2).astype(np.float32)
        d_in, d_out = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, np.float32))
        window.launch("shared_x4", n, d_in, d_out, threads_per_block=32, blocks=blocks)
        np.testing.assert_allclose(
            d_out.copy_to_host(), window.reference(x), rtol=1e-6, atol=1e-6, err_msg=f"n={n}"
        )


@pytest.mark.skipif(course.MODE != "sim", reason="counting arrays need the simulator")
def test_shared_x4_reads_each_input_once_per_tile():
    """One tile of 4 * 32 outputs: 4 * 32 + 2 global reads (v2's count, four times wider)."""
    n, tpb = 4 * 32, 32
    x = np.random.default_rng(0).uniform(-1, 1, n + 2).astype(np.float32)
    d_in = window.counting(x)
    d_out = cuda.device_array(n, dtype=np.float32)
    with window.counting_shared() as sh:
        window.launch("shared_x4", n, d_in, d_out, tpb, blocks=1)
    assert d_in.reads[0] == 4 * 32 + 2
    assert sh.reads[0] == 3 * n


@pytest.mark.skipif(course.MODE != "sim", reason="the simulator's grid cap")
def test_default_grid_is_capped_in_the_simulator():
    assert window.default_blocks("shared_x4", 10**6, 32) == 2
    assert window.default_blocks("shared_x4", 5, 32) == 1


def test_cpu_loop_matches_reference():
    x = np.random.default_rng(0).uniform(-1, 1, 50).astype(np.float32)
    np.testing.assert_allclose(window.cpu_loop(x), window.reference(x), rtol=1e-6, atol=1e-6)


def test_bad_input_raises():
    with pytest.raises(ValueError):
        window.VARIANTS["shared"](np.zeros(2, np.float32))
    with pytest.raises(ValueError):
        window.VARIANTS["global"](np.zeros((4, 4), np.float32))


def test_lecture_counts_reads_per_block():
    """3 * 128 global reads per block for v1, 130 for v2 (and 3 * 128 from shared)."""
    # counting needs the simulator: on a GPU this runs in a simulator subprocess
    counts = window.in_simulator("course.kernels.window", "count_block_reads", threads_per_blk=128)
    assert counts["global"] == {"global": 3 * 128, "shared": 0}
    assert counts["shared"] == {"global": 130, "shared": 3 * 128}


# ---------------------------------------------------------------------------------------
# exercise: reference solution and mutants


@cuda.jit
def solution(N, input, output):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    tx = cuda.threadIdx.x
    T = cuda.blockDim.x
    support = cuda.shared.array(0, float32)
    if index < N + 2:
        support[tx] = input[index]
    if tx < 2 and index + T < N + 2:
        support[T + tx] = input[index + T]
    cuda.syncthreads()
    if index < N:
        output[index] = (support[tx] + support[tx + 1] + support[tx + 2]) / float32(3.0)


@cuda.jit
def missing_syncthreads(N, input, output):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    tx = cuda.threadIdx.x
    T = cuda.blockDim.x
    support = cuda.shared.array(0, float32)
    if index < N + 2:
        support[tx] = input[index]
    if tx < 2 and index + T < N + 2:
        support[T + tx] = input[index + T]
    if index < N:
        output[index] = (support[tx] + support[tx + 1] + support[tx + 2]) / float32(3.0)


@cuda.jit
def missing_halo(N, input, output):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    tx = cuda.threadIdx.x
    support = cuda.shared.array(0, float32)
    if index < N + 2:
        support[tx] = input[index]
    cuda.syncthreads()
    if index < N:
        output[index] = (support[tx] + support[tx + 1] + support[tx + 2]) / float32(3.0)


@cuda.jit
def hardcoded_block_size(N, input, output):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    tx = cuda.threadIdx.x
    support = cuda.shared.array(0, float32)
    if index < N + 2:
        support[tx] = input[index]
    if tx < 2 and index + 32 < N + 2:
        support[32 + tx] = input[index + 32]
    cuda.syncthreads()
    if index < N:
        output[index] = (support[tx] + support[tx + 1] + support[tx + 2]) / float32(3.0)


@cuda.jit
def missing_bounds_guard(N, input, output):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    tx = cuda.threadIdx.x
    T = cuda.blockDim.x
    support = cuda.shared.array(0, float32)
    if index < N + 2:
        support[tx] = input[index]
    if tx < 2 and index + T < N + 2:
        support[T + tx] = input[index + T]
    cuda.syncthreads()
    output[index] = (support[tx] + support[tx + 1] + support[tx + 2]) / float32(3.0)


@cuda.jit
def halo_guard_drops_last_block(N, input, output):
    # skips the halo when the *output* index + T is past N: the last block loses its halo
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    tx = cuda.threadIdx.x
    T = cuda.blockDim.x
    support = cuda.shared.array(0, float32)
    if index < N + 2:
        support[tx] = input[index]
    if tx < 2 and index + T < N:
        support[T + tx] = input[index + T]
    cuda.syncthreads()
    if index < N:
        output[index] = (support[tx] + support[tx + 1] + support[tx + 2]) / float32(3.0)


@cuda.jit
def integer_division(N, input, output):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    tx = cuda.threadIdx.x
    T = cuda.blockDim.x
    support = cuda.shared.array(0, float32)
    if index < N + 2:
        support[tx] = input[index]
    if tx < 2 and index + T < N + 2:
        support[T + tx] = input[index + T]
    cuda.syncthreads()
    if index < N:
        output[index] = (support[tx] + support[tx + 1] + support[tx + 2]) // 3


def test_solution_passes():
    result = course.check("window_average_shared", solution, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize(
    "mutant",
    [
        missing_syncthreads,
        missing_halo,
        hardcoded_block_size,
        missing_bounds_guard,
        halo_guard_drops_last_block,
        integer_division,
    ],
    ids=lambda k: k.__name__,
)
def test_mutant_is_rejected(mutant):
    assert rejects("window_average_shared", mutant)


@pytest.mark.gpu
def test_lecture_size_on_gpu():
    n = 1 << 20
    x = np.random.default_rng(1).uniform(-1, 1, n + 2).astype(np.float32)
    for name, fn in window.VARIANTS.items():
        for tpb in (128, 256, 1024):
            np.testing.assert_allclose(
                fn(x, threads_per_block=tpb),
                window.reference(x),
                rtol=1e-6,
                atol=1e-6,
                err_msg=name,
            )
