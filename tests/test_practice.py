"""Debug and predict exercises: the notebook's solution passes, the student's copy (the given
bug, the empty answer) fails, and every mutant - a wrong fix, a wrong answer - fails.

Solutions and given code are read from the instructor notebooks, so what is tested is what
the student sees; the release's own stripping (``### GIVEN:`` lines) makes the student copy.
"""

import pytest
from conftest import REPO, first_failure
from numba import cuda

import course
from course.exercises import KINDS, all_exercises
from course.grading.classroom import solutions
from course.grading.classroom.solutions import defined
from course.grading.source.unit import run_cell

EXERCISES = all_exercises()
# exercises added with the kinds (the first 12 write exercises have their own test files)
NEW_WRITE = (
    "center_coalesced",
    "window_constant",
    "matmul_epilogue",
    "sum_of_squares",
    "matmul_split_k",
    "count_positive",
    "layernorm_warp",
)
NEW = sorted(n for n, e in EXERCISES.items() if e.kind != "write" or n in NEW_WRITE)


def test_every_exercise_has_a_kind():
    assert all(e.kind in KINDS for e in EXERCISES.values())
    kinds = {k: sum(e.kind == k for e in EXERCISES.values()) for k in KINDS}
    assert all(v >= 6 for v in kinds.values()) and len(EXERCISES) >= 40, kinds
    lessons = {}
    for e in EXERCISES.values():
        lessons[e.lesson] = lessons.get(e.lesson, 0) + 1
    assert len(lessons) == 12 and min(lessons.values()) >= 3, lessons


def _defined(name, student: bool):
    return defined(name, student=student)


def _setup(lesson):
    return solutions._setup(lesson, str(REPO / "notebooks"))


@pytest.mark.parametrize("name", NEW)
def test_solution_passes_and_student_copy_fails(name):
    good, _ = _defined(name, student=False)
    r = course.check(name, good, hidden=True, record=False, seed=11)
    assert r.passed, r
    given, _ = _defined(name, student=True)  # the given bug fails the public cases
    with first_failure():
        bad = course.check(name, given, hidden=False, record=False, seed=11)
    assert not bad.passed, f"{name}: the student's copy passes as given"


# --- predict: every single wrong answer is rejected, and the key is not in the package ---


def _wrong(q, right):
    if q.choices:
        return next(c for c in q.choices if c != right)
    if isinstance(right, int):
        return right + 1
    return right * (1 + 10 * q.rtol + 0.05)


PREDICT = [n for n in NEW if EXERCISES[n].kind == "predict"]


def _key(spec):
    from course.grading.hidden import answers_for

    key = answers_for(spec)
    assert key is not None and set(key) == {q.key for q in spec.questions()}, spec.name
    return key


@pytest.mark.parametrize("name", PREDICT)
def test_predict_mutants(name):
    spec = EXERCISES[name]
    right = _key(spec)
    assert course.check(name, right, record=False).passed
    for q in spec.questions():
        r = course.check(name, {**right, q.key: _wrong(q, right[q.key])}, record=False)
        assert not r.passed, (name, q.key)
        text = repr(r)
        assert "which is not it" in text and q.explain[:20] in text
        if not q.choices:  # a wrong answer is taught the method, never told the value
            failed = next(c for c in r.cases if not c.passed)
            tol = f" (within {q.rtol:.0%})" if q.rtol else ""
            assert (
                failed.message == f"got {_wrong(q, right[q.key])!r}, which is not it"
                f"{tol}: {q.explain}"
            ), (name, q.key, failed.message)
    for junk in ({}, [1, 2, 3], {k: str(v) + "x" for k, v in right.items()}):
        assert not course.check(name, junk, record=False).passed


