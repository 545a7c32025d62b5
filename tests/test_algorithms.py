"""Lesson 12: course.kernels.algorithms (the contract) against numpy at odd sizes, with
several functors and dtypes; the reduction's mutants (wrong identity, lost tail, race) are
caught; the generic kernels compile for real GPUs; the CPU policies agree."""

import inspect

import numpy as np
import pytest
from numba import cuda
from test_ptx import compile_off_simulator

from course.kernels import algorithms as A
from course.sim import trace

RNG = np.random.default_rng(120)
X = RNG.uniform(-1.5, -0.5, 197).astype(np.float32)  # odd size, all negative
Y = RNG.uniform(-1, 1, 197).astype(np.float32)
XI = RNG.integers(-1000, 1000, 331).astype(np.int32)


def test_transform_unary_binary_and_iterators():
    assert np.array_equal(A.transform(A.negate, XI), -XI)
    got = A.transform(A.plus, X, Y)
    assert got.dtype == np.float32 and np.allclose(got, X.astype(np.float64) + Y, rtol=1e-6)
    assert np.array_equal(
        A.transform(A.squared, A.counting(-3), out=np.empty(7, np.int64)), np.arange(-3, 4) ** 2
    )
    assert np.array_equal(A.transform(A.plus, XI, A.constant(np.int32(5))), XI + 5)
    d = A.transform(A.multiply, cuda.to_device(X), cuda.to_device(Y))
    assert hasattr(d, "copy_to_host") and np.allclose(d.copy_to_host(), X * Y)


@pytest.mark.parametrize(
    "op, init, ref",
    [
        ("plus", 0, lambda a: a.sum(dtype=np.int64)),
        ("plus", 7, lambda a: a.sum(dtype=np.int64) + 7),  # init combined once
        ("maximum", np.int32(-(2**31)), np.max),
        ("minimum", np.int32(2**31 - 1), np.min),
    ],
)
def test_integer_reductions_are_exact(op, init, ref):
    got = A.reduce(getattr(A, op), XI, init)
    assert got == ref(XI) and got.dtype == np.asarray(init).dtype


def test_float_reductions_norm_and_dot_against_float64():
    assert A.reduce(A.maximum, X, np.float32(-np.inf)) == X.max()  # negative data
    assert A.reduce(A.maximum, X, np.float32(0)) == 0  # init counts
    assert abs(A.norm(X) - A.reference_norm(X)) < 1e-5 * A.reference_norm(X)
    dot = A.reduce(A.plus, A.transform_iterator(A.zip_iterator(X, Y), A.multiply_pair), 0.0)
    assert abs(dot - np.dot(X.astype(np.float64), Y)) < 1e-5
    assert A.reduce(A.plus, np.empty(0, np.float32), np.float32(3)) == 3


def test_sequence_fill_replace_saxpy():
    assert np.array_equal(A.sequence(9, 4, -2), 4 - 2 * np.arange(9))
    assert np.allclose(A.sequence(5, 0.5, 0.25, np.float32), 0.5 + 0.25 * np.arange(5))
    z = XI.copy()
    assert A.fill(z, 3) is z and (z == 3).all()
    w = np.array([1, 2, 1, 3, 1], np.int32)
    assert np.array_equal(A.replace(w, 1, 9), [9, 2, 9, 3, 9])
    for saxpy in (A.saxpy_fast, A.saxpy_slow):
        y = cuda.to_device(Y.copy())
        assert np.allclose(saxpy(2.0, cuda.to_device(X), y).copy_to_host(), 2 * X + Y, atol=1e-6)


@pytest.mark.parametrize("policy", ["cpu", "parallel"])
def test_cpu_policies_run_the_same_functors(policy):
    assert A.reduce(A.plus, XI, 0, policy=policy) == XI.sum()
    assert abs(A.norm(X, policy=policy) - A.reference_norm(X)) < 1e-5 * A.reference_norm(X)
    assert np.allclose(A.transform(A.plus, X, Y, policy=policy), X + Y)
    with pytest.raises(ValueError, match="policy"):
        A.reduce(A.plus, XI, 0, policy="omp")


# --- the reduction's mutants: edits of the library's own kernel that the checks must catch --

