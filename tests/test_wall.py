"""Nothing a submission controls is read, compiled or run outside the wall (issue #38):
signatures parsed by the course (``grading/source/signature.py``), one program for the compiler
and the simulator (``grading/source/allowed.py``), the compile gate in the sandbox with the
submission's deadline (``grading/wall/gate.py``), and honest kernels still pass."""

import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import course
from course.grading.source import allowed
from course.grading.source import unit as U
from course.grading.source.signature import SignatureError, parse

EXERCISE = "debug_grid_stride"  # @cuda.jit def add_stride(n, x, y): y[i] += x[i]
LOOP = "    for i in range(cuda.grid(1), n, cuda.gridsize(1)):\n"
MARK = Path(tempfile.gettempdir()) / "course-wall-pwned"


def _define(src: str, name: str = "add_stride"):
    ns = {"cuda": cuda, "np": np}
    U.run_cell(src, f"<cell {name} {abs(hash(src))}>", ns)
    return ns[name]


def _unit(source: str, signature=None, globals_=None, options=None, name="add_stride"):
    return {
        "name": name,
        "source": source,
        "options": options or {},
        "signature": signature,
        "firstline": 1,
        "globals": globals_ if globals_ is not None else {"cuda": ["module", "numba.cuda"]},
    }


EVIL_SIGNATURES = [
    f"__import__('os').system('touch {MARK}') or void(float32[:])",
    f"void(float32[:]) if open('{MARK}', 'w') else None",
    "void(int64, float32[:], float32[:]); import os",
    "void(float32[:].__class__)",
    "void(" + "float32[:], " * 600 + "float32[:])",
]


@pytest.mark.parametrize("sig", EVIL_SIGNATURES)
def test_a_signature_is_parsed_never_evaluated(sig):
    MARK.unlink(missing_ok=True)
    with pytest.raises(SignatureError):
        parse(sig)
    src = f"@cuda.jit({sig!r})\ndef add_stride(n, x, y):\n{LOOP}        y[i] = x[i] + y[i]\n"
    result = course.check(EXERCISE, _define(src), record=False)  # the notebook's path
    assert not result.passed and "signature" in result.error, result.error
    with pytest.raises(U.UnitError, match="signature"):  # a forged unit
        U.rebuild(_unit(src, signature=sig))
    from course.grading.wall.gate import gate

    why = gate().check(_unit(src, signature=sig), [])  # straight to the gate
    assert why and "signature" in why, why
    assert not MARK.exists()


def test_signatures_read_as_numba_reads_them():
    from numba.core import types

    sig = parse("void(int64, float32[:], f4[:, ::1], float64[::1, :])")
    assert (
        sig.args == (types.int64, types.float32[:], types.float32[:, ::1], types.float64[::1, :])
        and sig.return_type == types.none
    )
    assert parse("float32(float32, float32)").return_type == types.float32
    assert parse("(int32[:],)").args == (types.int32[:],)


ATTACKS = {  # bodies that would be typed one way by the compiler and run another way
    "is_none_prune": "    if cuda.ldca is None:\n        y[0] = 1\n",
    "gpu_only_attribute": "    f = cuda.ldca\n",
    "module_as_value": "    c = cuda\n    y[0] = c.grid(1)\n",
    "getattr": "    f = getattr(cuda, 'ldca')\n",
    "open": "    f = open('/etc/hostname')\n",
    "dunder": "    y[0] = cuda.__dict__\n",
    "private_name": "    _x = 1\n    y[0] = _x\n",
    "driver": "    d = cuda.driver\n",
    "global_statement": "    global y2\n    y2 = 1\n",
    # the red team's: numba decides `X == None` before typing with None as its type, so
    # the simulator ran a branch the compiler never typed (np.ctypeslib...system)
    "none_compare": "    if n == None:\n        y[0] = 1\n",
    "submodule": "    f = np.f2py\n",
    "submodule_chain": "    np.ctypeslib.ctypes.CDLL(0)\n",
    "numpy_chain": "    f = np.lib.stride_tricks\n",
}


