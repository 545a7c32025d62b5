"""Lesson 12 benchmark: saxpy two ways and the norm three ways, beside CuPy and PyTorch
(GPU: 2^26 float32), and the norm under each execution policy (GPU, one CPU core, all CPU
cores, numpy) - the last part runs for real on a laptop too."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..kernels import algorithms as A
from ..measure.timing import Timing, benchmark
from ..platform import runtime

TITLE = "12 Thrust's algorithms (CSE P 524 Lecture 9)"


def run(report) -> None:
    lecture = runtime.profile() == "lecture"
    n = 1 << 26 if lecture else 3_001
    size = "N=2^26" if lecture else f"N={n}"
    rng = np.random.default_rng(12)
    x_h = rng.uniform(-1, 1, n).astype(np.float32)
    x, y = cuda.to_device(x_h), cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32))
    a = 2.0
    report.add(
        "saxpy_fast (one transform)",
        benchmark(lambda: A.saxpy_fast(a, x, y)),
        nbytes=12 * n,
        flops=2 * n,
        size=size,
        note="12 bytes an element",
    )
    t = cuda.device_array_like(x)  # the temporary, made once (as CuPy's below)
    report.add(
        "saxpy_slow (fill, multiply, add)",
        benchmark(lambda: A.saxpy_slow(a, x, y, t)),
        nbytes=28 * n,
        flops=2 * n,
        size=size,
        note="28 bytes an element: a temporary written once, read once, ...",
    )
    report.add_peer("torch", "torch y.add_(x, alpha=a)", _torch_saxpy(n), nbytes=12 * n, size=size)
    report.add_peer(
        "cupy", "cupy saxpy_slow (3 passes)", _cupy_saxpy_slow(n), nbytes=28 * n, size=size
    )

    temp, out = cuda.device_array_like(x), cuda.device_array(1, np.float32)
    report.add(
        "norm: transform, then reduce",
        benchmark(lambda: _norm_two_pass(x, temp, out)),
        nbytes=12 * n,
        size=size,
        note="x -> temp -> sum: 12 bytes an element",
    )
    report.add(
        "norm: transform_reduce",
        benchmark(lambda: A.norm(x, out=out)),
        nbytes=4 * n,
        size=size,
        note="one pass, 4 bytes an element; the norm stays on the GPU (out=)",
    )
    report.add(
        "norm: reduce(transform_iterator)",
        benchmark(
            lambda: A.reduce(A.plus, A.transform_iterator(x, A.squared), np.float32(0), out=out)
        ),
        nbytes=4 * n,
        size=size,
        note="the same kernel, built from an iterator",
    )
    report.add(
        "norm: transform_reduce -> host value",
        benchmark(lambda: A.norm(x)),
        nbytes=4 * n,
        size=size,
        note="as thrust::reduce: the value comes back, so every call waits for the GPU "
        "and the host's launch time between calls counts",
    )
    report.add_peer("cupy", "cupy.linalg.norm", _cupy(n, "linalg"), nbytes=4 * n, size=size)
    report.add_peer(
        "cupy", "cupy ReductionKernel (fused)", _cupy(n, "fused"), nbytes=4 * n, size=size
    )
    report.add_peer("torch", "torch.linalg.vector_norm", _torch_norm(n), nbytes=4 * n, size=size)

    # execution policies: the same functors on the CPU (numba.njit), and numpy
    for policy, label in (("cpu", "one core (njit)"), ("parallel", "all cores (njit parallel)")):
        A.norm(x_h[:1000], policy=policy)  # compile outside the timing
        report.add(
            f"norm, policy {policy}: {label}",
            Timing(_wall(lambda p=policy: A.norm(x_h, policy=p))),
            size=size,
            kind="cpu",
            note=f"wall time, host memory: {4 * n / 1e6:.0f} MB read",
        )
    report.add(
        "norm: numpy.linalg.norm",
        Timing(_wall(lambda: np.linalg.norm(x_h))),
        size=size,
        kind="cpu",
        note=f"wall time, host memory: {4 * n / 1e6:.0f} MB read",
    )
    report.note(
        "bytes per element: saxpy_fast reads x and y and writes y (12); saxpy_slow "
        "adds a temporary that is filled (4), read and written by the multiply (12) "
        "and read by the add (12 with x and y): 28. The norm reads x once (4) when "
        "the square is fused into the sum; 12 through a temporary."
    )
    report.note(
        "cpu rows: wall time of the host call on this machine's CPU, for the "
        "execution-policy comparison; not comparable to the GPU's device time."
    )


def _wall(fn, repeat: int = 5) -> list[float]:
    import time

    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _norm_two_pass(x, temp, out):
    A.transform(A.squared, x, out=temp)
    A.reduce(A.plus, temp, np.float32(0), out=out)
    return A.transform(A.square_root, out, out=out)


def _torch_saxpy(n):
    def fn():
        import torch

        if not hasattr(fn, "x"):
            fn.x, fn.y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        fn.y.add_(fn.x, alpha=2.0)

    return fn


def _cupy_saxpy_slow(n):
    def fn():
        import cupy

        if not hasattr(fn, "x"):
            fn.x = cupy.random.random(n, dtype=cupy.float32)
            fn.y = cupy.random.random(n, dtype=cupy.float32)
            fn.t = cupy.empty(n, dtype=cupy.float32)
        fn.t.fill(2.0)
        cupy.multiply(fn.t, fn.x, out=fn.t)
        cupy.add(fn.t, fn.y, out=fn.y)

    return fn


def _cupy(n, how):
    def fn():
        import cupy

        if not hasattr(fn, "x"):
            fn.x = cupy.random.random(n, dtype=cupy.float32)
            fn.k = cupy.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "norm2")
        return cupy.linalg.norm(fn.x) if how == "linalg" else fn.k(fn.x)

    return fn


def _torch_norm(n):
    def fn():
        import torch

        if not hasattr(fn, "x"):
            fn.x = torch.rand(n, device="cuda")
        return torch.linalg.vector_norm(fn.x)

    return fn
