"""Lessons 05-07 (faces): kernels, VARIANTS contract, exercises with their mutants."""

import numpy as np
import pytest
from conftest import rejects
from numba import cuda, float32

import course
from course.kernels import faces as K

# ---------------------------------------------------------------------------------------
# VARIANTS contract: odd m and n, float64 references


def _D(m, n, seed=0):
    return np.random.default_rng(seed).uniform(0.05, 1.0, (m, n)).astype(np.float32)


SHAPES = [(1, 1), (37, 29), (5, 70), (33, 3)]


@pytest.mark.parametrize("m,n", SHAPES)
@pytest.mark.parametrize("name", ["mean", "mean_split", "mean_split_x4"])
def test_mean_variants(name, m, n):
    D = _D(m, n)
    got = K.VARIANTS[name](D)
    assert got.shape == (n,) and got.dtype == np.float32
    np.testing.assert_allclose(got, K.reference(D), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m,n,split", [(37, 29, 3), (38, 5, 2), (13, 7, 4)])
def test_mean_split_x4_unrolled_loop_and_its_tail(m, n, split):
    """Few slices, so each thread runs the 4-wide loop and then the leftover images."""
    D = _D(m, n, seed=m)
    got = K.VARIANTS["mean_split_x4"](D, split=split, threads_per_block=32)
    np.testing.assert_allclose(got, K.reference(D), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m,n", SHAPES)
@pytest.mark.parametrize(
    "name", ["center_coalesced", "center_noncoalesced", "center_2d", "center_2d_ilp", "center_flat"]
)
def test_centering_variants(name, m, n):
    D = _D(m, n, 1)
    before = D.copy()
    got = K.VARIANTS[name](D)
    assert got.shape == (m, n)
    np.testing.assert_allclose(got, K.reference(D, "center"), rtol=1e-5, atol=2e-6)
    assert np.array_equal(D, before), "the host input must not change"


def test_center_2d_with_few_blocks_strides_over_images():
    D = _D(41, 13, 2)
    got = K.VARIANTS["center_2d"](D, threads_per_block=8, block_y=2, blocks_y=3)
    np.testing.assert_allclose(got, K.reference(D, "center"), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("m,n", [(1, 1), (23, 19), (7, 70)])
@pytest.mark.parametrize(
    "name", ["cov_naive", "cov_symmetric", "cov_tiled", "cov_register", "cov_register8", "cov_syrk"]
)
def test_covariance_variants(name, m, n):
    D = _D(m, n, 3)
    Dc = (D - D.mean(axis=0)).astype(np.float32)
    got = K.VARIANTS[name](Dc)
    assert got.shape == (n, n)
    np.testing.assert_allclose(got, K.reference(Dc, "cov"), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "m,n,tile,splits",
    [
        (37, 41, (16, 4, 4), 3),
        (29, 33, (32, 4, 4), 2),
        (70, 7, (16, 8, 4), 4),
        (5, 16, (16, 4, 4), 1),
    ],
)
def test_syrk_covariance_tiles_and_image_slices(m, n, tile, splits):
    """Lower tiles on and off the diagonal, edge tiles, whole tiles, uneven image slices
    (atomics into one cov): every entry, upper triangle included, matches float64."""
    D = _D(m, n, 6)
    Dc = (D - D.mean(axis=0)).astype(np.float32)
    got = K.VARIANTS["cov_syrk"](Dc, tile=tile, splits=splits)
    np.testing.assert_allclose(got, K.reference(Dc, "cov"), rtol=1e-4, atol=1e-6)


def test_syrk_splits_fill_the_gpu_and_bad_tiles_are_rejected():
    from course.kernels.covariance import syrk_splits

    # the lecture's covariance on an H100: 210 lower tiles, 2 x 132 block slots -> 5 slices
    assert syrk_splits(210, 202_599, 264) == 5
    assert syrk_splits(1, 100, 1) == 1  # too few images to slice
    assert syrk_splits(264, 10**6, 264) == 1  # one full wave already
    with pytest.raises(ValueError, match="SYRK tile"):
        K.VARIANTS["cov_syrk"](_D(9, 9, 1), tile=(16, 4, 3))


@pytest.mark.parametrize("chunk_size", [2, 4, 16])
def test_tiled_covariance_any_chunk_size(chunk_size):
    D = _D(11, 21, 4)
    got = K.VARIANTS["cov_tiled"](D, chunk_size=chunk_size)
    np.testing.assert_allclose(got, K.reference(D, "cov"), rtol=1e-4, atol=1e-6)


def test_bad_inputs_are_rejected_clearly():
    with pytest.raises(ValueError, match="2-D"):
        K.VARIANTS["mean"](np.ones(5, np.float32))
    with pytest.raises(ValueError, match="float32"):
        K.VARIANTS["cov_naive"](np.ones((3, 3)))
    with pytest.raises(ValueError, match="chunk_size"):
        K.VARIANTS["cov_tiled"](np.ones((3, 3), np.float32), chunk_size=64)


def test_cache_lines_per_warp_request():
    t = K.transactions_table(2475, 1000)
    assert t["noncoalesced"]["lines_per_request"] == 32
    assert t["coalesced"]["lines_per_request"] <= 2
    assert K.warp_lines("coalesced", 2475, step=0) == 1  # 32 floats = one 128-B line
    assert K.cgma(8) == 8 and K.cgma(2) == 2  # the lecture's numbers


# ---------------------------------------------------------------------------------------
# exercise mean_face: solution and mutants


@cuda.jit
def mean_solution(data, mean, num_entries, num_features):
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)
        for entry in range(num_entries):
            accum += data[entry * num_features + thid]
        mean[thid] = accum / num_entries


@cuda.jit
def mean_wrong_index_order(data, mean, num_entries, num_features):
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)
        for entry in range(num_entries):
            accum += data[thid * num_entries + entry]
        mean[thid] = accum / num_entries


@cuda.jit
def mean_no_guard(data, mean, num_entries, num_features):
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    accum = float32(0)
    for entry in range(num_entries):
        if entry * num_features + thid < data.size:
            accum += data[entry * num_features + thid]
    mean[thid] = accum / num_entries


@cuda.jit
def mean_divide_by_wrong_count(data, mean, num_entries, num_features):
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)
        for entry in range(num_entries):
            accum += data[entry * num_features + thid]
        mean[thid] = accum / num_features


