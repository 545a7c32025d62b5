"""Tune figures a useless or renamed kernel could game in the simulator (course/sim/trace_figures.py,
course/exercises/tune_figures.py): each attack gets no point, each honest kernel keeps its figure.

1. useless reads diluted "bytes used / bytes moved" (the given chunked add passed at 0.95):
   efficiency is now the bytes the case needs / the bytes moved, so extra traffic lowers it;
2. reads were counted only for parameters named A, B (or data): a naive matmul written as
   (P, Q, C) measured 0 bytes per FLOP; every array the launch passed now counts, by position;
3. variants: reads through atomics (were not counted), a block sum through shared atomics
   (no bank conflict counted), a histogram that races only at the measured size, a figure
   whose reads the tracer never saw;
4. counts brought to 0 by doing the work slowly;
5. kernels slower than the given one with a passing count: one thread of each block does
   the matmul, one warp of the grid does the add or the centering, Harris' divergent
   reduction #0 (``tid % (2 * s)``) and a reduction that idles every other lane: every
   target also bounds the busiest thread (a fair share) and the warps' idle lanes.
Only the measured launch runs here (``check.measure``): a second or so per kernel.
"""

import importlib

import numpy as np
import pytest
from numba import cuda, float32, int32

import course
from course.exercises import get
from course.exercises.tune_figures import needed_bytes
from course.sim import trace, trace_figures

check_mod = importlib.import_module("course.grading.judging.check")
pytestmark = pytest.mark.skipif(course.MODE == "gpu", reason="the simulator's counted figures")


def _measure(name, kernel):
    return check_mod.measure(get(name), kernel, 7)


# -- 1. useless reads ----------------------------------------------------------------------


@cuda.jit
def chunked_add(n, x, y):
    threads = cuda.gridsize(1)
    chunk = (n + threads - 1) // threads
    start = cuda.grid(1) * chunk
    for k in range(start, min(start + chunk, n)):
        y[k] = x[k] + y[k]


@cuda.jit
def dilute_add(n, x, y):
    # the red team's attack, scaled down: the chunked add plus useless coalesced reads of x,
    # only at the measured size
    threads = cuda.gridsize(1)
    chunk = (n + threads - 1) // threads
    start = cuda.grid(1) * chunk
    for k in range(start, min(start + chunk, n)):
        y[k] = x[k] + y[k]
    i = cuda.grid(1)
    acc = float32(0.0)
    if n == 4096 and i < n:
        for _r in range(64):
            acc += x[i]
    if acc == float32(1.2345e30):
        y[0] = acc


@cuda.jit
def rewrite_add(n, x, y):
    # useless writes: every result written four times
    threads = cuda.gridsize(1)
    chunk = (n + threads - 1) // threads
    start = cuda.grid(1) * chunk
    for k in range(start, min(start + chunk, n)):
        v = x[k] + y[k]
        for _r in range(4):
            y[k] = v


def _figure(res) -> float:
    return float(res.message.split("measured ")[1].split(",")[0])


def _old_efficiency(kernel) -> float:
    """The figure as it was: distinct bytes per request / bytes moved, loads and stores."""
    spec = get("tune_vector_add")
    case = spec.measured_case()
    x, y = np.ones(4096, np.float32), np.ones(4096, np.float32)
    t = trace.run(kernel, case.grid, case.block, 4096, x, y)
    c = t.coalescing_counts().values()
    return sum(v["bytes"] for v in c) / sum(32 * v["sectors"] for v in c)


def test_useless_reads_lower_the_efficiency_they_used_to_raise():
    plain, dilute = (
        _measure("tune_vector_add", chunked_add),
        _measure("tune_vector_add", dilute_add),
    )
    assert not plain.passed and not dilute.passed, dilute.message
    assert _figure(plain) == 0.125 and _figure(dilute) < 0.12, dilute.message
    assert _old_efficiency(dilute_add) > _old_efficiency(chunked_add)  # the attack's direction


def test_useless_writes_lower_the_efficiency():
    res = _measure("tune_vector_add", rewrite_add)
    assert not res.passed and _figure(res) < 0.125, res.message