MUTATIONS = {
    "wrong identity": (
        "        if i < n:                                   # the thread's first element"
        " starts it\n            acc = acc_t(read(i, data))\n            mine = 1\n"
        "            i += g\n",
        "        mine = 1\n",
    ),
    "lost tail": (
        "while i < n:                                # the tail",
        "while False:                                # the tail",
    ),
    "counted twice": ("            i += 4 * g\n", "            i += 3 * g\n"),
    "race": ("            cuda.syncthreads()\n            s //= 2", "            s //= 2"),
}
XL = RNG.integers(-1000, 1000, 2_333).astype(np.int32)  # long enough for 4 reads a step


def _problems() -> list[str]:
    """What the checks above would report about the current _reduce_kernel."""
    out = []
    with trace.recording() as traces:
        if A.reduce(A.maximum, X, np.float32(-np.inf)) != X.max():
            out.append("max of negative data")
        if A.reduce(A.plus, XI, 0) != XI.sum() or A.reduce(A.plus, XL, 0) != XL.sum():
            out.append("exact int sum")
    if any(t.races() for t in traces):
        out.append("race")
    return out


def test_the_library_kernel_passes():
    assert _problems() == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_reduction_mutants_are_caught(name, monkeypatch):
    old, new = MUTATIONS[name]
    src = inspect.getsource(A._reduce_kernel)
    assert old in src, name
    ns = dict(vars(A))
    exec(compile(src.replace(old, new), f"<mutant {name}>", "exec"), ns)
    monkeypatch.setattr(A, "_reduce_kernel", ns["_reduce_kernel"])
    assert _problems(), f"the mutant '{name}' passes"


PTX = r"""
import json
import course
import numpy as np
from numba import cuda, types
from numba.cuda import dispatcher
from course.grading.wall.gate import _TARGET      # device functions ask for a current device:
dispatcher.get_current_device = lambda: _TARGET   # the target compiled for, as the gate does
from course.kernels import algorithms as A
f32 = types.float32[::1]
out = []
jobs = [
    (A.transform_kernel(("array",), ("array",), A.plus, 1), (types.UniTuple(f32, 2), f32)),
    (A._reduce_kernel(("transform", ("array",), A.squared), A.plus, "<f4"),
     (types.Tuple((f32,)), types.int64, f32, types.float32, types.int64)),
    (A._reduce_kernel(("transform", ("zip", ("array",), ("array",), 1), A.multiply_pair),
                      A.plus, "<f8"),
     (types.UniTuple(f32, 2), types.int64, types.float64[::1], types.float64, types.int64)),
]
for k, sig in jobs:
    ptx, _ = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))
    out.append(".entry" in ptx)
print("JSON" + json.dumps(out))
"""


def test_generic_kernels_compile_for_a_gpu():
    """The factories' kernels (tuple arguments, closures over functors and readers) are code
    numba-cuda's real compiler accepts, not only the simulator."""
    proc = compile_off_simulator(PTX)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line and all(eval(line[-1][4:].replace("true", "True"))), proc.stderr[-3000:]


def test_bench_runs_in_the_simulator_with_every_policy(tmp_path):
    """``python -m course bench algorithms``: saxpy two ways, the norm three ways, and the
    norm on one CPU core, all cores and numpy (real timings on any machine)."""
    from course.bench import run

    text = run(["algorithms"], tmp_path)[0].read_text()
    for row in (
        "saxpy_fast",
        "saxpy_slow",
        "norm: transform_reduce",
        "norm: reduce(transform_iterator)",
        "policy cpu",
        "policy parallel",
        "numpy.linalg.norm",
    ):
        assert row in text, row


def test_reduce_into_a_device_array_and_cached_functors():
    """``out=``: the result stays on the GPU (no wait), the way the bench times the fused
    norm beside CuPy and PyTorch; the saxpy functor compiles once per ``a``."""
    d, out = cuda.to_device(X), cuda.device_array(1, np.float32)
    assert A.reduce(A.maximum, d, np.float32(-np.inf), out=out) is out
    assert out.copy_to_host()[0] == X.max()
    A.norm(d, out=out)
    assert abs(out.copy_to_host()[0] - A.reference_norm(X)) < 1e-5 * A.reference_norm(X)
    with pytest.raises(ValueError, match="one-element device array of float32"):
        A.reduce(A.plus, d, np.float32(0), out=cuda.device_array(2, np.float32))
    assert A.saxpy_functor(2.0) is A.saxpy_functor(2.0)
