"""course.sim.trace: known answers for every counter, planted races found, correct kernels clean."""

import time

import numpy as np
import pytest
from numba import cuda, float32, int32

import course

pytestmark = pytest.mark.skipif(course.MODE != "sim", reason="the tracer needs the simulator")

from course.sim import trace  # noqa: E402

TPB = 128


# ---------------------------------------------------------------------------------------
# global memory: coalescing


@cuda.jit
def copy(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


@cuda.jit
def read_stride32(x, out):
    i = cuda.grid(1)
    out[i] = x[32 * i]


@cuda.jit
def read_same(x, out):
    i = cuda.grid(1)
    out[i] = x[0]


def test_coalesced_copy_touches_the_minimum_sectors():
    x = np.random.default_rng(0).random(1000).astype(np.float32)
    out = np.zeros_like(x)
    t = trace.run(copy, 8, TPB, x, out)
    np.testing.assert_array_equal(out, x)  # it really ran
    for name in ("x", "out"):
        c = t.coalescing_counts()[name]
        assert c["sectors"] == c["min_sectors"]
        assert c["requests"] == -(-1000 // 32)  # the last warp is partial
    c = t.coalescing_counts()["x"]
    assert c["sectors"] == 1000 * 4 // 32 and c["lines"] == -(-1000 * 4 // 128)


def test_stride_32_float_access_is_32_sectors_per_request():
    x = np.zeros(32 * TPB, dtype=np.float32)
    out = np.zeros(TPB, dtype=np.float32)
    t = trace.run(read_stride32, 1, TPB, x, out)
    c = t.coalescing_counts()["x"]
    assert c["requests"] == 4 and c["sectors"] == 32 * 4 and c["lines"] == 32 * 4
    assert c["min_sectors"] == 4 * 4
    assert "32" in str(t.coalescing())
    c = trace.run(read_same, 1, TPB, x, out).coalescing_counts()["x"]
    assert c["sectors"] == c["requests"] == 4  # broadcast: one sector


# ---------------------------------------------------------------------------------------
# shared memory: bank conflicts


@cuda.jit
def shared_stride(stride, out):
    s = cuda.shared.array(1024, float32)
    t = cuda.threadIdx.x
    s[(t * stride) % 1024] = t
    cuda.syncthreads()
    out[t] = s[(t * stride) % 1024] if stride > 0 else s[0]


@pytest.mark.parametrize("stride,ways", [(1, 1), (2, 2), (4, 4), (32, 32), (33, 1), (0, 1)])
def test_bank_conflicts_known_answers(stride, ways):
    out = np.zeros(32, dtype=np.float32)
    t = trace.run(shared_stride, 1, 32, stride, out)
    c = t.bank_counts()["s"]
    assert c["max_ways"] == ways
    assert c["replays"] == 2 * (ways - 1)  # one write + one read request
    if stride == 0:
        assert t.races()  # 32 lanes write s[0]
    else:
        assert not t.problems()


# ---------------------------------------------------------------------------------------
# races, uninitialized reads, partial barriers


@cuda.jit
def reduce_ok(x, out):
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sdata[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def reduce_missing_syncthreads(x, out):
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    sdata[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        s //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def histogram_ok(x, hist):
    h = cuda.shared.array(16, int32)
    tid = cuda.threadIdx.x
    if tid < 16:
        h[tid] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)
    cuda.syncthreads()
    if tid < 16:
        cuda.atomic.add(hist, tid, h[tid])


@cuda.jit
def histogram_not_atomic(x, hist):
    h = cuda.shared.array(16, int32)
    tid = cuda.threadIdx.x
    if tid < 16:
        h[tid] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size:
        h[x[i]] += 1
    cuda.syncthreads()
    if tid < 16:
        cuda.atomic.add(hist, tid, h[tid])


@cuda.jit
def histogram_not_zeroed(x, hist):
    h = cuda.shared.array(16, int32)
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i], 1)
    cuda.syncthreads()
    tid = cuda.threadIdx.x
    if tid < 16:
        cuda.atomic.add(hist, tid, h[tid])


@cuda.jit
def global_total_not_atomic(x, out):
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        out[0] += x[i]


@cuda.jit
def early_return_before_syncthreads(x, out):
    sdata = cuda.shared.array(TPB, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= x.size:
        return
    sdata[tid] = x[i]
    cuda.syncthreads()
    out[i] = sdata[TPB - 1 - tid] if TPB - 1 - tid < x.size else float32(0)


@cuda.jit
def warp_reduce_syncwarp(x, out):
    s = cuda.shared.array(32, float32)
    lane = cuda.threadIdx.x
    s[lane] = x[lane]
    cuda.syncwarp()
    k = 16
    while k > 0:
        v = s[lane + k] if lane < k else float32(0)
        cuda.syncwarp()
        if lane < k:
            s[lane] += v
        cuda.syncwarp()
        k //= 2
    if lane == 0:
        out[0] = s[0]


@cuda.jit
def warp_reduce_no_syncwarp(x, out):
    s = cuda.shared.array(32, float32)
    lane = cuda.threadIdx.x
    s[lane] = x[lane]
    k = 16
    while k > 0:
        if lane < k:
            s[lane] += s[lane + k]
        k //= 2
    if lane == 0:
        out[0] = s[0]


@cuda.jit
def warp_shuffle_sum(x, out):
    i = cuda.grid(1)
    v = x[i]
    k = 16
    while k > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, k)
        k //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)


def _data(n=300, hist=False):
    rng = np.random.default_rng(n)
    return rng.integers(0, 16, n).astype(np.int32) if hist else rng.random(n).astype(np.float32)


@pytest.mark.parametrize(
    "kernel,args",
    [
        (reduce_ok, lambda: (_data(), np.zeros(3, np.float32))),
        (histogram_ok, lambda: (_data(hist=True), np.zeros(16, np.int32))),
        (warp_reduce_syncwarp, lambda: (_data(32), np.zeros(1, np.float32))),
        (warp_shuffle_sum, lambda: (_data(256), np.zeros(1, np.float32))),
        (copy, lambda: (_data(), np.zeros(300, np.float32))),
    ],
)
def test_correct_kernels_are_never_reported(kernel, args):
    for _ in range(2):
        x, out = args()
        t = trace.run(
            kernel,
            -(-x.size // TPB) if kernel is not warp_reduce_syncwarp else 1,
            TPB if kernel is not warp_reduce_syncwarp else 32,
            x,
            out,
        )
        assert t.problems() == [], t.summary()


@pytest.mark.parametrize(
    "kernel,hist,kind,words",
    [
        (reduce_missing_syncthreads, False, "race", ["sdata[", "line 11 of", "thread "]),
        (histogram_not_atomic, True, "race", ["h[", "h[x[i]] += 1", "writes"]),
        (histogram_not_zeroed, True, "uninitialized", ["h[", "atomic"]),
        (global_total_not_atomic, False, "race", ["different blocks", "out[0]"]),
    ],
)
def test_planted_bugs_are_found_on_every_run(kernel, hist, kind, words):
    for _ in range(3):
        x = _data(hist=hist)
        out = np.zeros(16 if hist else 3, dtype=x.dtype)
        t = trace.run(kernel, 3, TPB, x, out)
        found = [p for p in t.problems() if p.kind == kind]
        assert found, t.summary()
        for w in words:
            assert w in found[0].message, found[0].message
        if kind == "race":
            (b1, t1), (b2, t2) = found[0].threads
            assert (b1, t1) != (b2, t2)


def test_warp_synchronous_race_without_syncwarp_is_found():
    t = trace.run(warp_reduce_no_syncwarp, 1, 32, _data(32), np.zeros(1, np.float32))
    assert t.races() and "s[" in t.races()[0].message


def test_partial_syncthreads_is_reported():
    x = _data(200)
    t = trace.run(early_return_before_syncthreads, 2, TPB, x, np.zeros(200, np.float32))
    msgs = [p.message for p in t.problems() if p.kind == "syncthreads"]
    assert msgs and "56 of 128 threads" in msgs[0] and "never reached" in msgs[0]


def test_counts_plot_and_summary():
    x = _data(256)
    out = np.zeros(256, np.float32)
    t = trace.run(copy, 2, TPB, x, out)
    reads, writes = t.counts("x")
    assert reads.shape == (2, TPB) and (reads == 1).all() and (writes == 0).all()
    assert "problems: none found" in t.summary()
    from course.show.figures.trace import trace_figure

    fig = trace_figure(t, "x")
    assert len(fig.axes) >= 2
    with pytest.raises(KeyError):
        t.counts("nope")


def test_device_arrays_and_views_are_traced():
    x = cuda.to_device(np.arange(1100, dtype=np.float32))
    out = cuda.to_device(np.zeros(1100, np.float32))
    t = trace.run(copy, 8, TPB, x[:1000], out[:1000])
    assert t.coalescing_counts()["x"]["requests"] == 32
    np.testing.assert_array_equal(out.copy_to_host()[:1000], np.arange(1000))


def test_tracing_4096_threads_takes_seconds():
    x = _data(4096)
    out = np.zeros(32, np.float32)
    start = time.perf_counter()
    t = trace.run(reduce_ok, 32, TPB, x, out)
    elapsed = time.perf_counter() - start
    assert t.problems() == []
    np.testing.assert_allclose(out, x.reshape(32, TPB).sum(axis=1), rtol=1e-5)
    assert elapsed < 30, elapsed


# ---------------------------------------------------------------------------------------
# inside course.check: repeat runs are traced


@cuda.jit
def add_with_shared_scratch_race(n, x, y):
    scratch = cuda.shared.array(1, float32)
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, n, stride):
        scratch[0] = x[i]  # every thread writes the same cell: a race
        y[i] = x[i] + y[i]  # ...that never changes the result


@cuda.jit
def add_grid_stride(n, x, y):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, n, stride):
        y[i] = x[i] + y[i]


