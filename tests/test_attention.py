"""Lesson 08: attention variants vs the float64 reference, and the two exercises with mutants."""

import math
import types

import numpy as np
import pytest
from conftest import rejects
from numba import cuda, float32

import course
from course.grading.source.unit import run_cell
from course.kernels import attention as A

NEG_INF = float32(-np.inf)
rng = np.random.default_rng(8)


def qkv(b, h, n, d, dtype=np.float32):
    return [rng.uniform(-1, 1, (b, h, n, d)).astype(dtype) for _ in range(3)]


# ---------------------------------------------------------------------------------------
# variants


@pytest.mark.parametrize("name", ["fused_row_per_thread", "flash_tiled"])
@pytest.mark.parametrize("n,d", [(37, 32), (33, 64), (20, 128), (29, 33)])
def test_variants_float32(name, n, d):
    Q, K, V = qkv(1, 1, n, d)
    err = A.rel_error(A.VARIANTS[name](Q, K, V), A.reference(Q, K, V))
    assert err < 1e-6, f"{name}: relative error {err:.2e} (float32 tolerance 1e-6)"


def test_naive_three_kernels_in_head_chunks():
    Q, K, V = qkv(1, 3, 19, 32)
    got = A.VARIANTS["naive_three_kernels"](Q, K, V, heads_per_launch=2)
    assert A.rel_error(got, A.reference(Q, K, V)) < 1e-6


@pytest.mark.parametrize("name", ["naive_three_kernels", "flash_tiled"])
def test_float16_inputs(name):
    # naive: 16 x 16-thread tiles, slow to simulate; 21 rows still leave a partial tile
    Q, K, V = qkv(1, 1, 21 if name == "naive_three_kernels" else 35, 64, np.float16)
    got = A.VARIANTS[name](Q, K, V)
    assert got.dtype == np.float16
    err = A.rel_error(got, A.reference(Q, K, V))
    assert err < 1e-2, f"{name}: float16 relative error {err:.2e} (tolerance 1e-2)"


@pytest.mark.parametrize(
    "name,opts,causal,window",
    [
        ("flash_tiled_causal", {}, True, None),
        ("fused_row_per_thread", {"causal": True}, True, None),
        ("naive_three_kernels", {"window": 5}, True, 5),
        ("flash_sliding_window", {"window": 7}, True, 7),
        ("flash_sliding_window", {"window": 40}, True, 40),
    ],
)
def test_masked_variants(name, opts, causal, window):
    # the naive variant's 16 x 16-thread score tiles are slow to simulate: fewer rows there
    Q, K, V = qkv(1, 1, 37 if name == "naive_three_kernels" else 70, 32)
    got = A.VARIANTS[name](Q, K, V, **opts)
    err = A.rel_error(got, A.reference(Q, K, V, causal=causal, window=window))
    assert err < 1e-6, f"{name} {opts}: relative error {err:.2e}"


def test_bad_inputs_raise():
    Q, K, V = qkv(1, 1, 8, 16)
    with pytest.raises(ValueError):
        A.VARIANTS["flash_tiled"](Q[0], K[0], V[0])
    with pytest.raises(ValueError):
        A.VARIANTS["flash_tiled"](Q.astype(np.float64), K, V)
    with pytest.raises(ValueError):
        A.VARIANTS["flash_sliding_window"](Q, K, V, window=-3)


def with_mask(kernel, mask_fn):
    """The same kernel text, compiled with another ``visible`` device function."""
    py = kernel.py_func
    g = dict(py.__globals__, visible=mask_fn)
    new = cuda.jit(types.FunctionType(py.__code__, g, py.__name__, py.__defaults__, py.__closure__))
    for attr in ("head_dim", "shared_bytes"):  # a flash_fwd_tuned build's launch facts
        if hasattr(kernel, attr):
            setattr(new, attr, getattr(kernel, attr))
    return new


@cuda.jit(device=True)
def visible_off_by_one(i, j, n, causal, window):
    # the classic bug: j < i instead of j <= i (a query no longer sees itself)
    return j < n and (not causal or j < i) and (window < 0 or i - j <= window)


@cuda.jit(device=True)
def visible_never(i, j, n, causal, window):
    return False


