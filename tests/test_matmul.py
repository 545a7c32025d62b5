"""Lesson 04: matmul v1 -> v3 on odd shapes, counted reads vs the lecture's formulas,
the (L, V, S) constraint, the exercise and its mutants."""
import numpy as np
import pytest
from numba import cuda, float32

import course
from conftest import rejects
from course.exercises.matmul import TILE
from course.kernels import matmul

SHAPES = [(1, 1, 1), (13, 7, 9), (33, 20, 17), (16, 16, 16), (5, 40, 3)]
SETTINGS = {"v1_naive": [{"threads": (4, 4)}, {}],
            "v1_5_thread_tile": [{"threads": (4, 4), "V": 2}, {"threads": (4, 2), "V": 3}],
            "v2_register_outer": [{"threads": (4, 4), "V": 2}, {"threads": (2, 4), "V": 4}],
            "v3_shared_tiled": [{"L": 16, "V": 2, "S": 4}, {"L": 8, "V": 2, "S": 2},
                                {"L": 12, "V": 3, "S": 4}],
            "v3_tuned": [{"tile": (16, 16, 4, 2, 2)}, {"tile": (16, 8, 4, 2, 2)},
                         {"tile": (8, 16, 8, 2, 4), "min_blocks": 1}],
            "v4": [{"tile": (16, 16, 4, 4, 4)}, {"tile": (16, 16, 8, 4, 4), "min_blocks": 1},
                   {"tile": (32, 16, 4, 8, 4)}]}


ALL_VARIANTS = {**matmul.VARIANTS, **matmul.TUNED_VARIANTS}


@pytest.mark.parametrize("variant", sorted(ALL_VARIANTS))
def test_variant_matches_float64_reference_on_odd_shapes(variant):
    rng = np.random.default_rng(7)
    for (m, k, n) in SHAPES:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        rtol, atol = matmul.tolerance(k)
        for settings in SETTINGS[variant]:
            C = ALL_VARIANTS[variant](A, B, **settings)
            assert C.dtype == np.float32 and C.shape == (m, n)
            np.testing.assert_allclose(C, matmul.reference(A, B), rtol=rtol, atol=atol,
                                       err_msg=f"{variant} {settings} {(m, k, n)}")


def test_bad_input_raises():
    with pytest.raises(ValueError):
        matmul.VARIANTS["v1_naive"](np.ones((3, 4), np.float32), np.ones((3, 4), np.float32))
    with pytest.raises(ValueError):
        matmul.VARIANTS["v3_shared_tiled"](np.ones((4, 4)), np.ones((4, 4)), L=16, V=3, S=4)


@pytest.mark.parametrize("variant,settings", [
    ("v1_naive", {}), ("v1_5_thread_tile", {"V": 2}), ("v2_register_outer", {"V": 2}),
    ("v3_shared_tiled", {"L": 16, "V": 2, "S": 4})])
def test_counted_reads_equal_lecture_formulas(variant, settings):
    n = 32
    counted = matmul.count_reads(variant, n, threads=(4, 4), **settings)
    expected = matmul.formulas(n, settings.get("V", 2), settings.get("L", 16))[variant]
    assert counted["correct"]
    assert counted["global"] == expected["global"]
    if "shared" in expected:
        assert counted["shared"] == expected["shared"]


def test_v3_constraint():
    assert matmul.v3_invalid(128, 8, 8) is None
    assert "divide" in matmul.v3_invalid(64, 3, 8)
    assert "1024" in matmul.v3_invalid(128, 2, 8)
    assert "evenly" in matmul.v3_invalid(64, 4, 2)
    assert "shared" in matmul.v3_invalid(256, 16, 32)
    assert "registers" in matmul.v3_invalid(256, 16, 8)
    assert matmul.v3_tuned_invalid(*matmul.TUNED_DEFAULT) is None
    assert matmul.v3_tuned_invalid(128, 64, 8, 8, 4) is None
    assert "divide" in matmul.v3_tuned_invalid(128, 128, 8, 3, 8)
    assert "BK" in matmul.v3_tuned_invalid(128, 128, 12, 8, 8)
    with pytest.raises(ValueError):
        matmul.TUNED_VARIANTS["v3_tuned"](np.ones((4, 4), np.float32), np.ones((4, 4), np.float32),
                                    tile=(16, 16, 3, 2, 2))
    assert matmul.v4_invalid(*matmul.V4_DEFAULT) is None
    # the shared-memory estimate uses the kernel's own sA padding (v4: 4 floats a row)
    assert matmul.v3_tuned_invalid(*matmul.V4_DEFAULT, pad=4) is None
    assert "shared" in matmul.v3_tuned_invalid(*matmul.V4_DEFAULT, pad=3000)
    assert "multiples of 4" in matmul.v4_invalid(128, 128, 8, 8, 6)
    with pytest.raises(ValueError, match="invalid v4 tile"):
        matmul.TUNED_VARIANTS["v4"](np.ones((4, 4), np.float32), np.ones((4, 4), np.float32),
                                    tile=(16, 16, 4, 2, 2))



# ---------------------------------------------------------------------------------------
# exercise: reference solution and mutants (all use the spec's TILE)

@cuda.jit
def solution(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def missing_syncthreads(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def wrong_tile_guard(A, B, C):
    # guards B's column with M instead of N
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < M else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def no_zero_fill_past_edge(A, B, C):
    # skips the load past the edge, leaving the previous tile's values in shared memory
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        if row < M and k0 + tx < K:
            sA[ty, tx] = A[row, k0 + tx]
        if k0 + ty < K and col < N:
            sB[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def k_loop_drops_partial_tile(A, B, C):
    # iterates K // TILE tiles: the last, partial tile of K is never added
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for t in range(K // TILE):
        k0 = t * TILE
        sA[ty, tx] = A[row, k0 + tx] if row < M else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def missing_store_guard(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    C[row, col] = acc


@cuda.jit
def transposed_tile_read(A, B, C):
    # uses sB[tx, k] instead of sB[k, tx]: computes A @ B with B's tiles transposed
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[tx, k]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


def test_solution_passes():
    result = course.check("matmul_tiled", solution, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize("mutant", [missing_syncthreads, wrong_tile_guard, no_zero_fill_past_edge,
                                    k_loop_drops_partial_tile, missing_store_guard,
                                    transposed_tile_read], ids=lambda k: k.__name__)
def test_mutant_is_rejected(mutant):
    assert rejects("matmul_tiled", mutant)


@pytest.mark.gpu
def test_lecture_size_on_gpu():
    rng = np.random.default_rng(2)
    for (m, k, n) in [(1024, 1024, 1024), (1000, 1003, 517)]:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        rtol, atol = matmul.tolerance(k)
        for name, fn in ALL_VARIANTS.items():
            np.testing.assert_allclose(fn(A, B), matmul.reference(A, B), rtol=rtol, atol=atol,
                                       err_msg=name)
