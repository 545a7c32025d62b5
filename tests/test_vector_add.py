"""Lesson 01: every variant is right on random odd sizes; the checks accept the reference
solutions and reject the classic wrong kernels (mutants), each named after its bug."""

import numpy as np
import pytest
from conftest import rejects
from numba import cuda

import course
from course.kernels import vector_add as lesson


@pytest.mark.parametrize("variant", sorted(lesson.VARIANTS))
@pytest.mark.parametrize("n", [1, 31, 33, 257, 1999])
def test_variant_matches_float64_reference(variant, n):
    rng = np.random.default_rng()
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    got = lesson.VARIANTS[variant](x, y, threads_per_block=32)
    np.testing.assert_allclose(got, lesson.reference(x, y), rtol=1e-6, atol=1e-6)


def test_grid_stride_with_far_fewer_threads_than_elements():
    rng = np.random.default_rng()
    x, y = (rng.uniform(-1, 1, 1001).astype(np.float32) for _ in range(2))
    got = lesson.VARIANTS["grid_stride"](x, y, threads_per_block=16, blocks=3)
    np.testing.assert_allclose(got, lesson.reference(x, y), rtol=1e-6, atol=1e-6)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="same length"):
        lesson.VARIANTS["grid_stride"](np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="empty"):
        lesson.VARIANTS["grid_stride"](np.ones(0, np.float32), np.ones(0, np.float32))
    with pytest.raises(ValueError, match="unknown variant"):
        lesson.launch("nope", 1, None, None)


@pytest.mark.gpu
def test_lecture_size_on_gpu():
    rng = np.random.default_rng()
    n = (1 << 26) + 3
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    for variant in ("many_blocks", "grid_stride"):
        np.testing.assert_allclose(
            lesson.VARIANTS[variant](x, y), lesson.reference(x, y), rtol=1e-6, atol=1e-6
        )


# -- vector_add: the solution and its mutants --------------------------------------------


@cuda.jit
def solution_add(n, x, y):
    # the exercise: the lecture's grid-stride loop, x read backwards
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    for i in range(index, n, stride):
        y[i] = x[n - 1 - i] + y[i]


@cuda.jit
def reads_x_off_by_one(n, x, y):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    for i in range(index, n, stride):
        y[i] = x[n - i] + y[i]  # forgot the - 1: reads x[n] at i = 0


@cuda.jit
def no_bounds_guard(n, x, y):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    y[i] = x[n - 1 - i] + y[i]


@cuda.jit
def one_element_per_thread(n, x, y):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        y[i] = x[n - 1 - i] + y[i]


@cuda.jit
def off_by_one(n, x, y):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    for i in range(index, n - 1, stride):
        y[i] = x[n - 1 - i] + y[i]


@cuda.jit
def single_block_stride(n, x, y):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x
    for i in range(index, n, stride):
        y[i] = x[n - 1 - i] + y[i]


@cuda.jit
def hard_coded_block_dim(n, x, y):
    index = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    stride = 32 * cuda.gridDim.x
    for i in range(index, n, stride):
        y[i] = x[n - 1 - i] + y[i]


@cuda.jit
def writes_only_even_indices(n, x, y):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    for i in range(index, n, stride):
        if i % 2 == 0:
            y[i] = x[n - 1 - i] + y[i]


@cuda.jit
def modifies_the_input(n, x, y):
    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    for i in range(index, n, stride):
        y[i] = x[n - 1 - i] + y[i]
        x[i] = 0


@cuda.jit
def never_writes(n, x, y):
    pass


# the lecture's add_grid_stride (x forwards) is in the package every student has: it must
# not be the exercise's answer
VECTOR_ADD_MUTANTS = [
    lesson.add_grid_stride,
    reads_x_off_by_one,
    no_bounds_guard,
    one_element_per_thread,
    off_by_one,
    single_block_stride,
    hard_coded_block_dim,
    writes_only_even_indices,
    modifies_the_input,
    never_writes,
]


def test_vector_add_accepts_the_solution():
    result = course.check("vector_add", solution_add, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize("mutant", VECTOR_ADD_MUTANTS, ids=lambda k: k.py_func.__name__)
def test_vector_add_rejects_mutant(mutant):
    assert rejects("vector_add", mutant)


def test_mutant_messages_say_what_went_wrong():
    r = course.check("vector_add", modifies_the_input, record=False)
    assert "input x was modified" in repr(r)
    r = course.check("vector_add", no_bounds_guard, record=False)
    assert "out of bounds" in repr(r)
    if course.MODE == "sim":
        assert "thread" in repr(r)


# -- matrix_add ------------------------------------------------------------------------


@cuda.jit
def swapped_indices(A, B, C):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if i < C.shape[0] and j < C.shape[1]:
        C[i, j] = A[i, j] + B[j, i]


@cuda.jit
def guard_only_on_x(A, B, C):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if i < C.shape[1]:
        C[j, i] = A[j, i] + B[i, j]


@cuda.jit
def ignores_block_index_y(A, B, C):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.threadIdx.y
    if i < C.shape[1] and j < C.shape[0]:
        C[j, i] = A[j, i] + B[i, j]


@cuda.jit
def subtracts(A, B, C):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if i < C.shape[1] and j < C.shape[0]:
        C[j, i] = A[j, i] - B[i, j]


@cuda.jit
def solution_matrix_add(A, B, C):
    # the exercise: A plus B transposed (B is (Nx, Ny))
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if i < C.shape[1] and j < C.shape[0]:
        C[j, i] = A[j, i] + B[i, j]


def test_matrix_add_accepts_the_solution():
    result = course.check("matrix_add", solution_matrix_add, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize(
    "mutant",
    [lesson.matrix_add, swapped_indices, guard_only_on_x, ignores_block_index_y, subtracts],
    ids=lambda k: k.py_func.__name__,
)
def test_matrix_add_rejects_mutant(mutant):
    assert rejects("matrix_add", mutant)