def run_flash(kernel, Q, K, V, causal):
    bh, n, d = Q.shape
    O = cuda.device_array(Q.shape, np.float32)
    L = cuda.device_array((bh, n), np.float32)
    A.flash_launch(
        kernel,
        cuda.to_device(Q),
        cuda.to_device(K),
        cuda.to_device(V),
        O,
        L,
        1 / math.sqrt(d),
        causal,
        -1,
    )
    return O.copy_to_host()


FLASH_KERNELS = [A.flash_fwd, A.tuned_kernel(16)]


@pytest.mark.parametrize("kernel", FLASH_KERNELS, ids=lambda k: k.__name__)
def test_off_by_one_causal_mask_is_caught(kernel):
    Q, K, V = (a[0] for a in qkv(1, 1, 40, 16))
    good = run_flash(kernel, Q, K, V, True)
    ref = A.reference(Q, K, V, causal=True)
    assert A.rel_error(good, ref) < 1e-6
    bad = run_flash(with_mask(kernel, visible_off_by_one), Q, K, V, True)
    assert not np.isfinite(bad).all() or A.rel_error(bad, ref) > 1e-2


@pytest.mark.parametrize("n,d,causal", [(67, 33, False), (45, 64, True)])
def test_first_tiled_kernel_flash_fwd(n, d, causal):
    """flash_fwd (one float per shared load), shown in the notebook, beside flash_fwd_tuned."""
    Q, K, V = (a[0] for a in qkv(1, 1, n, d))
    got = run_flash(A.flash_fwd, Q, K, V, causal)
    assert A.rel_error(got, A.reference(Q, K, V, causal=causal)) < 1e-6


@pytest.mark.parametrize("d,D", [(16, 32), (32, 32), (33, 64), (64, 64), (100, 128)])
def test_tuned_builds_pad_the_head_dim(d, D):
    assert A.tuned_kernel(d).head_dim == D
    with pytest.raises(ValueError):
        A.tuned_kernel(129)


def gpt2_qkv(B, T, heads, hs):
    """GPT-2's fused projection (B*T, 3C) and the per-head (B, heads, T, hs) q, k, v in it."""
    C = heads * hs
    qkv = rng.uniform(-1, 1, (B * T, 3 * C)).astype(np.float32)
    per_head = [
        qkv[:, i * C : (i + 1) * C].reshape(B, T, heads, hs).transpose(0, 2, 1, 3) for i in range(3)
    ]
    return qkv, per_head


