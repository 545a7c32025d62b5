"""Each of numba's (or Python's) unhelpful messages becomes a course sentence that says what
to do, through ``course.check`` as a student meets it."""

import numpy as np
from numba import cuda

import course


def check(exercise, answer):
    r = course.check(exercise, answer, record=False)
    return r, repr(r), r._repr_html_()


@cuda.jit
def two_arguments(x, y):  # the exercise launches add_stride(n, x, y)
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i] + y[i]


@cuda.jit
def numpy_inside(n, x, y):
    tmp = np.zeros(4, np.float32)  # numpy cannot allocate inside a kernel
    i = cuda.grid(1)
    if i < n:
        y[i] = x[i] + y[i] + tmp[0]


@cuda.jit
def runs_but_wrong(n, x, y):
    i = cuda.grid(1)
    if i < n:
        y[i] = x[i]


def test_a_wrong_argument_count_gives_the_expected_signature():
    r, text, html = check("debug_grid_stride", two_arguments)
    assert not r.passed and "Signature mismatch" not in text, text
    assert "your kernel takes 2 arguments (x, y), but the exercise launches it with 3" in text
    assert "@cuda.jit def add_stride(n, x, y)" in text and "add_stride(n, x, y)" in html


def test_numpy_allocation_in_a_kernel_points_to_cuda_local_array():
    r, text, _ = check("debug_grid_stride", numpy_inside)
    assert not r.passed and "zeros" in text, text
    assert "cuda.local.array" in text, text


def test_a_misspelled_exercise_name_gets_did_you_mean():
    r, text, _ = check("vector_ad", runs_but_wrong)
    assert not r.passed and "did you mean 'vector_add'?" in text, text
    assert "matmul_tiled" not in text  # not every exercise's name
    r, text, _ = check("Predict_Ocupancy", {})
    assert "did you mean 'predict_occupancy'?" in text, text
    r, text, _ = check("no_such_thing_at_all", runs_but_wrong)
    assert "did you mean" not in text and "all_exercises()" in text, text


def test_a_misspelled_predict_key_is_named():
    r, text, _ = check(
        "predict_launch",
        {"blcoks": 3907, "threads": 1000192, "idle": 192, "grid2d_threads": 72, "extra": 1},
    )
    assert not r.passed
    blocks = next(c for c in r.cases if c.name.startswith("blocks:"))
    assert "'blcoks'" in blocks.message and "rename it 'blocks'" in blocks.message
    assert "no answer yet" not in blocks.message
    idle2d = next(c for c in r.cases if c.name.startswith("grid2d_idle:"))
    assert "'extra'" in idle2d.message and "'blcoks'" not in idle2d.message, idle2d.message
    r, _, _ = check("predict_launch", {"blocks": None})
    assert r.cases[0].message == "no answer yet"


def test_a_check_that_never_ran_prints_no_seed():
    def plain(n, x, y):
        pass

    for exercise, answer in (
        ("vector_ad", runs_but_wrong),  # unknown exercise
        ("debug_grid_stride", plain),  # not a kernel
        ("debug_grid_stride", numpy_inside),
    ):  # does not compile
        r, text, html = check(exercise, answer)
        assert not r.passed and not r.cases, text
        assert "seed" not in text and "seed" not in html, text
    r, text, html = check("debug_grid_stride", runs_but_wrong)  # ran, and failed
    assert not r.passed and r.cases
    assert f"seed={r.seed}" in text and f"seed={r.seed}" in html