def test_check_fails_a_race_that_the_values_hide():
    r = course.check("debug_grid_stride", add_with_shared_scratch_race, record=False)
    assert not r.passed
    bad = [c for c in r.cases if not c.passed]
    assert len(bad) == 1 and "race found by course.sim.trace" in bad[0].message
    assert (
        "scratch[0]" in bad[0].message
        and "line 6 of add_with_shared_scratch_race" in bad[0].message
        and bad[0].message.count("thread ") >= 2
    )
    assert course.check("debug_grid_stride", add_grid_stride, record=False).passed


def test_recording_traces_launches_made_elsewhere():
    x = _data(100)
    y = np.zeros(100, np.float32)
    with trace.recording() as traces:
        copy[1, TPB](x, y)
        copy[2, 64](x, y)
    assert [t.block for t in traces] == [(TPB, 1, 1), (64, 1, 1)]
    np.testing.assert_array_equal(y, x)
    copy[1, TPB](x, y)  # patched launch is restored
    assert len(traces) == 2


@cuda.jit
def two_shared_arrays(x, out):
    a = cuda.shared.array(32, float32)
    b = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    a[t] = x[t]
    b[t] = 2 * x[t]
    cuda.syncthreads()
    out[t] = a[t] + b[31 - t]


def test_two_shared_arrays_stay_distinct_under_the_tracer():
    x = _data(32)
    out = np.zeros(32, np.float32)
    t = trace.run(two_shared_arrays, 1, 32, x, out)
    np.testing.assert_allclose(out, x + 2 * x[::-1])
    assert {a.name for a in t.arrays} >= {"a", "b"} and not t.problems()