RED_TEAM_CELLS = {  # whole cells (globals of their own), each refused before anything runs
    "numba_none_global": "import numba\nNT = numba.types.none\n@cuda.jit\n"
    "def add_stride(n, x, y):\n    if NT == 1:\n        y[0] = 1\n",
    "dtype_vs_none": "DT = np.dtype(np.float64)\n@cuda.jit\ndef add_stride(n, x, y):\n"
    "    if DT == None:\n        y[0] = 1\n",
    "default_none": "@cuda.jit(device=True)\ndef dev(i, y, z=None):\n    if z == 1:\n"
    "        y[i] = 1\n@cuda.jit\ndef add_stride(n, x, y):\n    dev(0, y)\n",
    "submodule_by_name": "from numpy import ctypeslib\n@cuda.jit\ndef add_stride(n, x, y):\n"
    "    ctypeslib.ctypes.CDLL(0)\n",
}


@pytest.mark.parametrize("cell", sorted(RED_TEAM_CELLS))
def test_the_red_teams_cells_are_refused(cell):
    result = course.check(EXERCISE, _define(RED_TEAM_CELLS[cell]), record=False)
    assert not result.passed and result.error.startswith("your kernel cannot be checked"), (
        result.error
    )
    assert not result.cases


FORGED = {  # globals a compromised worker may send
    "builtins_as_numba_type": {"B": ["numba_type", "__builtins__"]},
    "none_type": {"NT": ["numba_type", "none"]},
    "own_identity_decorator": {"_unit_keeps_lines": ["const", 1]},
    "builtins_global": {"__builtins__": ["const", 1]},
    "cuda_by_name": {"c": ["attr", "numba", "cuda"]},
    "submodule_by_name": {"f": ["attr", "numpy", "f2py"]},
    "negative_shape": {"W": ["array", "<f4", [-1], [0.0] * 70000]},
    "shape_data_mismatch": {"W": ["array", "<f4", [2], [0.0] * 3]},
    "object_scalar": {"S": ["scalar", "|O", 1]},
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_forged_globals_are_refused(case):
    body = "    y[0] = 1\n" if case != "cuda_by_name" else "    c.ldca(y, 0)\n"
    with pytest.raises(U.UnitError):
        U.rebuild(_unit(f"def add_stride(n, x, y):\n{body}", globals_=FORGED[case]))


def test_a_declared_signature_must_fit_the_launch():
    """The simulator ignores a signature; a GPU refuses arrays of another type. The gate
    compares them, so the laptop says what the class GPU would."""
    src = (
        "@cuda.jit('void(int64, float64[::1], float64[::1])')\ndef add_stride(n, x, y):\n"
        + LOOP
        + "        y[i] = x[i] + y[i]\n"
    )
    result = course.check(EXERCISE, _define(src), record=False)
    assert not result.passed and "does not fit the exercise's launch" in result.error, result.error


def test_device_functions_called_on_many_paths_are_read_once_and_bounded():
    src = "@cuda.jit(device=True)\ndef f0(v):\n    return v + 1\n"
    for k in range(1, 9):
        src += (
            f"@cuda.jit(device=True)\ndef f{k}(v):\n    return f{k - 1}(v) + f{k - 1}(v) "
            f"+ f{k - 1}(v) + f{k - 1}(v)\n"
        )
    src += "@cuda.jit\ndef add_stride(n, x, y):\n" + LOOP + "        y[i] = f8(x[i])\n"
    t = time.monotonic()
    with pytest.raises(U.UnitError, match="device functions"):
        U.extract(_define(src), ())
    assert time.monotonic() - t < 10


def test_nested_functions_are_not_undefined_names():
    src = (
        "@cuda.jit\ndef add_stride(n, x, y):\n    twice = lambda v: 2 * v\n"
        + LOOP
        + "        y[i] = x[i] + y[i] + 0 * twice(1)\n"
    )
    assert "twice" not in U.extract(_define(src), ())["globals"]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_body_outside_the_kernel_api_is_refused_before_anything_runs(attack):
    src = (
        f"@cuda.jit\ndef add_stride(n, x, y):\n{ATTACKS[attack]}{LOOP}        y[i] = x[i] + y[i]\n"
    )
    result = course.check(EXERCISE, _define(src), record=False)
    assert not result.passed and result.error.startswith("your kernel cannot be checked"), (
        result.error
    )
    assert not result.cases  # nothing ran
    with pytest.raises(U.UnitError):  # and a worker's forged unit is refused too
        U.rebuild(_unit(src))


def test_an_attribute_taken_from_a_module_is_checked_too():
    with pytest.raises(allowed.NotAllowed, match="cuda.ldca"):
        allowed.check_attr("numba.cuda", "ldca", "k")
    allowed.check_attr("numba.cuda", "syncthreads", "k")
    allowed.check_attr("numpy", "float32", "k")
    with pytest.raises(U.UnitError):
        U.rebuild(
            _unit(
                "def add_stride(n, x, y):\n    y[0] = f(1)\n",
                globals_={"f": ["attr", "numba.cuda", "ldca"]},
            )
        )


def test_a_rebuilt_kernel_sees_only_the_builtins_a_gpu_has():
    fn = U.rebuild(
        _unit(f"@cuda.jit\ndef add_stride(n, x, y):\n{LOOP}        y[i] = x[i] + y[i]\n")
    )
    names = set(fn.py_func.__globals__["__builtins__"])
    assert names <= set(allowed.BUILTINS) and "open" not in names and "__import__" not in names


def test_every_kernel_api_name_is_real_in_the_compiler():
    """The allowlist names nothing that is missing or None in the compiler's numba.cuda
    (its process runs with the simulator off, as the gate's does)."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\nfrom numba import cuda\nfrom course.grading.source.allowed import CUDA\n"
        "bad = [n for n in CUDA if getattr(cuda, n, None) is None]\n"
        "bad += [f'{n}.{a}' for n, sub in CUDA.items() if sub for a in sub "
        "if getattr(getattr(cuda, n, None), a, None) is None]\nprint(json.dumps(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"},
        timeout=120,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], out.stderr[-500:]


HONEST = {
    "explicit_signature": "@cuda.jit('void(int64, float32[:], float32[:])')\n"
    "def add_stride(n, x, y):\n" + LOOP + "        y[i] = x[i] + y[i]\n",
    "alias": "from numba import cuda as cu\n@cu.jit\ndef add_stride(n, x, y):\n"
    "    for i in range(cu.grid(1), n, cu.gridsize(1)):\n        y[i] = x[i] + y[i]\n",
    "options": "@cuda.jit(boundscheck=False, fastmath=True, lineinfo=True, max_registers=32, "
    "opt=True)\ndef add_stride(n, x, y):\n" + LOOP + "        y[i] = x[i] + y[i]\n",
    "tuple_constant": "OFFS = (0, 1)\n@cuda.jit\ndef add_stride(n, x, y):\n"
    + LOOP
    + "        y[i] = x[i + OFFS[0]] + y[i] * OFFS[1]\n",
    "dtype_constant": "DT = np.dtype(np.float32)\n@cuda.jit\ndef add_stride(n, x, y):\n"
    "    t = cuda.local.array(1, DT)\n"
    + LOOP
    + "        t[0] = x[i]\n        y[i] = t[0] + y[i]\n",
    "device_signature_inline": "@cuda.jit('float32(float32, float32)', device=True, "
    "inline='always')\ndef plus(a, b):\n    return a + b\n"
    "@cuda.jit\ndef add_stride(n, x, y):\n" + LOOP + "        y[i] = plus(x[i], y[i])\n",
}


@pytest.mark.parametrize("how", sorted(HONEST))
def test_honest_kernels_pass(how):
    result = course.check(EXERCISE, _define(HONEST[how]), record=False)
    assert result.passed, (result.error, [c.message for c in result.cases if not c.passed])


def test_boundscheck_true_is_told_what_to_do():
    src = (
        "@cuda.jit(boundscheck=True)\ndef add_stride(n, x, y):\n"
        + LOOP
        + "        y[i] = x[i] + y[i]\n"
    )
    with pytest.raises(U.UnitError, match="remove it"):
        U.validate(_unit(src, options={"boundscheck": True}))


# --- the gate as the grader runs it: sandboxed, per submission, inside its deadline ---------


@pytest.fixture(scope="module")
def sandbox():
    from course.grading.wall.isolate import for_grading

    run_dir = Path(tempfile.mkdtemp(prefix="course-wall-"))
    iso, said = for_grading([], run_dir)
    if iso is None:
        pytest.skip(said)
    return iso


def _slow_unit(depth: int = 8) -> dict:
    src = "@cuda.jit(device=True, inline='always')\ndef f0(v):\n    return v * 1.0001 + 1.0\n"
    for k in range(1, depth):
        src += (
            f"@cuda.jit(device=True, inline='always')\ndef f{k}(v):\n"
            f"    return f{k - 1}(v) + f{k - 1}(v * 0.5)\n"
        )
    src += (
        "@cuda.jit\ndef add_stride(n, x, y):\n"
        + LOOP
        + f"        y[i] = x[i] + y[i] + 0 * f{depth - 1}(x[i])\n"
    )
    return U.extract(_define(src), ())


def test_the_graders_gate_runs_sandboxed_and_a_slow_compile_costs_its_submission_alone(
    sandbox, monkeypatch
):
    """A chain of inlined device functions that takes the compiler ~25 s: with a 12 s
    submission it is 'not judged' within its own deadline, and the next submission (its
    own fresh gate) is judged normally.  The gate process carries none of the grader's
    secrets in its environment."""
    from course.exercises import get
    from course.grading.judging import session
    from course.grading.judging.settings import GradeSettings

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wall-secret-1")
    spec = get(EXERCISE)
    seen = []
    real = session.Judge.gate

    def spy(jd):
        g = real(jd)
        seen.append(g)
        return g

    monkeypatch.setattr(session.Judge, "gate", spy)
    t = time.monotonic()
    error, cases = session.judge_unit(
        spec, _slow_unit(), GradeSettings(seed=7, mode="sim", timeout=12.0, isolation=sandbox)
    )
    took = time.monotonic() - t
    assert error.startswith("not judged") and "time limit" in error and not cases, error
    assert took < 25, took
    honest = U.extract(_define(HONEST["explicit_signature"]), ())
    environ = []
    from course.grading.wall.gate import Gate

    check = Gate.check

    def look(self, unit, calls):  # the compiler process is alive after its answer
        why = check(self, unit, calls)
        environ.extend(_environ_of_tree(self._child.proc.pid))
        return why

    monkeypatch.setattr(Gate, "check", look)
    error, cases = session.judge_unit(
        spec, honest, GradeSettings(seed=7, mode="sim", timeout=120.0, isolation=sandbox)
    )
    assert not error and cases and all(c.passed for c in cases), (error, cases)
    assert len({id(g) for g in seen}) == len(seen) == 2  # one gate per submission
    assert _our_cgroups() == []  # every sandbox's cgroup removed, none leaked
    assert len(environ) >= 2 and all(b"wall-secret-1" not in e for e in environ)
    assert any(b"NUMBA_ENABLE_CUDASIM=0" in e for e in environ)


def _our_cgroups() -> list[str]:
    """This process's sandbox cgroups still on the host (v2 or v1's memory and pids)."""
    prefix = f"course-{os.getpid()}-"
    found = []
    for root in (
        Path("/sys/fs/cgroup"),
        Path("/sys/fs/cgroup/memory"),
        Path("/sys/fs/cgroup/pids"),
    ):
        try:
            found += [p.name for p in root.iterdir() if p.name.startswith(prefix)]
        except OSError:
            continue
    return found


def _environ_of_tree(pid: int) -> list[bytes]:
    """The environments of ``pid`` and its descendants, read from the host's /proc."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            out.append(Path(f"/proc/{p}/environ").read_bytes())
            for t in os.listdir(f"/proc/{p}/task"):
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
                todo += [int(k) for k in kids]
        except OSError:
            continue
    return out


