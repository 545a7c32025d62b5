"""course.check semantics: never raises for a wrong kernel, says what is wrong, can fail."""

import importlib

import numpy as np
import pytest
from numba import cuda

import course
from course.exercises import EXACT, Case, Exercise, Tolerance
from course.grading.judging.progress import load

check_mod = importlib.import_module("course.grading.judging.check")  # the module, not the function
judge_mod = importlib.import_module("course.grading.judging.judge")
from test_vector_add import no_bounds_guard, solution_add, writes_only_even_indices  # noqa: E402


@cuda.jit
def raises_inside(n, x, y):
    i = cuda.grid(1)
    if i == 3:
        y[10**9] = 1.0  # far out of bounds


@cuda.jit
def endless(n, x, y):
    i = 0
    while i < n:
        i = i * 1


def test_unknown_exercise_is_reported_not_raised():
    r = course.check("no_such_exercise", solution_add, record=False)
    assert not r.passed and "no exercise called 'no_such_exercise'" in repr(r)
    assert "all_exercises()" in repr(r) and "seed" not in repr(r)


def test_plain_python_function_is_reported():
    def add(n, x, y):
        pass

    r = course.check("vector_add", add, record=False)
    assert not r.passed and "@cuda.jit" in repr(r)
    r = course.check("vector_add", None, record=False)
    assert not r.passed


SIM_ONLY = pytest.mark.skipif(
    course.MODE == "gpu", reason="simulator behaviour (thread names, killable endless loops)"
)


@SIM_ONLY
def test_crash_names_thread_block_and_line():
    r = course.check("vector_add", raises_inside, record=False)
    assert not r.passed
    text = repr(r)
    assert (
        "thread (3)" in text
        and "block (0)" in text
        and "of raises_inside (`y[10**9] = 1.0  # far out of bounds`)" in text
    )


@SIM_ONLY
def test_time_limit_stops_an_endless_kernel_and_skips_the_rest():
    r = course.check("vector_add", endless, time_limit=1.0, record=False)
    assert not r.passed
    assert r.cases[0].timed_out and "time limit" in r.cases[0].message
    assert all("skipped" in c.message for c in r.cases[1:])
    # the simulator threads are gone: a correct kernel still checks fine afterwards
    assert course.check("vector_add", solution_add, record=False).passed


def test_same_seed_replays_same_inputs():
    a = course.check("vector_add", writes_only_even_indices, seed=1234, record=False)
    b = course.check("vector_add", writes_only_even_indices, seed=1234, record=False)
    c = course.check("vector_add", writes_only_even_indices, seed=99, record=False)
    assert [x.message for x in a.cases] == [x.message for x in b.cases]
    assert [x.message for x in a.cases] != [x.message for x in c.cases]


def test_html_report_has_status_and_tolerance():
    r = course.check("vector_add", solution_add, record=False)
    html = r._repr_html_()
    assert "data-passed='true'" in html and "tolerance" in html
    assert ("simulator" if course.MODE == "sim" else "GPU") in html
    bad = course.check("vector_add", no_bounds_guard, record=False)
    assert "data-passed='false'" in bad._repr_html_()
    assert bool(r) and not bool(bad)


def test_progress_is_recorded():
    course.check("vector_add", solution_add)
    assert load()["vector_add"]["passed"] is True
    course.check("vector_add", no_bounds_guard)
    entry = load()["vector_add"]
    assert (
        entry["passed"] is False and entry["ever_passed"] is True and entry["mode"] == course.MODE
    )
    text = repr(course.progress())
    assert "vector_add" in text and "matrix_add" in text


# -- the comparison and guard-band helpers on their own ---------------------------------