def test_efficiency_divides_what_the_case_needs():
    for name in ("tune_vector_add", "tune_centering", "tune_reduction", "tune_transpose"):
        spec = get(name)
        assert sum(needed_bytes(spec, spec.sim_case)) == spec.work(spec.sim_case)[1], name


# -- 2. renamed parameters and reads through atomics ---------------------------------------


@cuda.jit
def naive_renamed(P, Q, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        s = float32(0.0)
        for k in range(P.shape[1]):
            s += P[row, k] * Q[k, col]
        C[row, col] = s


@cuda.jit
def naive_atomic_reads(A, B, C):
    # every element of A and B read through an atomic that adds 0 (reads were not counted)
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        s = float32(0.0)
        for k in range(A.shape[1]):
            a = cuda.atomic.add(A, (row, k), float32(0.0))
            s += a * cuda.atomic.add(B, (k, col), float32(0.0))
        C[row, col] = s


@cuda.jit
def covariance_renamed(X, out, num_entries, num_features):
    x, y = cuda.grid(2)
    if x < num_features and y < num_features:
        acc = float32(0)
        for i in range(num_entries):
            acc += X[i * num_features + y] * X[i * num_features + x]
        out[y * num_features + x] = acc / num_entries


@pytest.mark.parametrize(
    "name, kernel",
    [
        ("tune_matmul", naive_renamed),
        ("tune_matmul", naive_atomic_reads),
        ("tune_covariance", covariance_renamed),
    ],
)
def test_reads_count_by_position_and_through_atomics(name, kernel):
    res = _measure(name, kernel)
    assert not res.passed and "bytes read per FLOP" in res.message, res.message
    assert _figure(res) >= 1.0, res.message  # the naive kernel's 1.125, whatever its names


def test_the_counts_do_not_depend_on_parameter_names():
    a, b = np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)
    counts = []
    for kernel in (naive_renamed, naive_atomic_reads):
        with trace.recording() as traces:
            kernel[(1, 1), (8, 8)](a, b, np.zeros((8, 8), np.float32))
        counts.append(trace_figures.counts(traces))
    assert counts[0]["read"] == counts[1]["read"] > 0 and counts[1]["atomics"] == 2 * 8 * 8 * 8


# -- 3. shared atomics, races at the measured size, hidden reads ------------------------------


@cuda.jit
def reduce_atomic(g_idata, g_odata):
    # no tree, so no bank conflict was counted: every lane adds into one shared word
    sdata = cuda.shared.array(0, dtype=float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    if tid == 0:
        sdata[0] = 0
    cuda.syncthreads()
    if i < g_idata.size:
        cuda.atomic.add(sdata, 0, g_idata[i])
    cuda.syncthreads()
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


def test_shared_atomics_on_one_word_are_serialized():
    res = _measure("tune_reduction", reduce_atomic)
    assert not res.passed and "replays" in res.message and _figure(res) >= 31, res.message
    assert trace_figures.atomic_replays([0] * 32, 4) == 31
    assert trace_figures.atomic_replays([4 * k for k in range(32)], 4) == 0


@cuda.jit
def histogram_racy_when_measured(data, hist):
    # the course's privatized histogram, but at the measured size (256 rows) the blocks add
    # their counts without atomics: the simulator's one-block-at-a-time order hides the race
    t = cuda.threadIdx.x
    ch_per_block = (data.shape[1] + cuda.gridDim.x - 1) // cuda.gridDim.x
    rows_per_block = (data.shape[0] + cuda.gridDim.y - 1) // cuda.gridDim.y
    c0 = cuda.blockIdx.x * ch_per_block
    r0 = cuda.blockIdx.y * rows_per_block
    n_ch = max(0, min(ch_per_block, data.shape[1] - c0))
    n_rows = max(0, min(rows_per_block, data.shape[0] - r0))
    sdata = cuda.shared.array(4 * 256, int32)
    for i in range(t, 4 * 256, cuda.blockDim.x):
        sdata[i] = 0
    cuda.syncthreads()
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        cuda.atomic.add(sdata, c * 256 + int32(data[r0 + r, c0 + c]), 1)
    cuda.syncthreads()
    for i in range(t, n_ch * 256, cuda.blockDim.x):
        if sdata[i] > 0:
            if data.shape[0] == 256:
                hist[c0 + i // 256, i % 256] += sdata[i]
            else:
                cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])