# ---------------------------------------------------------------------------------------
# arrays derived from a traced array: mapped to the base addresses, or the launch stops


def _kernel(body: str, params: str = "x, out", name: str = "k"):
    """A jitted kernel from source lines (a real file, so the tracer can name its lines)."""
    import linecache
    import textwrap

    src = f"def {name}({params}):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    path = f"<trace-test {name} {abs(hash(src))}>"
    linecache.cache[path] = (len(src), None, src.splitlines(True), path)
    ns = {"cuda": cuda, "np": np, "float32": float32, "int32": int32}
    exec(compile(src, path, "exec"), ns)
    return cuda.jit(ns[name])


DIRECT = "i = cuda.grid(1)\nout[i] = x[(i * 5) % x.size]\n"


@pytest.mark.parametrize(
    "view",
    [
        "x.T",
        "x.real",
        "x.reshape(x.size)",
        "x.ravel()",
        "x.view(np.float32)",
        "x.transpose()",
        "x.squeeze()",
        "np.swapaxes(x, 0, 0)",
        "x[0:x.size]",
        "x[:]",
        "x.flat",
        "np.transpose(x)",
        "x.reshape(8, 32).T.T.reshape(256)",
        "x.reshape(8, 32)[0:8, :].ravel()",
    ],
)
def test_accesses_through_a_derived_array_land_on_the_base_addresses(view):
    x, out = _data(256), np.zeros(256, np.float32)
    want = trace.run(_kernel(DIRECT), 2, TPB, x, out).coalescing_counts()["x"]
    body = f"v = {view}\n" + DIRECT.replace("x[(i", "v[(i")
    t = trace.run(_kernel(body), 2, TPB, x, out)
    np.testing.assert_array_equal(out, x[np.arange(256) * 5 % 256])
    assert t.coalescing_counts()["x"] == want and want["sectors"] > want["min_sectors"]