def in_place(qkv, heads, T, mutate=None):
    """flash_in_place's launch; ``mutate(args)`` changes its arguments (a mutant)."""
    BT, C3 = qkv.shape
    C, d_qkv = C3 // 3, cuda.to_device(qkv)
    y = cuda.device_array((BT, C), np.float32)
    if mutate is None:
        A.flash_in_place(d_qkv, y, heads, T)
        return y.copy_to_host()
    hs = C // heads
    k = A.tuned_kernel(hs)
    flat = d_qkv.reshape(BT * C3).view(np.float64)
    args = [
        flat,
        flat[C // 2 :],
        flat[C:],
        y.reshape(BT // T, T, C),
        cuda.device_array((BT // T * heads, T), np.float32),
        float32(1 / math.sqrt(hs)),
        True,
        -1,
        heads,
        C3 // 2,
    ]
    mutate(args)
    k[(math.ceil(T / A.Br), BT // T * heads), A.FLASH_THREADS, 0, k.shared_bytes](*args)
    return y.copy_to_host()


IN_PLACE_MUTANTS = {
    "one head a row (heads 1)": lambda a: a.__setitem__(8, 1),
    "rows D / 2 pairs apart": lambda a: a.__setitem__(9, 16),
    "K read from Q's columns": lambda a: a.__setitem__(1, a[0]),
}


@pytest.mark.parametrize("mutant", [None, *IN_PLACE_MUTANTS], ids=str)
def test_flash_in_place_reads_gpt2s_qkv_where_it_lies(mutant):
    """GPT-2's attention straight from its qkv matmul's output (B*T, 3C), O into (B*T, C) with
    the heads side by side: against float64 per head, at an odd T past one 64-row block (two
    query blocks, two key tiles: the reversed causal order too); B != heads, so batch and head
    swapped would miss; mutants of the layout arguments must miss (one batch, one block)."""
    B, T, heads, hs = (1, 37, 2, 32) if mutant else (3, 70, 2, 32)
    qkv, (q, k, v) = gpt2_qkv(B, T, heads, hs)
    want = A.reference(q, k, v, causal=True).transpose(0, 2, 1, 3).reshape(B * T, heads * hs)
    try:
        got = in_place(qkv, heads, T, IN_PLACE_MUTANTS.get(mutant))
    except IndexError:  # the simulator's bounds check caught a mutant's write
        assert mutant is not None
        return
    err = A.rel_error(got, want)
    assert (err < 1e-6) if mutant is None else (err > 1e-2), (mutant, err)


def test_flash_in_place_refuses_what_it_cannot_read_in_place():
    with pytest.raises(ValueError, match="head size"):  # hs 16 would need padding
        A.flash_in_place(
            cuda.device_array((8, 48), np.float32), cuda.device_array((8, 16), np.float32), 1, 8
        )
    for qkv, y in [(np.float64, np.float32), (np.float16, np.float32), (np.float32, np.float64)]:
        with pytest.raises(ValueError, match="float32"):  # read as pairs of floats: wrong
            A.flash_in_place(cuda.device_array((8, 192), qkv), cuda.device_array((8, 64), y), 2, 8)
    wide = cuda.device_array((8, 200), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        A.flash_in_place(wide[:, :192], cuda.device_array((8, 64), np.float32), 2, 8)


@pytest.mark.parametrize("dtype,d", [(np.float16, 5), (np.float32, 3), (np.float32, 4)])
def test_as_pairs_widens_and_pads(dtype, d):
    X = rng.uniform(-1, 1, (2, 3, d)).astype(dtype)
    got = A.as_pairs(cuda.to_device(X), 6).copy_to_host().view(np.float32).reshape(2, 3, 6)
    want = np.zeros((2, 3, 6), np.float32)
    want[:, :, :d] = X
    assert np.array_equal(got, want)
    Y = rng.uniform(-1, 1, X.shape).astype(dtype)  # same size: the buffer is reused, refilled
    again = A.as_pairs(cuda.to_device(Y), 6).copy_to_host().view(np.float32).reshape(2, 3, 6)
    want[:, :, :d] = Y
    assert np.array_equal(again, want)


@pytest.mark.parametrize("kernel", FLASH_KERNELS, ids=lambda k: k.__name__)
def test_log_sum_exp_per_row(kernel):
    Q, K, V = (a[0] for a in qkv(1, 1, 70, 16))
    bh, n, d = Q.shape
    O = cuda.device_array(Q.shape, np.float32)
    L = cuda.device_array((bh, n), np.float32)
    A.flash_launch(
        kernel,
        cuda.to_device(Q),
        cuda.to_device(K),
        cuda.to_device(V),
        O,
        L,
        1 / math.sqrt(d),
        True,
        -1,
    )
    S = np.einsum("hid,hjd->hij", Q.astype(np.float64), K) / math.sqrt(d)
    S = np.where(A.mask(n, causal=True), S, -np.inf)
    m = S.max(axis=-1)
    want = m + np.log(np.exp(S - m[..., None]).sum(axis=-1))
    np.testing.assert_allclose(L.copy_to_host(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel", FLASH_KERNELS, ids=lambda k: k.__name__)
def test_fully_masked_rows_give_zero_not_nan(kernel):
    Q, K, V = (a[0] for a in qkv(1, 1, 35, 16))
    out = run_flash(with_mask(kernel, visible_never), Q, K, V, True)
    assert np.isfinite(out).all() and not out.any()
    S = np.full((1, 1, 4, 4), 0.5)
    assert np.isfinite(A.reference(S, S, S, causal=True, window=0)).all()


def test_traffic_counting_matches_the_formula():
    t = A.traffic_bytes(4, 12, 64, 64)  # the GPT-2 report's attention shape
    assert t["score_matrix"] == 4 * 12 * 64 * 64 * 4
    assert t["three_kernels"] > t["flash"] > 0
    assert A.flops(4, 64, 8192, 128, causal=True) == 4 * 4 * 64 * (8192 * 8193 // 2) * 128
    assert A.flops(1, 1, 8192, 128, window=1024) == 4 * 128 * (1024 * 1025 // 2 + 7168 * 1025)
    assert A.pairs(5, window=1) == 9 and A.pairs(5, causal=True) == 15 and A.pairs(3, window=9) == 6


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_lecture_shape_slice_on_gpu(causal):
    Q, K, V = qkv(1, 2, 1031, 128, np.float16)
    ref = A.reference(Q, K, V, causal=causal)
    for name in ("flash_tiled", "flash_wmma", "flash_mma"):
        err = A.rel_error(A.VARIANTS[name](Q, K, V, causal=causal), ref)
        assert err < 1e-2, f"{name}: {err:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["flash_wmma", "flash_mma"])
@pytest.mark.parametrize(
    "n,d,window", [(301, 64, 40), (97, 32, None), (200, 16, 7), (131, 128, None), (1, 128, 3)]
)
def test_tensor_core_versions_masks_and_head_dims_on_gpu(name, n, d, window):
    Q, K, V = qkv(2, 1, n, d, np.float16)
    causal = window is not None or n == 131
    err = A.rel_error(
        A.VARIANTS[name](Q, K, V, causal=causal, window=window),
        A.reference(Q, K, V, causal=causal, window=window),
    )
    assert err < 1e-2, f"{name} n={n} d={d} window={window}: {err:.2e}"
    with pytest.raises(ValueError):
        A.VARIANTS[name](*qkv(1, 1, 8, 48, np.float16))
    with pytest.raises(ValueError):
        A.VARIANTS[name](*qkv(1, 1, 8, 64, np.float32))


# ---------------------------------------------------------------------------------------
# exercise online_softmax: solution and mutants


@cuda.jit
def softmax_rows(x, out):
    sm = cuda.shared.array(256, float32)
    sl = cuda.shared.array(256, float32)
    t, r, tpb = cuda.threadIdx.x, cuda.blockIdx.x, cuda.blockDim.x
    n = x.shape[1]
    m, l = NEG_INF, float32(0.0)
    for j in range(t, n, tpb):
        v = x[r, j]
        m_new = max(m, v)
        l = l * math.exp(m - m_new) + math.exp(v - m_new)
        m = m_new
    sm[t], sl[t] = m, l
    cuda.syncthreads()
    s = tpb // 2
    while s > 0:
        if t < s:
            mn = max(sm[t], sm[t + s])
            if mn > NEG_INF:
                sl[t] = sl[t] * math.exp(sm[t] - mn) + sl[t + s] * math.exp(sm[t + s] - mn)
            sm[t] = mn
        cuda.syncthreads()
        s //= 2
    m, l = sm[0], sl[0]
    for j in range(t, n, tpb):
        out[r, j] = math.exp(x[r, j] - m) / l


@cuda.jit
def softmax_no_max_subtraction(x, out):
    sl = cuda.shared.array(256, float32)
    t, r, tpb = cuda.threadIdx.x, cuda.blockIdx.x, cuda.blockDim.x
    n = x.shape[1]
    l = float32(0.0)
    for j in range(t, n, tpb):
        l += math.exp(x[r, j])
    sl[t] = l
    cuda.syncthreads()
    s = tpb // 2
    while s > 0:
        if t < s:
            sl[t] += sl[t + s]
        cuda.syncthreads()
        s //= 2
    for j in range(t, n, tpb):
        out[r, j] = math.exp(x[r, j]) / sl[0]


@cuda.jit
def softmax_missing_rescale(x, out):
    sm = cuda.shared.array(256, float32)
    sl = cuda.shared.array(256, float32)
    t, r, tpb = cuda.threadIdx.x, cuda.blockIdx.x, cuda.blockDim.x
    n = x.shape[1]
    m, l = NEG_INF, float32(0.0)
    for j in range(t, n, tpb):
        v = x[r, j]
        m_new = max(m, v)
        l = l + math.exp(v - m_new)  # bug: the old sum is not rescaled
        m = m_new
    sm[t], sl[t] = m, l
    cuda.syncthreads()
    s = tpb // 2
    while s > 0:
        if t < s:
            mn = max(sm[t], sm[t + s])
            if mn > NEG_INF:
                sl[t] = sl[t] * math.exp(sm[t] - mn) + sl[t + s] * math.exp(sm[t + s] - mn)
            sm[t] = mn
        cuda.syncthreads()
        s //= 2
    m, l = sm[0], sl[0]
    for j in range(t, n, tpb):
        out[r, j] = math.exp(x[r, j] - m) / l


def test_online_softmax_solution_passes():
    res = course.check("online_softmax", softmax_rows, record=False)
    assert res.passed, repr(res)


@pytest.mark.parametrize(
    "mutant",
    [softmax_no_max_subtraction, softmax_missing_rescale],
    ids=["no_max_subtraction", "missing_rescale"],
)
def test_online_softmax_mutants_rejected(mutant):
    assert rejects("online_softmax", mutant)


# ---------------------------------------------------------------------------------------
# exercise flash_attention_forward: solution and mutants (Br, Bc read from this module)

Br = 16
Bc = 16
D_EX = 64


@cuda.jit
def flash_attn(Q, K, V, O, scale):
    sK = cuda.shared.array((Bc, D_EX), float32)
    sV = cuda.shared.array((Bc, D_EX), float32)
    q = cuda.local.array(D_EX, float32)
    acc = cuda.local.array(D_EX, float32)
    s = cuda.local.array(Bc, float32)
    t, bh = cuda.threadIdx.x, cuda.blockIdx.y
    i = cuda.blockIdx.x * Br + t
    n, d = Q.shape[1], Q.shape[2]
    for c in range(d):
        q[c] = Q[bh, i, c] * scale if i < n else float32(0.0)
        acc[c] = float32(0.0)
    m, l = NEG_INF, float32(0.0)
    for j0 in range(0, n, Bc):
        for e in range(t, Bc * d, Br):
            r, c = e // d, e % d
            if j0 + r < n:
                sK[r, c] = K[bh, j0 + r, c]
                sV[r, c] = V[bh, j0 + r, c]
        cuda.syncthreads()
        cols = min(Bc, n - j0)
        m_new = m
        for jj in range(cols):
            dot = float32(0.0)
            for c in range(d):
                dot += q[c] * sK[jj, c]
            s[jj] = dot
            m_new = max(m_new, dot)
        alpha = math.exp(m - m_new)
        l *= alpha
        for c in range(d):
            acc[c] *= alpha
        for jj in range(cols):
            p = math.exp(s[jj] - m_new)
            l += p
            for c in range(d):
                acc[c] += p * sV[jj, c]
        m = m_new
        cuda.syncthreads()
    if i < n:
        for c in range(d):
            O[bh, i, c] = acc[c] / l


def _mutant(bug):
    """flash_attn with one classic bug, made from its source so the rest stays identical."""
    import inspect
    import textwrap

    src = textwrap.dedent(inspect.getsource(flash_attn.py_func))
    fixes = {
        "missing_rescale": ("            acc[c] *= alpha\n", "            pass\n"),
        "no_max_subtraction": ("p = math.exp(s[jj] - m_new)", "p = math.exp(s[jj])"),
        "missing_syncthreads": (
            "                sV[r, c] = V[bh, j0 + r, c]\n        cuda.syncthreads()\n",
            "                sV[r, c] = V[bh, j0 + r, c]\n",
        ),
    }
    old, new = fixes[bug]
    assert old in src
    src = (
        src.replace(old, new, 1).replace("@cuda.jit\n", "").replace("def flash_attn", f"def {bug}")
    )
    ns = dict(globals())
    run_cell(src, f"<mutant {bug}>", ns)
    fn = ns[bug]
    fn.__module__ = __name__
    return cuda.jit(fn)


def test_flash_attention_solution_passes():
    res = course.check("flash_attention_forward", flash_attn, record=False)
    assert res.passed, repr(res)


@pytest.mark.parametrize("bug", ["missing_rescale", "no_max_subtraction", "missing_syncthreads"])
def test_flash_attention_mutants_rejected(bug):
    if bug == "missing_syncthreads" and course.MODE == "gpu":
        pytest.skip("a missing barrier is a race: on a GPU it may not show in one run")
    assert rejects("flash_attention_forward", _mutant(bug))


def test_tile_sizes_read_from_the_kernel_module():
    from course.exercises.attention import tile_sizes

    assert tile_sizes(flash_attn) == {"Br": 16, "Bc": 16, "THREADS_PER_BLK": 16}