def test_a_race_at_the_measured_size_gives_no_figure():
    res = _measure("tune_histogram", histogram_racy_when_measured)
    assert not res.passed and "race found by course.sim.trace" in res.message, res.message


def test_reads_the_tracer_never_saw_give_no_figure():
    spec = get("tune_matmul")
    res = spec.judge_figures({"moved": 4096, "read": 0, "replays": 0, "atomics": 0}, "sim")
    assert not res.passed and "no figure" in res.message and res.figures == {}, res.message
    res = get("tune_vector_add").judge_figures({"moved": 0, "read": 0}, "sim")
    assert not res.passed and "no figure" in res.message and res.figures == {}, res.message
    spread = {"busiest": 67, "threads": 1024, "requests": 8, "packed": 8, "issued": 4096}
    res = spec.judge_figures(
        {"moved": 4096, "read": 16384, "replays": 0, "atomics": 0, **spread}, "sim"
    )
    assert res.passed and res.figures is None, res.message


# -- 4. a count brought to 0 by doing the work slowly -------------------------------------


@cuda.jit
def reduce_serial(g_idata, g_odata):
    # no tree, no conflict: thread 0 sums the block's elements one after another
    sdata = cuda.shared.array(0, dtype=float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    if tid == 0:
        acc = float32(0)
        for j in range(cuda.blockDim.x):
            acc += sdata[j]
        g_odata[cuda.blockIdx.x] = acc


@cuda.jit
def histogram_one_thread(data, hist):
    # no atomic at all: one thread counts every element
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0:
        for r in range(data.shape[0]):
            for c in range(data.shape[1]):
                hist[c, int32(data[r, c])] += 1


@cuda.jit
def transpose_naive(A, B):
    # no shared memory, so no bank conflict: the writes of B are uncoalesced instead
    x = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    for k in range(0, 32, 8):
        y = cuda.blockIdx.y * 32 + cuda.threadIdx.y + k
        if y < A.shape[0] and x < A.shape[1]:
            B[x, y] = A[y, x]


@pytest.mark.parametrize(
    "name, kernel, bound",
    [
        ("tune_reduction", reduce_serial, "busiest thread"),
        ("tune_histogram", histogram_one_thread, "busiest thread"),
        ("tune_transpose", transpose_naive, "memory efficiency"),
    ],
)
def test_a_count_reached_by_slow_work_misses_its_second_bound(name, kernel, bound):
    res = _measure(name, kernel)
    assert not res.passed and "measured 0, target" in res.message, res.message
    assert bound in res.message.split(", but ")[1], res.message
    assert bound in get(name).target_text


# -- 5. slower than the given kernel, with a passing count --------------------------------


@cuda.jit
def matmul_one_thread(A, B, C):
    # the red team's: thread (0, 0) of each block stages the tiles and computes all of the
    # block's outputs alone (0.25 bytes per FLOP, like the tiled kernel)
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    acc = cuda.local.array((16, 16), float32)
    if cuda.threadIdx.x != 0 or cuda.threadIdx.y != 0:
        return
    r0, c0 = cuda.blockIdx.y * 16, cuda.blockIdx.x * 16
    for i in range(16):
        for j in range(16):
            acc[i, j] = 0
    for t in range(A.shape[1] // 16):
        for i in range(16):
            for k in range(16):
                sA[i, k] = A[r0 + i, t * 16 + k]
                sB[k, i] = B[t * 16 + k, c0 + i]
        for i in range(16):
            for j in range(16):
                s = float32(0)
                for k in range(16):
                    s += sA[i, k] * sB[k, j]
                acc[i, j] += s
    for i in range(16):
        for j in range(16):
            C[r0 + i, c0 + j] = acc[i, j]


@cuda.jit
def covariance_one_thread(data, cov, num_entries, num_features):
    # thread (0, 0) of each block computes the block's 16 x 16 entries from a staged chunk
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    acc = cuda.local.array((16, 16), float32)
    if cuda.threadIdx.x != 0 or cuda.threadIdx.y != 0:
        return
    x0, y0 = cuda.blockIdx.x * 16, cuda.blockIdx.y * 16
    for i in range(16):
        for j in range(16):
            acc[i, j] = 0
    for c in range(0, num_entries, 16):
        for r in range(16):
            for j in range(16):
                sA[r, j] = data[(c + r) * num_features + y0 + j]
                sB[r, j] = data[(c + r) * num_features + x0 + j]
        for i in range(16):
            for j in range(16):
                s = float32(0)
                for r in range(16):
                    s += sA[r, i] * sB[r, j]
                acc[i, j] += s
    for i in range(16):
        for j in range(16):
            cov[(y0 + i) * num_features + x0 + j] = acc[i, j] / num_entries


@cuda.jit
def add_one_warp(n, x, y):
    # one warp of the grid adds every element, coalesced (efficiency 1)
    i = cuda.grid(1)
    if i < 32:
        for k in range(i, n, 32):
            y[k] = x[k] + y[k]


@cuda.jit
def center_one_warp(D, mean):
    i = cuda.grid(1)
    if i < 32:
        for k in range(i, D.shape[0] * D.shape[1], 32):
            r = k // D.shape[1]
            c = k - r * D.shape[1]
            D[r, c] = D[r, c] - mean[c]


@cuda.jit
def reduce_harris0(g_idata, g_odata):
    # Harris' reduction #0: interleaved addressing with a divergent branch, slower than the
    # given #1, yet conflict-free (every lane indexes sdata[tid])
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    s = 1
    while s < cuda.blockDim.x:
        if tid % (2 * s) == 0 and tid + s < cuda.blockDim.x:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s *= 2
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def reduce_even_lanes(g_idata, g_odata):
    # sequential addressing (no conflict) done by the even lanes only: every level keeps
    # twice the warps busy that it needs
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid % 2 == 0 and tid // 2 < s:
            sdata[tid // 2] += sdata[tid // 2 + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@pytest.mark.parametrize(
    "name, kernel, bound",
    [
        ("tune_matmul", matmul_one_thread, "busiest thread"),
        ("tune_covariance", covariance_one_thread, "busiest thread"),
        ("tune_vector_add", add_one_warp, "busiest thread"),
        ("tune_centering", center_one_warp, "busiest thread"),
        ("tune_reduction", reduce_harris0, "whole-warp requests"),
        ("tune_reduction", reduce_even_lanes, "whole-warp requests"),
    ],
)
def test_a_slower_kernel_with_a_passing_count_misses_the_spread_bounds(name, kernel, bound):
    res = _measure(name, kernel)
    assert not res.passed and "correct, but not there yet" not in res.message, res.message
    assert bound in res.message.split(", but ")[1], res.message
    assert bound in get(name).target_text


def test_warp_requests_count_idle_lanes():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(1, np.float32)
    packed, spread = (
        trace_figures.counts([trace.run(k, 1, 64, x, out, shared_bytes=256)])
        for k in (reduce_sequential_tiny, reduce_harris0)
    )
    assert packed["requests"] == packed["packed"] and packed["threads"] == 64
    assert spread["requests"] > 1.5 * spread["packed"]  # the same lanes, in twice the warps


@cuda.jit
def reduce_sequential_tiny(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    sdata[tid] = g_idata[tid]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        g_odata[0] = sdata[0]


def test_a_fair_share_comes_from_the_case():
    from course.exercises.tune_figures import fair_share

    spec = get("tune_vector_add")
    assert fair_share(spec, spec.sim_case, 128) == 96  # 3 x 4096 accesses / 128 threads
    spec = get("tune_matmul")
    assert fair_share(spec, spec.sim_case, 1024) == 3 + 64  # elements, then FMA operands
