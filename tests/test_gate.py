"""The compile gate and kernel units (course/grading/wall/gate.py, unit.py): what the simulator
runs but a GPU rejects fails every check; what a unit carries cannot run code."""

import threading
import time

import numpy as np
import pytest
from numba import cuda

import course
from course.grading.source import unit as U
from course.grading.wall import gate as G

SIM_ONLY = {  # bodies the simulator runs and numba-cuda's compiler rejects (H100-verified)
    "dict": "        d = {'x': x[i], 'y': y[i]}\n        y[i] = d['x'] + d['y']\n",
    "list": "        l = [x[i], y[i]]\n        y[i] = l[0] + l[1]\n",
    "slice": "        y[i:i+1] = x[i:i+1] + y[i:i+1]\n",
}


def _kernel(body: str, name: str = "add"):
    src = (
        f"@cuda.jit\ndef {name}(n, x, y):\n"
        f"    for i in range(cuda.grid(1), n, cuda.gridsize(1)):\n{body}"
    )
    ns = {"cuda": cuda}
    U.run_cell(src, f"<cell {name}>", ns)
    return ns[name]


WHY = {
    "dict": "cannot make Python objects",
    "list": "cannot make Python objects",
    "slice": "work element by element",
}


@pytest.mark.parametrize("what", sorted(SIM_ONLY))
def test_a_kernel_the_gpu_rejects_fails_the_check_with_the_reason(what):
    k = _kernel(SIM_ONLY[what])
    r = course.check("vector_add", k, record=False, seed=5)
    assert not r.passed and not r.cases, repr(r)
    assert "does not compile for a GPU" in r.error and "sm_90" in r.error, r.error
    assert WHY[what] in r.error, r.error  # what the construct is, in a student's words


@pytest.mark.skipif(course.MODE != "sim", reason="what the simulator alone would do")
def test_without_the_gate_the_simulator_would_have_passed_them():
    """The mutant of the gate: the same kernels compute the right answer in the simulator."""
    x, y = np.arange(5, dtype=np.float32), np.ones(5, dtype=np.float32)
    for body in (SIM_ONLY["dict"], SIM_ONLY["list"]):
        out = y.copy()
        _kernel(body)[1, 8](5, x, out)
        assert np.array_equal(out, x + y)


def test_the_gate_passes_a_kernel_that_compiles_and_caches_it():
    k = _kernel("        y[i] = x[i] + y[i]\n", "fine")
    args = [[G.describe(a) for a in (7, np.zeros(7, np.float32), np.zeros(7, np.float32))]]
    unit = U.extract(k)
    assert G.gate().check(unit, args) is None
    t0 = time.perf_counter()
    for _ in range(50):
        assert G.gate().check(unit, args) is None
    assert time.perf_counter() - t0 < 0.5, "a repeated check must hit the cache"


# --- what a unit may carry ------------------------------------------------------------


def _cell(src: str, name: str, extra=None):
    ns = {"cuda": cuda, **(extra or {})}
    U.run_cell(src, f"<cell {name}>", ns)
    return ns[name]


REJECTED = {
    "decorator_with_code": (
        "@(lambda f: cuda.jit(f))\ndef k(x):\n    x[0] = 1\n",
        "exactly one decorator",
    ),
    "default_with_code": (
        "@cuda.jit\ndef k(x, n=__import__('os').getpid()):\n    x[0] = n\n",
        "not a literal",
    ),
    "jit_option_code": (
        "@cuda.jit(fastmath=__import__('os').getpid() > 0)\ndef k(x):\n    x[0] = 1\n",
        "must be literals",
    ),
    "global_dict": ("@cuda.jit\ndef k(x):\n    x[0] = TABLE[0]\n", "a dict"),
    "global_module": (
        "import os\n@cuda.jit\ndef k(x):\n    x[0] = os.getpid()\n",
        "the module `os`",
    ),
    "global_object": ("class C:\n    v = 1\n@cuda.jit\ndef k(x):\n    x[0] = C.v\n", "a type"),
    "huge_array": (
        "import numpy as np\nBIG = np.zeros(1 << 20)\n@cuda.jit\ndef k(x):\n    x[0] = BIG[0]\n",
        "at most",
    ),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_a_unit_carries_only_data(case):
    src, words = REJECTED[case]
    k = _cell(src, "k", {"TABLE": {0: 1.0}})
    with pytest.raises(U.UnitError) as err:
        U.extract(k)
    assert words in str(err.value), str(err.value)
    r = course.check("vector_add", k, record=False)
    assert not r.passed and "cannot be checked" in r.error


def test_a_unit_keeps_the_constants_and_device_functions_it_uses():
    k = _cell(
        "import math\nimport numpy as np\nTPB = 64\nW = np.arange(3, dtype=np.float32)\n"
        "@cuda.jit(device=True)\ndef twice(v):\n    return 2 * v\n"
        "@cuda.jit\ndef k(x):\n    i = cuda.grid(1)\n"
        "    if i < x.size:\n        x[i] = twice(W[i % 3]) + TPB + math.floor(0.5)\n",
        "k",
    )
    unit = U.extract(k)
    assert set(unit["globals"]) == {"twice", "W", "TPB", "math", "cuda"}
    again = U.rebuild(unit)
    x = np.zeros(5, np.float32)
    again[1, 8](x)
    assert list(x) == [64, 66, 68, 64, 66]


FORGED_UNITS = {
    "two_statements": "import os\ndef k(x):\n    x[0] = 1\n",
    "decorator_in_source": "@print\ndef k(x):\n    x[0] = 1\n",
    "default_code": "def k(x, n=print('ran')):\n    x[0] = n\n",
}


@pytest.mark.parametrize("case", sorted(FORGED_UNITS))
def test_rebuilding_a_forged_unit_runs_nothing(case, capsys):
    """A worker may send any JSON: a unit whose source would run code is refused."""
    unit = {
        "name": "k",
        "source": FORGED_UNITS[case],
        "options": {},
        "signature": None,
        "firstline": 1,
        "globals": {},
    }
    with pytest.raises(U.UnitError):
        U.rebuild(unit)
    assert "ran" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "k"},  # fields missing
        {
            "name": "k",
            "source": "",
            "options": {"link": ["x"]},
            "signature": None,
            "firstline": 1,
            "globals": {},
        },  # a forbidden option
        {
            "name": "k",
            "source": "def k(x):\n    x[0] = 1\n",
            "options": {},
            "signature": None,
            "firstline": 1,
            "globals": {"os": ["module", "os"]},
        },  # a module not allowed
        {
            "name": "k",
            "source": "def k(x):\n    x[0] = 1\n",
            "options": {},
            "signature": None,
            "firstline": 1,
            "globals": {"f": ["attr", "numpy", "_core"]},
        },  # a private attribute
    ],
)
def test_a_malformed_unit_is_refused(bad):
    with pytest.raises(U.UnitError):
        U.rebuild(bad)


