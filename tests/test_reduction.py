"""Lesson 02: every reduction variant is right on random odd sizes (int32 exact, float32 within
the order-of-summation bound); the checks accept the reference solutions and reject the
classic wrong kernels (mutants), each named after its bug."""

import math

import numpy as np
import pytest
from conftest import rejects
from numba import cuda

import course
from course.exercises import reduction as ex
from course.kernels import reduction as lesson

WARP = pytest.mark.skipif(
    not lesson.warp_intrinsics_available(),
    reason="warp intrinsics (cuda.syncwarp / cuda.shfl_down_sync) are missing in this "
    "simulator: course.sim.warp has not installed them",
)


def random_input(n, dtype, rng):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, n).astype(dtype)
    return rng.uniform(-1, 1, n).astype(dtype)


def assert_sum(got, x):
    ref = lesson.reference(x)
    assert np.asarray(got).dtype == x.dtype
    if x.dtype.kind == "i":
        assert int(got) == int(ref)
    else:  # tree depth log2(n) + a few, times float32 roundoff, times sum|x|
        bound = (math.log2(x.size) + 40) * 2.0**-24 * np.abs(x).sum(dtype=np.float64)
        assert abs(float(got) - ref) <= bound, (got, ref, bound)


def variant_params(variant):
    return [pytest.param(variant, marks=WARP) if variant in lesson.WARP_VARIANTS else variant]


ALL = [p for v in lesson.VARIANTS for p in variant_params(v)]


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("variant", ALL)
def test_variant_sums_random_odd_sizes(variant, dtype):
    rng = np.random.default_rng()
    sizes = [1, 2 * int(rng.integers(40, 60)) + 1, 2 * int(rng.integers(300, 500)) + 1]
    for n in sizes:
        x = random_input(n, dtype, rng)
        assert_sum(lesson.VARIANTS[variant](x, threads_per_block=64), x)


def test_grid_stride_any_grid_and_elements_per_thread():
    rng = np.random.default_rng()
    x = random_input(1001, "int32", rng)
    for ept in (1, 3, 50, 4000):  # 16 blocks ... a single block
        assert_sum(
            lesson.VARIANTS["grid_stride"](x, threads_per_block=32, elements_per_thread=ept), x
        )


@WARP
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_single_pass_repeated_calls_reuse_the_ticket_counter(dtype):
    # Kernel 8: no memset between calls - the last block must leave count[0] at 0.
    rng = np.random.default_rng()
    n = 2 * int(rng.integers(500, 900)) + 1
    x = random_input(n, dtype, rng)
    # many blocks ... a single block, both load depths; a second call finds count[0] at 0
    for loads, ept in ((8, 1), (8, 4000), (4, 3), (4, 16)):
        r = lesson.Reducer(
            "single_pass",
            n,
            dtype,
            threads_per_block=64,
            elements_per_thread=ept,
            loads_in_flight=loads,
        )
        d_x = cuda.to_device(x)
        for _ in range(2):
            assert_sum(r(d_x).copy_to_host()[0], x)
            assert int(r.count.copy_to_host()[0]) == 0
    # the buffers are cached per device, grid size and dtype, not allocated per call
    a = lesson.Reducer("single_pass", n, dtype, threads_per_block=64, elements_per_thread=3)
    b = lesson.Reducer("single_pass", n, dtype, threads_per_block=64, elements_per_thread=3)
    assert a.count is b.count and a.partials is b.partials


@WARP
def test_single_pass_counter_left_wrong_gives_no_answer():
    # Proof the reset matters: with count[0] not at 0, no block draws the last ticket.
    x = np.ones(999, np.int32)
    r = lesson.Reducer("single_pass", x.size, np.int32, threads_per_block=32, elements_per_thread=4)
    blocks = r.stages[0][0]  # 8
    r.count.copy_to_device(np.array([blocks], np.int32))  # as if a reset were missing
    r.out.copy_to_device(np.array([-1], np.int32))
    assert r(cuda.to_device(x)).copy_to_host()[0] == -1  # out[0] never written
    assert int(r.count.copy_to_host()[0]) == 2 * blocks
    r.count.copy_to_device(np.zeros(1, np.int32))
    assert r(cuda.to_device(x)).copy_to_host()[0] == 999


