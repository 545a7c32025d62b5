"""The peers a user would reach for instead of a numba kernel: CuPy and PyTorch.

Each builder makes its inputs on the GPU once and returns a callable with no argument that
runs the library's operation, ready for ``perf.time_peer`` or ``timing.benchmark``; the
benchmark reports (``course/bench``) and the notebooks time the same callables.
``perf.peer(name)`` says whether a library is importable and sees a GPU.

- ``cupy_sgemm(n)`` / ``torch_sgemm(n)``: an N x N float32 matrix product (cuBLAS SGEMM,
  TF32 off, so it is the same arithmetic as the course's kernels); a no-op when the
  library is missing.
- ``cupy_sum(cp, n, dtype)`` / ``torch_sum(torch, n, dtype)``: the sum of ``n`` random
  int32 (``dtype`` np.int32) or float32 values, given the library module.
"""

from __future__ import annotations

import os

import numpy as np

from . import perf


def cupy_sgemm(n: int):
    """``a @ b`` of two N x N float32 CuPy arrays (TF32 off); a no-op without CuPy."""
    cp = perf.peer("cupy")
    if cp is None:
        return lambda: None
    a = cp.random.uniform(-1, 1, (n, n), dtype=cp.float32)
    b = cp.random.uniform(-1, 1, (n, n), dtype=cp.float32)
    # CuPy uses TF32 only when CUPY_TF32=1; make sure it is off for an SGEMM comparison
    os.environ["CUPY_TF32"] = "0"
    return lambda: a @ b


def torch_sgemm(n: int):
    """``a @ b`` of two N x N float32 PyTorch tensors (TF32 off); a no-op without PyTorch."""
    torch = perf.peer("torch")
    if torch is None:
        return lambda: None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a = torch.rand((n, n), device="cuda", dtype=torch.float32)
    b = torch.rand((n, n), device="cuda", dtype=torch.float32)
    return lambda: a @ b


def cupy_sum(cp, n: int, dtype):
    """``a.sum()`` of ``n`` random int32 in [-100, 100) or float32 in [0, 1) (CuPy ``cp``)."""
    a = (
        cp.random.randint(-100, 100, n).astype(dtype)
        if dtype == np.int32
        else cp.random.random(n, dtype=cp.float32)
    )
    return lambda: a.sum()


def torch_sum(torch, n: int, dtype):
    """``torch.sum(a)`` of ``n`` random int32 or float32 values (PyTorch ``torch``)."""
    a = (
        torch.randint(-100, 100, (n,), device="cuda", dtype=torch.int32)
        if dtype == np.int32
        else torch.rand(n, device="cuda", dtype=torch.float32)
    )
    return lambda: torch.sum(a)