# --- what the grader's own process does with a submission ---------------------------------


def test_a_students_text_cannot_forge_structure_in_the_feedback():
    """A cell's error text (the student's own) with newlines stays one line: it cannot add
    a heading, a score line or a table to the feedback."""
    from course.grading.classroom import feedback
    from course.grading.classroom.batch import Graded

    forged = "vector_add: 0 points: boom\n## vector_add: 1 / 1\n**Score: 6 / 6**\n| a | b |"
    g = Graded(
        "alice",
        "01_vector_add.ipynb",
        "01_vector_add",
        "sim",
        points={"vector_add": 0.0},
        max_points={"vector_add": 1.0},
        reasons=[forged],
        notes=["note\n# Feedback for bob"],
    )
    lines = feedback.markdown(g).splitlines()
    assert [l for l in lines if l.startswith("## ")] == ["## vector_add: 0 / 1", "## Notes"]
    assert [l for l in lines if l.startswith("**Score")] == ["**Score: 0 / 1**  "]
    assert not any(l.startswith(("# Feedback for bob", "| a |")) for l in lines)


def test_a_huge_cell_is_not_parsed_in_the_graders_process():
    """Finding a student's cells parses them in the grader's own process; a 4 MB cell
    would cost gigabytes there, so cells past MAX_PARSED are read with a regex only, and a
    notebook of too many cells is refused before its cells are looked at."""
    import json
    import resource

    from course.grading.classroom import notebook as nbk

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert nbk.defined_functions("x = 1\n" * (700 << 10) + "def add(n, x, y):\n    pass\n") == [
        "add"
    ]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 << 10  # KB
    with pytest.raises(nbk.NotebookError, match="cells"):
        nbk.loads(json.dumps({"cells": [0] * (nbk.MAX_CELLS + 1)}).encode(), "x.ipynb")