def test_single_pass_needs_whole_warps():
    with pytest.raises(ValueError, match="32, 1024"):
        lesson.VARIANTS["single_pass"](np.ones(5, np.int32), threads_per_block=16)
    with pytest.raises(ValueError, match="loads_in_flight"):
        lesson.Reducer("single_pass", 5, np.int32, 32, loads_in_flight=2)


def test_second_launch_combines_partials():
    r = lesson.Reducer("sequential", 5000, np.int32, threads_per_block=32)
    assert [b for b, _ in r.stages] == [157, 5, 1]


def test_naive_inplace_global_version_is_wrong():
    # Blocks run one after another in the simulator, so block 0 adds block 1's values
    # before block 1 has summed them: without a barrier between steps the answer is wrong.
    x = np.ones(1000, dtype=np.int32)
    assert lesson.naive_inplace_sum(x, threads_per_block=64) != 1000


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="power of two"):
        lesson.VARIANTS["sequential"](np.ones(5, np.int32), threads_per_block=48)
    with pytest.raises(ValueError, match="64, 1024"):
        lesson.VARIANTS["unroll_last_warp"](np.ones(5, np.int32), threads_per_block=32)
    with pytest.raises(ValueError, match="empty"):
        lesson.VARIANTS["sequential"](np.ones(0, np.int32))
    with pytest.raises(TypeError, match="int32 or float32"):
        lesson.VARIANTS["sequential"](np.ones(5, np.float64))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(lesson.VARIANTS))
def test_lecture_sizes_on_gpu(variant):
    rng = np.random.default_rng()
    for n, dtype in (((1 << 22) + 3, "int32"), (1 << 26, "float32")):
        x = random_input(n, dtype, rng)
        for tpb in (128, 512):
            assert_sum(lesson.VARIANTS[variant](x, threads_per_block=tpb), x)


@pytest.mark.gpu
def test_naive_inplace_is_wrong_on_gpu():
    x = np.ones(1 << 22, dtype=np.int32)
    assert lesson.naive_inplace_sum(x) != 1 << 22


def test_float32_tolerance_is_stated_and_derived():
    tol = ex.GridStride.tolerance(ex.EXERCISES[2], ex.EXERCISES[2].cases()[1], "out")
    assert "2^-24" in str(tol) and tol.atol > 0
    assert ex.BlockSums.tolerance(ex.EXERCISES[0], ex.EXERCISES[0].cases()[0], "g_odata").exact


# -- reduce_sequential (kernel 3): the solution and its mutants ---------------------------