@pytest.mark.parametrize("name", PREDICT)
def test_the_package_holds_no_answer_key(name, monkeypatch, tmp_path):
    """Without the instructor's folder (a student's copy) the right answers do not pass,
    and no question object carries its value."""
    spec = EXERCISES[name]
    right = _key(spec)
    assert not any(hasattr(q, "expected") for q in spec.questions())
    from course.grading import hidden

    monkeypatch.setenv("COURSE_HIDDEN_DIR", str(tmp_path))
    monkeypatch.setattr(hidden, "_LOADED", {})
    r = course.check(name, right, record=False)
    assert not r.passed and r.answered and repr(r).startswith("[ANSWERED]"), repr(r)
    assert all("no answer key" in c.message for c in r.cases), repr(r)
    assert spec.judge_answer(right, None) and not any(  # the grader, keyless: never a pass
        c.passed for c in spec.judge_answer(right, None)
    )


@cuda.jit
def read(x, out, stride, offset):
    i = cuda.threadIdx.x
    out[i] = x[stride * i + offset]


def test_predict_answers_match_the_tracer():
    """The sectors and wavefronts the course expects are what course.sim.trace counts."""
    if course.MODE != "sim":
        pytest.skip("the tracer runs in the simulator")
    import numpy as np

    from course.sim import trace

    x = np.arange(32 * 33 + 8, dtype=np.float32)
    expected = _key(EXERCISES["predict_sectors"])
    for key, stride, offset in (
        ("coalesced", 1, 0),
        ("stride2", 2, 0),
        ("stride32", 32, 0),
        ("misaligned", 1, 1),
    ):
        t = trace.run(read, 1, 32, x, np.zeros(32, np.float32), stride, offset)
        c = t.coalescing_counts()["x"]
        assert c["sectors"] / c["requests"] == expected[key], key


# --- debug: wrong fixes a student might try -------------------------------------------