def test_compare_reports_first_wrong_index_and_unwritten():
    exp = np.arange(5, dtype=np.float64)
    got = exp.astype(np.float32)
    tol = Tolerance(rtol=1e-6, atol=1e-6)
    assert check_mod.compare("y", got, exp, tol) is None
    got[3] = 7
    assert "first at index 3: got 7, expected 3" in check_mod.compare("y", got, exp, tol)
    got[2] = np.nan
    assert "y[2] was never written" in check_mod.compare("y", got, exp, tol)
    ints = np.array([1, 2, 3], dtype=np.int32)
    assert check_mod.compare("h", ints, np.array([1, 2, 4]), EXACT).startswith("h: 1 of 3")


def test_guard_band_detects_writes_past_the_end():
    buf = judge_mod.guarded((4,), np.float32, fill=np.ones(4))
    assert judge_mod._guard_message("y", buf, (4,)) is None
    buf[5] = 1.0
    assert "y[5]" in judge_mod._guard_message("y", buf, (4,))
    buf2 = judge_mod.guarded((2, 3), np.int32, fill=np.ones((2, 3)))
    buf2[1, 3] = 0
    assert "(1, 3)" in judge_mod._guard_message("C", buf2, (2, 3))


class BrokenSpec(Exercise):
    def cases(self):
        return [Case("n = 4", {"n": 4}, (1,), (4,))]

    def make_inputs(self, case, rng):
        raise RuntimeError("spec bug")


def test_a_broken_spec_is_reported_not_raised(monkeypatch):
    spec = BrokenSpec("broken", "xx", "@cuda.jit def f()", "nothing")
    monkeypatch.setattr(check_mod._ex, "get", lambda name: spec)
    r = course.check("broken", solution_add, record=False)
    assert not r.passed and "spec itself failed" in repr(r)


def test_guard_sentinel_survives_no_arithmetic():
    """A NaN guard would hide `y[i] = x[i] + y[i]` past the end (NaN + x = NaN) on a GPU,
    which does not bounds-check: the guard value must be finite and change under it."""
    for dtype in (np.float32, np.float64, np.float16):
        g = judge_mod.guard_value(dtype)
        assert np.isfinite(g) and (g + g) != g and (g + np.asarray(0.5, dtype)) != g
    x = judge_mod.guarded((3,), np.float32, fill=np.ones(3, np.float32))
    y = judge_mod.guarded((3,), np.float32, fill=np.ones(3, np.float32))
    y[3] = x[3] + y[3]  # what an unguarded thread 3 does on a GPU
    assert "y[3]" in judge_mod._guard_message("y", y, (3,))


def test_an_untouched_inout_array_is_named():
    from test_vector_add import never_writes

    r = course.check("vector_add", never_writes, record=False)
    assert "y came back unchanged" in repr(r)


def test_the_grader_stands_on_the_case_engine_not_on_the_notebooks_check():
    """check.py is the notebook's face (course.check); the grader's route (session, batch,
    scoring, the worker and the measurer) and the engine itself import cases.py, never it."""
    from test_layout import graph

    g, face, engine = graph(), "course.grading.judging.check", "course.grading.judging.cases"
    route = ["judging.session", "classroom.batch", "classroom.scoring", "wall.worker"]
    for module in [f"course.grading.{m}" for m in route + ["wall.measurer", "judging.cases"]]:
        assert face not in g[module], module
    assert engine in g["course.grading.judging.session"] and engine in g[face]
    assert face in g["course.grading"]  # the mutant the rule must see: it sees it


def test_first_failure_stops_the_cases_and_keeps_the_verdict():
    """``run_cases(first_failure=True)`` (the tests' mutants): the cases up to the first
    failed one, the same verdict; a correct kernel still runs every case."""
    from conftest import first_failure

    full = course.check("vector_add", writes_only_even_indices, record=False, seed=3)
    with first_failure():
        short = course.check("vector_add", writes_only_even_indices, record=False, seed=3)
        good = course.check("vector_add", solution_add, record=False, seed=3)
    assert not full.passed and not short.passed
    assert len(short.cases) < len(full.cases) and not short.cases[-1].passed
    assert all(c.passed for c in short.cases[:-1])
    assert good.passed and len(good.cases) == len(full.cases)
    assert check_mod.run_cases.__name__ == "run_cases"  # the context put it back
