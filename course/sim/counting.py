"""Counting reads in the simulator: arrays and shared memory that count the elements kernels
read, and a way to run such a count from a process that drives a GPU.

A GPU cannot count element reads; the simulator runs kernels as Python, so a numpy array
that adds to a counter in ``__getitem__`` sees every read.  Lessons 03 (window average: v1's
global reads vs v2's shared reads) and 04 (matmul: the tiles' reads) count with these.
"""

from __future__ import annotations

import threading

import numpy as np

_LOCK = threading.Lock()


class CountingArray(np.ndarray):
    """A numpy array that counts how many elements kernels read from it (thread-safe)."""

    def __array_finalize__(self, obj):
        self.reads = getattr(obj, "reads", None)

    def __getitem__(self, idx):
        out = super().__getitem__(idx)
        if self.reads is not None:
            with _LOCK:
                self.reads[0] += np.size(out)
        return out


def counting(a, reads: list | None = None):
    """A simulator device array over a copy of ``a``; element reads are added to ``reads[0]``."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    host = np.array(a).view(CountingArray)
    host.reads = reads if reads is not None else [0]
    dev = FakeCUDAArray(host)
    dev.reads = host.reads
    return dev


class counting_shared:
    """Context manager: static shared arrays made inside it count their element reads."""

    def __init__(self):
        self.reads = [0]

    def __enter__(self):
        import sys
        import traceback

        from numba.cuda.simulator.kernelapi import FakeCUDAShared
        from numba.np import numpy_support

        self._cls, self._orig = FakeCUDAShared, FakeCUDAShared.array
        reads = self.reads

        def array(shared, shape, dtype, alignment=None):
            if shape == 0:
                return self._orig(shared, shape, dtype, alignment)
            caller = traceback.extract_stack(sys._getframe())[-2][0:2]  # one array per line
            allocs = shared.__dict__.setdefault("_counted", {})
            if caller not in allocs:
                dt = numpy_support.as_dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
                allocs[caller] = np.empty(shape, dt).view(CountingArray)
                allocs[caller].reads = reads
            return allocs[caller]

        FakeCUDAShared.array = array
        return self

    def __exit__(self, *exc):
        self._cls.array = self._orig
        return False


def in_simulator(module: str, func: str, **kwargs):
    """``module.func(**kwargs)`` (JSON in and out) here in the simulator, or in a
    simulator subprocess when this process drives a GPU (counting needs the simulator)."""
    import importlib
    import json
    import os
    import subprocess
    import sys

    from ..platform import runtime

    if runtime.MODE == "sim":
        return getattr(importlib.import_module(module), func)(**kwargs)
    from ..platform.resources import IMPORT_ROOT

    root = str(IMPORT_ROOT)
    env = dict(
        os.environ,
        NUMBA_ENABLE_CUDASIM="1",
        PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    script = (
        f"import course, importlib, json\n"
        f"r = getattr(importlib.import_module({module!r}), {func!r})(**{kwargs!r})\n"
        f"print('JSON' + json.dumps(r))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("JSON")]
    if not lines:
        raise RuntimeError(f"simulator subprocess failed:\n{proc.stderr[-2000:]}")
    return json.loads(lines[-1][4:])
