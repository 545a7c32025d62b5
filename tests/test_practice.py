"""Debug and predict exercises: the notebook's solution passes, the student's copy (the given
bug, the empty answer) fails, and every mutant - a wrong fix, a wrong answer - fails.

Solutions and given code are read from the instructor notebooks, so what is tested is what
the student sees; the release's own stripping (``### GIVEN:`` lines) makes the student copy.
"""
import functools

import pytest
from numba import cuda

import course
from conftest import REPO
from course.exercises import KINDS, all_exercises
from course.grading import notebook as nbk
from course.grading.release import strip_solutions

EXERCISES = all_exercises()
NEW = sorted(n for n, e in EXERCISES.items() if e.kind in ("debug", "predict"))


def test_every_exercise_has_a_kind():
    assert all(e.kind in KINDS for e in EXERCISES.values())
    kinds = {k: sum(e.kind == k for e in EXERCISES.values()) for k in KINDS}
    assert kinds["predict"] >= 6 and kinds["debug"] >= 5 and kinds["write"] >= 12, kinds


@functools.lru_cache(maxsize=None)
def _setup(lesson):
    plan = nbk.plan(REPO / "notebooks" / f"{lesson}.ipynb")
    ns = {"__name__": "__main__", "display": lambda *a, **k: None}
    for c in plan.setup:
        exec(compile(c.source, f"<setup {c.index}>", "exec"), ns)  # noqa: S102
    return plan, ns


def _defined(name, student: bool):
    """The exercise's function/answer as the instructor notebook defines it, or as the
    student copy of that cell does."""
    spec = EXERCISES[name]
    plan, ns = _setup(spec.lesson)
    ex = plan.exercises[name]
    src = strip_solutions(ex.cell) if student else ex.cell.source
    local = dict(ns)
    exec(compile(src, f"<{name}>", "exec"), local)  # noqa: S102
    return local[ex.function], local


@pytest.mark.parametrize("name", NEW)
def test_solution_passes_and_student_copy_fails(name):
    good, _ = _defined(name, student=False)
    r = course.check(name, good, hidden=True, record=False, seed=11)
    assert r.passed, r
    given, _ = _defined(name, student=True)
    bad = course.check(name, given, hidden=True, record=False, seed=11)
    assert not bad.passed, f"{name}: the student's copy passes as given"


# --- predict: every single wrong answer is rejected, with the right value explained ----

def _wrong(q):
    if q.choices:
        return next(c for c in q.choices if c != q.expected)
    if isinstance(q.expected, int):
        return q.expected + 1
    return q.expected * (1 + 10 * q.rtol + 0.05)


PREDICT = [n for n in NEW if EXERCISES[n].kind == "predict"]


@pytest.mark.parametrize("name", PREDICT)
def test_predict_mutants(name):
    spec = EXERCISES[name]
    right = {q.key: q.expected for q in spec.questions()}
    assert course.check(name, right, record=False).passed
    for q in spec.questions():
        r = course.check(name, {**right, q.key: _wrong(q)}, record=False)
        assert not r.passed, (name, q.key)
        assert "expected" in repr(r) and q.explain[:20] in repr(r)
    for junk in ({}, [1, 2, 3], {k: str(v) + "x" for k, v in right.items()}):
        assert not course.check(name, junk, record=False).passed


@cuda.jit
def read(x, out, stride, offset):
    i = cuda.threadIdx.x
    out[i] = x[stride * i + offset]


def test_predict_answers_match_the_tracer():
    """The sectors and wavefronts the course expects are what course.trace counts."""
    if course.MODE != "sim":
        pytest.skip("the tracer runs in the simulator")
    import numpy as np

    from course import trace

    x = np.arange(32 * 33 + 8, dtype=np.float32)
    spec = EXERCISES["predict_sectors"]
    expected = {q.key: q.expected for q in spec.questions()}
    for key, stride, offset in (("coalesced", 1, 0), ("stride2", 2, 0), ("stride32", 32, 0),
                                ("misaligned", 1, 1)):
        t = trace.run(read, 1, 32, x, np.zeros(32, np.float32), stride, offset)
        c = t.coalescing_counts()["x"]
        assert c["sectors"] / c["requests"] == expected[key], key


# --- debug: wrong fixes a student might try -------------------------------------------

DEBUG_MUTANTS = {
    "debug_grid_stride": [
        ("step = cuda.gridsize(1)", "step = cuda.blockDim.x * 2"),
        ("step = cuda.gridsize(1)", "step = cuda.gridDim.x"),
        ("y[k] = x[k] + y[k]", "y[k] = x[k] + y[k]\n        break"),
    ],
    "debug_matrix_layout": [
        ("if row < C.shape[0] and col < C.shape[1]:", "if row < C.shape[1] and col < C.shape[0]:"),
        ("if row < C.shape[0] and col < C.shape[1]:", "if True:"),
        ("C[row, col] = A[row, col] + B[row, col]", "C[col % C.shape[0], row % C.shape[1]] = A[row, col] + B[row, col]"),
    ],
    "debug_reduce_sync": [
        ("        cuda.syncthreads()\n        s >>= 1", "        s >>= 1"),
        ("        cuda.syncthreads()\n        s >>= 1", "        cuda.syncthreads()\n        s >>= 2"),
        ("    cuda.syncthreads()\n    s = cuda.blockDim.x // 2", "    s = cuda.blockDim.x // 2"),
    ],
    "debug_window_halo": [
        ("if tx < 2 and index + T < N + 2:", "if tx < 1 and index + T < N + 2:"),
        ("support[T + tx] = input[index + T]", "support[T + tx] = input[index + T - 1]"),
        ("    cuda.syncthreads()\n    if index < N:", "    if index < N:"),
    ],
    "debug_histogram_sign": [
        ("v = int32(data[r0 + r, c0 + c])", "v = int32(data[r0 + r, c0 + c]) % 255"),
        ("v = int32(data[r0 + r, c0 + c])", "v = min(int32(data[r0 + r, c0 + c]), 254)"),
        ("v = int32(data[r0 + r, c0 + c])", "v = int32(data[r0 + r, c0 + c]) & 127"),
    ],
}


@pytest.mark.parametrize("name, k", [(n, k) for n in sorted(DEBUG_MUTANTS) for k in range(3)])
def test_debug_mutants(name, k):
    spec = EXERCISES[name]
    plan, ns = _setup(spec.lesson)
    ex = plan.exercises[name]
    good = "\n".join(l for l in ex.cell.source.splitlines()
                     if not l.lstrip().startswith("###"))
    old, new = DEBUG_MUTANTS[name][k]
    assert old in good, (name, old)
    local = dict(ns)
    exec(compile(good.replace(old, new, 1), f"<{name} mutant {k}>", "exec"), local)  # noqa: S102
    r = course.check(name, local[ex.function], hidden=True, record=False, seed=5)
    assert not r.passed, f"{name}: mutant {k} ({new!r}) passes"


def test_debug_exercises_are_all_covered():
    assert sorted(DEBUG_MUTANTS) == sorted(n for n in NEW if EXERCISES[n].kind == "debug")


def test_readme_lists_every_exercise_with_its_kind():
    text = (REPO / "README.md").read_text()
    missing = [n for n, e in EXERCISES.items() if f"`{n}` ({e.kind})" not in text]
    assert not missing, f"README's lesson table lacks {missing}"