MUTANTS = {  # exercise -> three (text in the solution, replacement): each must fail
    "matmul_split_k": [
        ("cuda.atomic.add(C, (row, col), acc)", "C[row, col] += acc"),  # blocks race
        ("chunk = (K + cuda.gridDim.z - 1) // cuda.gridDim.z", "chunk = K // cuda.gridDim.z"),
        ("range(k0, min(K, k0 + chunk))", "range(k0, k0 + chunk)"),
    ],
    "tune_transpose": [
        ("B[r, c] = tile[tx, ty + k]", "B[r, c] = tile[ty + k, tx]"),
        ("    cuda.syncthreads()\n    for k", "    for k"),
        ("(32, 33)", "(32, 64)"),  # still a 32-way conflict
    ],
    "debug_grid_stride": [
        ("step = cuda.gridsize(1)", "step = cuda.blockDim.x * 2"),
        ("step = cuda.gridsize(1)", "step = cuda.gridDim.x"),
        ("y[k] = x[k] + y[k]", "y[k] = x[k] + y[k]\n        break"),
    ],
    "debug_matrix_layout": [
        ("if row < C.shape[0] and col < C.shape[1]:", "if row < C.shape[1] and col < C.shape[0]:"),
        ("if row < C.shape[0] and col < C.shape[1]:", "if True:"),
        (
            "C[row, col] = A[row, col] + B[row, col]",
            "C[col % C.shape[0], row % C.shape[1]] = A[row, col] + B[row, col]",
        ),
    ],
    "debug_reduce_sync": [
        ("        cuda.syncthreads()\n        s >>= 1", "        s >>= 1"),
        (
            "        cuda.syncthreads()\n        s >>= 1",
            "        cuda.syncthreads()\n        s >>= 2",
        ),
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
    "debug_center_guard": [
        ("if k < m * n:", "if k < m * n + 1:"),
        ("if k < m * n:", "if k < m * n - 1:"),
        ("if k < m * n:", "if k < n:"),
    ],
    "debug_matmul_sync": [
        (
            "        cuda.syncthreads()\n        for k in range(TILE):",
            "        for k in range(TILE):",
        ),
        ("for k in range(TILE):", "for k in range(TILE - 1):"),
        ("acc += sA[ty, k] * sB[k, tx]", "acc += sA[ty, k] * sB[tx, k]"),
    ],
    "debug_covariance_sync": [
        (
            "        cuda.syncthreads()\n        for k in range(chunk_size):",
            "        for k in range(chunk_size):",
        ),
        ("accum / num_entries", "accum / (num_entries - 1)"),
        ("for k in range(chunk_size):", "for k in range(chunk_size - 1):"),
    ],
    "debug_softmax_rescale": [
        ("l * math.exp(m - m_new)", "l * math.exp(m_new - m)"),
        ("+ math.exp(v - m_new)", "+ math.exp(v - m)"),
        ("math.exp(x[r, j] - m) / l", "math.exp(x[r, j] - m) / (l + float32(0.01))"),
    ],
    "center_coalesced": [
        ("if k < m * n:", "if k < m * n - 1:"),
        ("j = k - i * n", "j = k % m"),
        ("D[i, j] -= mean[j]", "D[i, j] -= mean[i % n]"),
    ],
    "window_constant": [
        ("for k in range(5):", "for k in range(4):"),
        ("w[k] * input[i + k]", "w[k] * input[i + k + 1]"),
        ("if i < N:", "if i <= N:"),
    ],
    "matmul_epilogue": [
        ("max(acc + bias[col], float32(0.0))", "max(acc, float32(0.0)) + bias[col]"),
        ("bias[col]", "bias[row % bias.size]"),
        ("max(acc + bias[col], float32(0.0))", "acc + bias[col]"),
    ],
    "sum_of_squares": [
        ("acc += x[j] * x[j]", "acc += x[j]"),
        ("cuda.atomic.add(out, 0, sdata[0])", "out[0] += sdata[0]"),
        (
            "range(cuda.grid(1), x.size, cuda.gridsize(1))",
            "range(cuda.grid(1), x.size, cuda.blockDim.x)",
        ),
    ],
    # tune: wrong "tunings", and correct kernels that still miss the target
    "tune_vector_add": [
        ("range(cuda.grid(1), n, cuda.gridsize(1))", "range(cuda.grid(1), n, cuda.blockDim.x)"),
        (
            "    for k in range(cuda.grid(1), n, cuda.gridsize(1)):\n        y[k] = x[k] + y[k]",
            "    for p in range(cuda.grid(1), (n + 1) // 2, cuda.gridsize(1)):\n"
            "        for k in range(2 * p, min(2 * p + 2, n)):\n            y[k] = x[k] + y[k]",
        ),
        ("y[k] = x[k] + y[k]", "y[k] = x[k] + y[k] if k < n - 1 else y[k]"),
        # coalesced but reads x twice: useless reads lower the efficiency (they raised it)
        ("y[k] = x[k] + y[k]", "y[k] = x[k] + y[k] + 0.0 * x[k]"),
    ],
    "tune_reduction": [
        ("if tid < s:", "if tid < s and tid % 2 == 0:"),
        ("        cuda.syncthreads()\n        s >>= 1", "        s >>= 1"),
        ("s >>= 1", "s >>= 2"),
        (  # no tree: every lane adds into sdata[0] (a shared atomic is never a broadcast)
            "    s = cuda.blockDim.x // 2\n    while s > 0:\n        if tid < s:\n"
            "            sdata[tid] += sdata[tid + s]\n        cuda.syncthreads()\n        s >>= 1\n",
            "    if tid > 0:\n        cuda.atomic.add(sdata, 0, sdata[tid])\n    cuda.syncthreads()\n",
        ),
    ],
    "tune_covariance": [
        ("        cuda.syncthreads()\n    if base_x", "    if base_x"),
        ("accum / num_entries", "accum / (num_entries + 1)"),
        (
            "(shared[chunk_size * chunk_size + k * chunk_size + ty]\n                      * shared[k * chunk_size + tx])",
            "(data[(chunk * chunk_size + k) * num_features + base_y + ty]\n"
            "                      * shared[k * chunk_size + tx] if chunk * chunk_size + k < num_entries"
            " and base_y + ty < num_features else float32(0))",
        ),
    ],
    "tune_matmul": [
        (
            "            acc += sA[ty, k] * sB[k, tx]\n        cuda.syncthreads()",
            "            acc += sA[ty, k] * sB[k, tx]",
        ),
        (
            "acc += sA[ty, k] * sB[k, tx]\n        cuda.syncthreads()\n    if row",
            "acc += sA[tx, k] * sB[k, ty]\n        cuda.syncthreads()\n    if row",
        ),
        (
            "acc += sA[ty, k] * sB[k, tx]",
            "acc += sA[ty, k] * (B[k0 + k, col] if k0 + k < K and col < N else float32(0.0))",
        ),
    ],
    "tune_centering": [
        ("j = k - i * n", "j = k - i * m"),
        ("if k < m * n:", "if k < m * n - 1:"),
        ("D[i, j] -= mean[j]", "D[i, j] -= mean[i % n]"),
    ],
    "count_positive": [
        ("if x[i] > 0:", "if x[i] < 0:"),
        ("cuda.atomic.add(count, 0, c)", "count[0] += c"),  # blocks race
        (
            "range(cuda.grid(1), x.shape[0], cuda.gridsize(1))",
            "range(cuda.grid(1), x.shape[0], cuda.blockDim.x)",
        ),
    ],
    "layernorm_warp": [
        ("math.sqrt(v / float32(C) + ", "math.sqrt(v / float32(C - 1) + "),  # unbiased
        (
            "s += cuda.shfl_xor_sync(0xffffffff, s, offset)",
            "s += cuda.shfl_down_sync(0xffffffff, s, offset)",
        ),  # lane 0 only
        (
            "    for c in range(lane, C, 32):\n        out[row, c]",
            "    for c in range(lane, C - 1, 32):\n        out[row, c]",
        ),  # loses a column
    ],
    "debug_layernorm_sync": [
        (
            "    cuda.syncthreads()              # every thread has read buf[0] before it is "
            "overwritten\n",
            "",
        ),  # the bug again
        ("math.sqrt(buf[0] / float32(C) + ", "math.sqrt(buf[0] / float32(C - 1) + "),
        ("    s = 16\n", "    s = 8\n"),  # half the tree
    ],
    "debug_max_identity": [
        ("float32(-math.inf)", "float32(-0.25)"),  # not the identity
        ("cuda.atomic.max(out, 0, acc)", "out[0] = max(out[0], acc)"),  # threads race
        (
            "range(cuda.grid(1), x.shape[0], cuda.gridsize(1))",
            "range(cuda.grid(1), x.shape[0] - 1, cuda.gridsize(1))",
        ),  # loses the tail
    ],
    "tune_histogram": [
        ("    for i in range(t, 4 * 256, cuda.blockDim.x):\n        sdata[i] = 0\n", ""),
        (
            "cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])",
            "hist[c0 + i // 256, i % 256] += sdata[i]",
        ),
        ("if sdata[i] > 0:", "if sdata[i] >= 0:"),
        (  # races only at the measured size (256 rows), which no test case has
            "cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])",
            "if data.shape[0] == 256:\n                hist[c0 + i // 256, i % 256] += sdata[i]\n"
            "            else:\n                cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])",
        ),
    ],
}


@pytest.mark.parametrize(
    "name, k", [(n, k) for n in sorted(MUTANTS) for k in range(len(MUTANTS[n]))]
)
def test_kernel_mutants(name, k):
    spec = EXERCISES[name]
    plan, ns = _setup(spec.lesson)
    ex = plan.exercises[name]
    good = "\n".join(l for l in ex.cell.source.splitlines() if not l.lstrip().startswith("###"))
    old, new = MUTANTS[name][k]
    assert old in good, (name, old)
    local = dict(ns)
    run_cell(good.replace(old, new, 1), f"<{name} mutant {k}>", local)
    with first_failure():  # the verdict is "not passed" from the first failed case on
        r = course.check(name, local[ex.function], hidden=True, record=False, seed=5)
    assert not r.passed, f"{name}: mutant {k} ({new!r}) passes"


def test_every_new_kernel_exercise_has_three_mutants():
    kernels = [n for n in NEW if EXERCISES[n].kind != "predict"]
    assert sorted(MUTANTS) == sorted(kernels)
    assert all(len(MUTANTS[n]) >= 3 for n in kernels)


def test_readme_lists_every_exercise_with_its_kind():
    text = (REPO / "README.md").read_text()
    missing = [n for n, e in EXERCISES.items() if f"`{n}` ({e.kind})" not in text]
    assert not missing, f"README's lesson table lacks {missing}"