def test_a_transposed_view_counts_the_strided_addresses_it_touches():
    x, out = _data(32 * 32), np.zeros(32 * 32, np.float32)
    t = trace.run(
        _kernel("i = cuda.grid(1)\nout[i] = x.reshape(32, 32).T[i // 32, i % 32]\n"), 8, TPB, x, out
    )
    np.testing.assert_array_equal(out, x.reshape(32, 32).T.ravel())
    c = t.coalescing_counts()["x"]
    assert c["sectors"] == 32 * c["requests"]  # a column: 32 sectors each
    w = trace.run(
        _kernel("i = cuda.grid(1)\nv = x.reshape(32, 32)[i // 32]\nv[i % 32] = 0\n"), 8, TPB, x, out
    ).coalescing_counts()["x"]
    assert w["sectors"] == w["min_sectors"] == 4 * w["requests"]  # rows: coalesced


@pytest.mark.parametrize(
    "how,body",
    [
        ("np.asarray", "v = np.asarray(x)\nout[0] = v[0]"),
        (".sum", "out[0] = x.sum()"),
        (".item", "out[0] = x.item(0)"),
        (".copy", "out[0] = x.copy()[0]"),
        (".imag", "out[0] = x.imag[0]"),
        ("a copy, not a view", "out[0] = x[np.arange(4)][0]"),
        ("items of 8 bytes", "out[0] = x.view(np.float64)[0]"),
        ("a copy, not a view", "out[0] = x.reshape(16, 16).T.ravel()[0]"),
        ("a copy, not a view", "out[0] = x.reshape(16, 16).T.reshape(256)[0]"),
        (".flat[slice", "out[0] = x.flat[0:4][0]"),
    ],
)
def test_a_way_in_the_tracer_cannot_map_stops_the_kernel(how, body):
    x, out = _data(256), np.zeros(1, np.float32)
    with pytest.raises(
        trace.TraceBypass, match=r"reads x through .*cannot count; index x"
    ) as stopped:
        trace.run(_kernel(body), 1, 32, x, out)
    assert how in str(stopped.value)


def test_shared_arrays_and_atomics_through_views_are_counted():
    conflict = _kernel("""
        s = cuda.shared.array((32, 33), float32)
        t = cuda.threadIdx.x
        s.T[0, t] = x[t]                           # s[t, 0]: stride 33 words, no conflict
        v = s[:, 0:32]
        v.T[1, t] = x[t]                           # s[t, 1]
        w = s.reshape(32 * 33)
        w[t * 32] = x[t]                           # stride 32 words: a 32-way conflict
        cuda.syncthreads()
        out[t] = s[t, 0] + v[t, 1] + s.flat[t * 32]
    """)
    x, out = _data(32), np.zeros(32, np.float32)
    t = trace.run(conflict, 1, 32, x, out)
    np.testing.assert_allclose(out, 3 * x)
    c = t.bank_counts()["s"]
    assert c["requests"] == 6 and c["max_ways"] == 32 and c["replays"] == 2 * 31
    atomics = _kernel(
        """
        i = cuda.grid(1)
        cuda.atomic.add(out.T, (i % 4, 0), 1)      # out[0, i % 4]
        cuda.atomic.add(out[1:].T, (i % 4, 0), 1)  # out[1, i % 4]
    """,
        "out",
    )
    h = np.zeros((2, 4), np.int32)
    t = trace.run(atomics, 1, 64, h)
    np.testing.assert_array_equal(h, 16)
    kinds = [(r[3], r[4]) for r in t.records]
    assert len(kinds) == 128 and {k for _o, k in kinds} == {trace.ATOMIC}
    assert {o for o, _k in kinds} == set(range(0, 32, 4))  # the 8 cells' addresses


# ---------------------------------------------------------------------------------------
# tune exercises: a bypass of the tracer earns no point, honest kernels still do


def _chunked_add(view: str):
    """The given slow chunked add, read and written through ``view`` of x and y, plus one
    coalesced read of x (so the traced figure is not empty): the red team's kernel."""
    return _kernel(
        f"""
        threads = cuda.gridsize(1)
        chunk = (n + threads - 1) // threads
        start = cuda.grid(1) * chunk
        xt = {view.format(a="x")}
        yt = {view.format(a="y")}
        for k in range(start, min(start + chunk, n)):
            yt[k] = xt[k] + yt[k]
        i = cuda.grid(1)
        if i < n:
            if x[i] == -12345.5:
                y[0] = 0.0
    """,
        "n, x, y",
        "add_fast",
    )