# --- fair timing ----------------------------------------------------------------------


def test_the_measuring_lock_lets_one_measurement_at_a_time(monkeypatch, tmp_path):
    from course.platform.gpu_lock import device_lock

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    inside, overlaps = [], []

    def measure():
        with device_lock():
            inside.append(1)
            if len(inside) > 1:
                overlaps.append(1)
            time.sleep(0.05)
            inside.pop()

    threads = [threading.Thread(target=measure) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps


def test_gpu_figures_use_the_ceilings_given_and_say_when_the_gpu_was_shared():
    """On a GPU the target is a speed-up over the given kernel (``ceilings["starter"]``,
    timed by the judge); the ceilings given still decide what is believable."""
    from course.exercises import get

    spec = get("tune_vector_add")
    _n, nbytes, _f = spec.work(spec.gpu_case)
    ms = nbytes / 3000e9 * 1e3 / 0.8  # 80 % of a 3,000 GB/s copy
    ceilings = {
        "copy_gbps": 3000.0,
        "fp32_tflops": 50.0,
        "device": "NVIDIA H100 80GB HBM3",
        "starter": {"ms": ms * 3, "runs": 30},  # the given kernel, 3x slower
    }
    quiet = spec.judge_figures({"ms": ms, "median_ms": ms * 1.02}, "gpu", ceilings)
    assert quiet.passed and "0.8" in quiet.message and "spread" not in quiet.message
    past = spec.judge_figures(
        {"ms": ms, "median_ms": ms * 1.02}, "gpu", dict(ceilings, copy_gbps=1000.0)
    )
    assert not past.passed and "not believable" in past.message  # the ceiling given counts
    no_starter = spec.judge_figures(
        {"ms": ms, "median_ms": ms}, "gpu", {k: v for k, v in ceilings.items() if k != "starter"}
    )
    assert not no_starter.passed  # no given kernel's time: no target, never a pass
    noisy = spec.judge_figures({"ms": ms, "median_ms": ms * 1.6}, "gpu", ceilings)
    assert noisy.passed and "another program was using this GPU" in noisy.message


def test_the_timed_launch_gets_plain_contiguous_arrays():
    """A guarded 2-D buffer's view is strided, and numba compiles slower indexing for it: the
    tune figure would then measure the check, not the kernel (tune_transpose fell from 0.50
    to below its 0.485 target on an H100 that way).  The measured launch's arrays are plain;
    its outputs are still judged (a poisoned, unwritten output fails)."""
    import numpy as np

    from course.exercises import Case, get
    from course.grading.judging import judge
    from course.grading.judging.cases import measured_rng

    spec = get("tune_transpose")  # its GPU case's shape, smaller
    case = Case("m x n = 64 x 96", {"m": 64, "n": 96}, (3, 2), (32, 8))
    prep = judge.prepare(spec, case, measured_rng(1), guard=False)
    bufs = prep.buffers()
    assert all(b.shape == prep.shapes[k] and b.flags.c_contiguous for k, b in bufs.items())
    assert np.isnan(bufs["B"]).all()  # poisoned until written
    assert judge.judge(spec, case, prep, bufs) is not None
    done = dict(bufs, B=prep.host["A"].T.copy())
    assert judge.judge(spec, case, prep, done) is None
    guarded = judge.prepare(spec, case, measured_rng(1)).buffers()
    assert guarded["A"].shape != prep.shapes["A"]  # the cases keep their guard bands