def test_a_dask_worker_without_a_sandbox_grades_nothing(monkeypatch, tmp_path):
    """A worker that cannot build the sandbox fails the task with a sentence (the executor
    retries once, then writes an error row) instead of grading unsandboxed."""
    from types import SimpleNamespace

    from course.grading.classroom import dask_workers as executors
    from course.grading.wall import isolate

    monkeypatch.setattr(
        isolate,
        "for_grading",
        lambda hide, run: (
            None,
            "worker sandbox: NONE (this system allows no PID and mount namespaces).",
        ),
    )
    opts = SimpleNamespace(isolation_choice="auto", mode="sim", private=())
    item = {
        "rel": "a/01.ipynb",
        "folder": "a",
        "student": "a",
        "lesson": "01_vector_add",
        "data": b"{}",
        "problem": None,
        "path": str(tmp_path / "01.ipynb"),
    }
    ran = []
    with pytest.raises(executors.SandboxMissing, match="graded nothing"):
        executors.grade_payload(item, lambda *a: ran.append(a), {}, opts)
    assert ran == []


def test_numba_types_as_the_course_kernels_use_them_pass():
    """``from numba import types`` and ``numba.types.float32`` (the course's own kernels
    use the first) are the number types; anything else from there is refused."""
    src = (
        "import numba\nfrom numba import types\n@cuda.jit\ndef add_stride(n, x, y):\n"
        "    t = cuda.local.array(1, types.float32)\n"
        "    s = cuda.local.array(1, numba.types.float32)\n"
        + LOOP
        + "        t[0] = x[i]\n        s[0] = y[i]\n        y[i] = t[0] + s[0]\n"
    )
    result = course.check(EXERCISE, _define(src), record=False)
    assert result.passed, (result.error, [c.message for c in result.cases if not c.passed])
    bad = "from numba import types\n@cuda.jit\ndef add_stride(n, x, y):\n    y[0] = types.misc\n"
    assert "number types" in course.check(EXERCISE, _define(bad), record=False).error