@cuda.jit
def mean_thread_index_only(data, mean, num_entries, num_features):
    thid = cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)
        for entry in range(num_entries):
            accum += data[entry * num_features + thid]
        mean[thid] = accum / num_entries


@cuda.jit
def mean_skips_last_image(data, mean, num_entries, num_features):
    thid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)
        for entry in range(num_entries - 1):
            accum += data[entry * num_features + thid]
        mean[thid] = accum / num_entries


@cuda.jit
def mean_hardcoded_block_size(data, mean, num_entries, num_features):
    thid = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    if thid < num_features:
        accum = float32(0)
        for entry in range(num_entries):
            accum += data[entry * num_features + thid]
        mean[thid] = accum / num_entries


def test_mean_face_solution_passes():
    result = course.check("mean_face", mean_solution, record=False)
    assert result.passed, repr(result)


def test_lecture_kernel_passes_mean_face():
    assert course.check("mean_face", K.compute_mean_kernel, record=False).passed


@pytest.mark.parametrize(
    "mutant",
    [
        mean_wrong_index_order,
        mean_no_guard,
        mean_divide_by_wrong_count,
        mean_thread_index_only,
        mean_skips_last_image,
        mean_hardcoded_block_size,
    ],
    ids=lambda k: k.py_func.__name__,
)
def test_mean_face_mutants_rejected(mutant):
    assert rejects("mean_face", mutant)