def _tune_case(result):
    return next(c for c in result.cases if "tune target" in c.name)


@pytest.mark.parametrize(
    "view",
    [
        "{a}.T",
        "{a}.real",
        "{a}.reshape(n)",
        "{a}.transpose()",
        "{a}.view(np.float32)",
        "{a}[0:n]",
        "{a}.flat",
    ],
)
def test_tune_vector_add_through_a_view_is_measured_as_what_it_does(view):
    r = course.check("tune_vector_add", _chunked_add(view), record=False)
    assert not r.passed and all(c.passed for c in r.cases if c is not _tune_case(r))
    assert "efficiency" in _tune_case(r).message and "measured 0.1" in _tune_case(r).message


def test_tune_vector_add_through_np_asarray_fails_with_the_reason():
    r = course.check("tune_vector_add", _chunked_add("np.asarray({a})"), record=False)
    assert not r.passed and "reads x through np.asarray" in str(r)


@pytest.mark.parametrize(
    "name,body,fails",
    [
        (
            "tune_matmul",
            """
        col, row = cuda.grid(2)
        At, Bt = A.T, B.T
        if row < C.shape[0] and col < C.shape[1]:
            acc = float32(0.0)
            for k in range(A.shape[1]):
                acc += At[k, row] * Bt[col, k]
            C[row, col] = acc
    """,
            "bytes read per FLOP",
        ),
        (
            "tune_reduction",
            """
        sdata = cuda.shared.array(0, dtype=g_idata.dtype)
        st = sdata.T
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * cuda.blockDim.x + tid
        sdata[tid] = 0
        if i < g_idata.size:
            sdata[tid] = g_idata[i]
        cuda.syncthreads()
        s = 1
        while s < cuda.blockDim.x:
            index = 2 * s * tid
            if index < cuda.blockDim.x:
                st[index] += st[index + s]
            cuda.syncthreads()
            s *= 2
        if tid == 0:
            g_odata[cuda.blockIdx.x] = sdata[0]
    """,
            "replays",
        ),
        (
            "tune_histogram",
            """
        t = cuda.threadIdx.x
        ch_per_block = (data.shape[1] + cuda.gridDim.x - 1) // cuda.gridDim.x
        rows_per_block = (data.shape[0] + cuda.gridDim.y - 1) // cuda.gridDim.y
        c0 = cuda.blockIdx.x * ch_per_block
        r0 = cuda.blockIdx.y * rows_per_block
        n_ch = max(0, min(ch_per_block, data.shape[1] - c0))
        n_rows = max(0, min(rows_per_block, data.shape[0] - r0))
        ht = hist.T
        for k in range(t, n_rows * n_ch, cuda.blockDim.x):
            r = k // n_ch
            c = k - r * n_ch
            cuda.atomic.add(ht, (int32(data[r0 + r, c0 + c]), c0 + c), 1)
    """,
            "atomic operations per input element",
        ),
    ],
)
def test_tune_kernels_working_through_views_earn_no_point(name, body, fails):
    params = {
        "tune_matmul": ("A, B, C", "matmul_fast"),
        "tune_reduction": ("g_idata, g_odata", "reduce_fast"),
        "tune_histogram": ("data, hist", "histogram_fast"),
    }[name]
    r = course.check(name, _kernel(body, *params), record=False)
    assert not r.passed and all(c.passed for c in r.cases if c is not _tune_case(r))
    assert fails in _tune_case(r).message and "not there yet" in _tune_case(r).message


# (every tune solution reaching its target: test_practice's solution check)


@cuda.jit
def dynamic_float64(x, out):
    s = cuda.shared.array(0, dtype=x.dtype)
    t = cuda.threadIdx.x
    s[t] = x[t]
    s[3] = x[t]  # every thread writes s[3]: a race
    cuda.syncthreads()
    out[t] = s[t]


def test_dynamic_shared_memory_counts_in_its_own_items():
    x, out = _data(32).astype(np.float64), np.zeros(32, np.float64)
    t = trace.run(dynamic_float64, 1, 32, x, out, shared_bytes=32 * 8)
    c = t.bank_counts()["dynamic shared"]
    # 8-byte items: a full warp's request needs 2 wavefronts, without any conflict
    assert c["requests"] == 3 and c["ideal"] == 2 + 1 + 2 and c["replays"] == 0
    assert "dynamic shared[3]" in t.races()[0].message