@cuda.jit
def solution_sequential(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def missing_syncthreads(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def tail_block_skipped(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    if (cuda.blockIdx.x + 1) * cuda.blockDim.x > g_idata.size:
        return  # "the last, partial block has nothing to do"
    sdata[tid] = g_idata[cuda.blockIdx.x * cuda.blockDim.x + tid]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def tail_not_zeroed(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    if i < g_idata.size:
        sdata[tid] = g_idata[i]  # past n: whatever the last block left there
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def hard_coded_block_size(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * 64 + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    s = 32
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


def test_reduce_sequential_accepts_solution():
    result = course.check("reduce_sequential", solution_sequential, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize(
    "mutant",
    [missing_syncthreads, tail_block_skipped, tail_not_zeroed, hard_coded_block_size],
    ids=lambda k: k.__name__,
)
def test_reduce_sequential_rejects(mutant):
    assert rejects("reduce_sequential", mutant)


# -- reduce_first_add (kernel 4) ----------------------------------------------------------


@cuda.jit
def first_add_missing_syncthreads_after_load(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * (cuda.blockDim.x * 2) + tid
    mysum = g_idata.dtype.type(0)
    if i < g_idata.size:
        mysum = g_idata[i]
    if i + cuda.blockDim.x < g_idata.size:
        mysum += g_idata[i + cuda.blockDim.x]
    sdata[tid] = mysum
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def first_add_skips_tail(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * (cuda.blockDim.x * 2) + tid
    mysum = g_idata.dtype.type(0)
    if i + cuda.blockDim.x < g_idata.size:  # both or nothing: drops a lone i < n
        mysum = g_idata[i] + g_idata[i + cuda.blockDim.x]
    sdata[tid] = mysum
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def first_add_hard_coded_block_size(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * 128 + tid
    mysum = g_idata.dtype.type(0)
    if i < g_idata.size:
        mysum = g_idata[i]
    if i + 64 < g_idata.size:
        mysum += g_idata[i + 64]
    sdata[tid] = mysum
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


def test_reduce_first_add_accepts_module_kernel_4():
    result = course.check("reduce_first_add", lesson.reduce4, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize(
    "mutant",
    [
        first_add_missing_syncthreads_after_load,
        first_add_skips_tail,
        first_add_hard_coded_block_size,
    ],
    ids=lambda k: k.__name__,
)
def test_reduce_first_add_rejects(mutant):
    assert rejects("reduce_first_add", mutant)


# -- reduce_grid_stride (kernel 7) ---------------------------------------------------------


@cuda.jit
def solution_grid_stride(x, out):
    sdata = cuda.shared.array(0, dtype=x.dtype)
    tid = cuda.threadIdx.x
    acc = x.dtype.type(0)
    for j in range(cuda.grid(1), x.size, cuda.blockDim.x * cuda.gridDim.x):
        acc += x[j]
    sdata[tid] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        cuda.atomic.add(out, 0, sdata[0])


@cuda.jit
def racing_accumulation(x, out):
    sdata = cuda.shared.array(0, dtype=x.dtype)
    tid = cuda.threadIdx.x
    acc = x.dtype.type(0)
    for j in range(cuda.grid(1), x.size, cuda.blockDim.x * cuda.gridDim.x):
        acc += x[j]
    sdata[tid] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        out[0] += sdata[0]  # not atomic: blocks race on a GPU


@cuda.jit
def grid_stride_missing_syncthreads(x, out):
    sdata = cuda.shared.array(0, dtype=x.dtype)
    tid = cuda.threadIdx.x
    acc = x.dtype.type(0)
    for j in range(cuda.grid(1), x.size, cuda.blockDim.x * cuda.gridDim.x):
        acc += x[j]
    sdata[tid] = acc
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        s >>= 1
    if tid == 0:
        cuda.atomic.add(out, 0, sdata[0])


@cuda.jit
def grid_stride_hard_coded_block_size(x, out):
    sdata = cuda.shared.array(0, dtype=x.dtype)
    tid = cuda.threadIdx.x
    acc = x.dtype.type(0)
    for j in range(cuda.grid(1), x.size, 64 * cuda.gridDim.x):
        acc += x[j]
    sdata[tid] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        cuda.atomic.add(out, 0, sdata[0])


@cuda.jit
def grid_stride_skips_tail(x, out):
    sdata = cuda.shared.array(0, dtype=x.dtype)
    tid = cuda.threadIdx.x
    acc = x.dtype.type(0)
    full = (x.size // cuda.blockDim.x) * cuda.blockDim.x  # whole blocks only
    for j in range(cuda.grid(1), full, cuda.blockDim.x * cuda.gridDim.x):
        acc += x[j]
    sdata[tid] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        cuda.atomic.add(out, 0, sdata[0])


def test_reduce_grid_stride_accepts_solution():
    result = course.check("reduce_grid_stride", solution_grid_stride, record=False)
    assert result.passed, repr(result)


def test_reduce_grid_stride_accepts_module_kernel_7():
    assert course.check("reduce_grid_stride", lesson.reduce7, record=False).passed


@pytest.mark.parametrize(
    "mutant",
    [
        racing_accumulation,
        grid_stride_missing_syncthreads,
        grid_stride_hard_coded_block_size,
        grid_stride_skips_tail,
    ],
    ids=lambda k: k.__name__,
)
def test_reduce_grid_stride_rejects(mutant):
    assert rejects("reduce_grid_stride", mutant)


def test_racing_accumulation_report_says_why():
    result = course.check("reduce_grid_stride", racing_accumulation, record=False)
    assert "atomic" in repr(result) and "race" in repr(result)