# ---------------------------------------------------------------------------------------
# exercise covariance_tiled: solution and mutants (dynamic shared memory, cs = blockDim.x)


@cuda.jit
def cov_solution(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        vx = float32(0)
        vy = float32(0)
        if row < num_entries and cuda.blockIdx.x * cs + tx < num_features:
            vx = data[row * num_features + cuda.blockIdx.x * cs + tx]
        if row < num_entries and cuda.blockIdx.y * cs + tx < num_features:
            vy = data[row * num_features + cuda.blockIdx.y * cs + tx]
        sh[ty * cs + tx] = vx
        sh[cs * cs + ty * cs + tx] = vy
        cuda.syncthreads()
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
        cuda.syncthreads()
    if x < num_features and y < num_features:
        cov[y * num_features + x] = accum / num_entries


@cuda.jit
def cov_missing_first_syncthreads(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        vx = float32(0)
        vy = float32(0)
        if row < num_entries and cuda.blockIdx.x * cs + tx < num_features:
            vx = data[row * num_features + cuda.blockIdx.x * cs + tx]
        if row < num_entries and cuda.blockIdx.y * cs + tx < num_features:
            vy = data[row * num_features + cuda.blockIdx.y * cs + tx]
        sh[ty * cs + tx] = vx
        sh[cs * cs + ty * cs + tx] = vy
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
        cuda.syncthreads()
    if x < num_features and y < num_features:
        cov[y * num_features + x] = accum / num_entries


@cuda.jit
def cov_missing_second_syncthreads(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        vx = float32(0)
        vy = float32(0)
        if row < num_entries and cuda.blockIdx.x * cs + tx < num_features:
            vx = data[row * num_features + cuda.blockIdx.x * cs + tx]
        if row < num_entries and cuda.blockIdx.y * cs + tx < num_features:
            vy = data[row * num_features + cuda.blockIdx.y * cs + tx]
        sh[ty * cs + tx] = vx
        sh[cs * cs + ty * cs + tx] = vy
        cuda.syncthreads()
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
    if x < num_features and y < num_features:
        cov[y * num_features + x] = accum / num_entries


@cuda.jit
def cov_no_load_guard(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        sh[ty * cs + tx] = data[row * num_features + cuda.blockIdx.x * cs + tx]
        sh[cs * cs + ty * cs + tx] = data[row * num_features + cuda.blockIdx.y * cs + tx]
        cuda.syncthreads()
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
        cuda.syncthreads()
    if x < num_features and y < num_features:
        cov[y * num_features + x] = accum / num_entries


@cuda.jit
def cov_wrong_index_order(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        vx = float32(0)
        vy = float32(0)
        if row < num_entries and cuda.blockIdx.x * cs + tx < num_features:
            vx = data[(cuda.blockIdx.x * cs + tx) * num_entries + row]
        if row < num_entries and cuda.blockIdx.y * cs + tx < num_features:
            vy = data[(cuda.blockIdx.y * cs + tx) * num_entries + row]
        sh[ty * cs + tx] = vx
        sh[cs * cs + ty * cs + tx] = vy
        cuda.syncthreads()
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
        cuda.syncthreads()
    if x < num_features and y < num_features:
        cov[y * num_features + x] = accum / num_entries


@cuda.jit
def cov_divide_by_wrong_count(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        vx = float32(0)
        vy = float32(0)
        if row < num_entries and cuda.blockIdx.x * cs + tx < num_features:
            vx = data[row * num_features + cuda.blockIdx.x * cs + tx]
        if row < num_entries and cuda.blockIdx.y * cs + tx < num_features:
            vy = data[row * num_features + cuda.blockIdx.y * cs + tx]
        sh[ty * cs + tx] = vx
        sh[cs * cs + ty * cs + tx] = vy
        cuda.syncthreads()
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
        cuda.syncthreads()
    if x < num_features and y < num_features:
        cov[y * num_features + x] = accum / (num_entries - 1)


@cuda.jit
def cov_lower_triangle_only(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        vx = float32(0)
        vy = float32(0)
        if row < num_entries and cuda.blockIdx.x * cs + tx < num_features:
            vx = data[row * num_features + cuda.blockIdx.x * cs + tx]
        if row < num_entries and cuda.blockIdx.y * cs + tx < num_features:
            vy = data[row * num_features + cuda.blockIdx.y * cs + tx]
        sh[ty * cs + tx] = vx
        sh[cs * cs + ty * cs + tx] = vy
        cuda.syncthreads()
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
        cuda.syncthreads()
    if y < num_features and x <= y:
        cov[y * num_features + x] = accum / num_entries


@cuda.jit
def cov_no_output_guard(data, cov, num_entries, num_features):
    cs = cuda.blockDim.x
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * cs + tx
    y = cuda.blockIdx.y * cs + ty
    sh = cuda.shared.array(0, dtype=float32)
    accum = float32(0)
    for chunk in range((num_entries + cs - 1) // cs):
        row = chunk * cs + ty
        vx = float32(0)
        vy = float32(0)
        if row < num_entries and cuda.blockIdx.x * cs + tx < num_features:
            vx = data[row * num_features + cuda.blockIdx.x * cs + tx]
        if row < num_entries and cuda.blockIdx.y * cs + tx < num_features:
            vy = data[row * num_features + cuda.blockIdx.y * cs + tx]
        sh[ty * cs + tx] = vx
        sh[cs * cs + ty * cs + tx] = vy
        cuda.syncthreads()
        for k in range(cs):
            accum += sh[cs * cs + k * cs + ty] * sh[k * cs + tx]
        cuda.syncthreads()
    if y * num_features + x < cov.size:
        cov[y * num_features + x] = accum / num_entries


def test_covariance_tiled_solution_passes():
    result = course.check("covariance_tiled", cov_solution, record=False)
    assert result.passed, repr(result)


def test_lecture_shared_kernel_passes_covariance_tiled():
    assert course.check("covariance_tiled", K.shared_covariance_kernel, record=False).passed


@pytest.mark.parametrize(
    "mutant",
    [
        cov_missing_first_syncthreads,
        cov_missing_second_syncthreads,
        cov_no_load_guard,
        cov_wrong_index_order,
        cov_divide_by_wrong_count,
        cov_lower_triangle_only,
        cov_no_output_guard,
    ],
    ids=lambda k: k.py_func.__name__,
)
def test_covariance_tiled_mutants_rejected(mutant):
    assert rejects("covariance_tiled", mutant)


# ---------------------------------------------------------------------------------------
# lecture sizes on a real GPU


@pytest.mark.gpu
def test_lecture_sizes_on_gpu():
    from course.platform.data import load_faces

    D = load_faces(20_000)
    m, n = D.shape
    np.testing.assert_allclose(K.VARIANTS["mean"](D), K.reference(D), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(K.VARIANTS["mean_split"](D), K.reference(D), rtol=1e-4, atol=1e-5)
    Dc = K.VARIANTS["center_2d"](D)
    np.testing.assert_allclose(Dc, K.reference(D, "center"), atol=2e-5)
    ref = K.reference(Dc[:4000], "cov")
    for name in ("cov_tiled", "cov_register", "cov_register8", "cov_syrk"):
        np.testing.assert_allclose(K.VARIANTS[name](Dc[:4000]), ref, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("m,n,tpb", [(101, 47, 8), (37, 29, 32), (6, 5, 4), (9, 64, 4)])
def test_center_flat_covers_the_tail_and_the_odd_last_float(m, n, tpb):
    """Full blocks, a partial last block (pairs one at a time) and, for odd m * n, the lone
    last float all run; pairs that straddle two images use the right pixels."""
    D = _D(m, n, 5)
    got = K.VARIANTS["center_flat"](D, threads_per_block=tpb)
    np.testing.assert_allclose(got, K.reference(D, "center"), rtol=1e-5, atol=2e-6)
