"""Lesson 09 exercise: ``histogram_shared``, a multi-channel histogram with privatized
shared-memory histograms and a 2-D grid that the student chooses through two constants.

The student's module defines (defaults when absent: 4 and 64)::

    CHANNELS_PER_BLOCK = 4     # channels one block counts
    ROWS_PER_BLOCK = 64        # rows one block counts

and ``@cuda.jit def histogram(data, hist)``.  The spec zeroes ``hist`` (int32, (channels, 256))
before each launch and launches grid (ceil(channels / CHANNELS_PER_BLOCK),
ceil(length / ROWS_PER_BLOCK)) with 1-D blocks of 64 or 128 threads (two sizes, so a
hard-coded blockDim shows).  Several blocks add into the same hist row: use atomics there.
"""

from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from ..platform import runtime
from . import EXACT, Case, Exercise, prime_near, sim

DEFAULTS = {"CHANNELS_PER_BLOCK": 4, "ROWS_PER_BLOCK": 64}
SHARED_POISON = 12345  # what the spec leaves in simulated shared memory (see _dirty_shared)


def launch_constants(kernel) -> dict:
    """CHANNELS_PER_BLOCK and ROWS_PER_BLOCK as the student's module defines them."""
    g = getattr(getattr(kernel, "py_func", None), "__globals__", {})
    out = {k: g.get(k, v) for k, v in DEFAULTS.items()}
    for k, v in out.items():
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{k} must be a positive int; got {v!r}")
    return out


def skewed_uint8(rng, shape) -> np.ndarray:
    """Random bytes, most of them in 3 bins (so atomic collisions really happen)."""
    a = rng.integers(0, 256, size=shape, dtype=np.uint8)
    hot = rng.random(shape) < 0.8
    a[hot] = rng.choice(np.array([3, 4, 250], np.uint8), size=int(hot.sum()))
    return a


class HistogramShared(Exercise):
    """hist[c, v] = number of rows r with data[r, c] == v, counted in shared memory."""

    launch_names = tuple(DEFAULTS)

    def cases(self):
        # Simulator sizes: its time grows with blocks x threads (every block zeroes and
        # flushes 1,024 shared bins), so blocks of 32 and 64 threads and few blocks, still
        # with partial row and channel blocks, a prime length and three distributions.
        big = (prime_near(200), 9) if sim() else ((1 << 18) + 13, 67)
        t1, t2 = (32, 64) if sim() else (64, 128)
        shapes = [
            ((1, 1), t2, "uniform"),
            ((63, 3), t2, "uniform"),
            ((65, 5), t1, "skewed"),
            ((prime_near(128), 6), t2, "skewed"),
            ((67 if sim() else 97, 5 if sim() else 13), t1, "constant"),
            (big, t1, "skewed"),
        ]
        return [
            Case(
                f"length x channels = {n} x {c}, {dist}",
                {"length": n, "channels": c, "dist": dist},
                ("ceil(channels / CHANNELS_PER_BLOCK)", "ceil(length / ROWS_PER_BLOCK)"),
                (tpb,),
                repeats=2 if i in (3, 5) else 1,
            )
            for i, ((n, c), tpb, dist) in enumerate(shapes)
        ]

    def make_inputs(self, case, rng):
        shape = (case.params["length"], case.params["channels"])
        dist = case.params["dist"]
        if dist == "uniform":
            data = rng.integers(0, 256, size=shape, dtype=np.uint8)
        elif dist == "skewed":
            data = skewed_uint8(rng, shape)
        else:
            data = np.broadcast_to(
                rng.integers(1, 256, size=shape[1], dtype=np.uint8), shape
            ).copy()
        return {"data": data}

    def outputs(self, case):
        return {"hist": ((case.params["channels"], 256), np.int32)}

    def reference(self, case, inputs):
        data = inputs["data"]
        return {
            "hist": np.stack(
                [np.bincount(data[:, c], minlength=256) for c in range(data.shape[1])]
            ).astype(np.int32)
        }

    def tolerance(self, case, name):
        return EXACT

    def prepare(self, case, args):
        args["hist"][:] = 0  # the spec zeroes the histogram; the kernel only adds to it

    def launch(self, kernel, case, args):
        k = launch_constants(kernel)
        n, c = case.params["length"], case.params["channels"]
        grid = (math.ceil(c / k["CHANNELS_PER_BLOCK"]), math.ceil(n / k["ROWS_PER_BLOCK"]))
        with _dirty_shared():
            kernel[grid, case.block](args["data"], args["hist"])


@contextlib.contextmanager
def _dirty_shared():
    """In the simulator, fill each new shared array with SHARED_POISON: on a GPU shared
    memory holds leftovers, while numpy often hands the simulator zeros, which would hide a
    kernel that forgets to zero its shared histogram."""
    if runtime.MODE == "gpu":
        yield
        return
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.array
    lock = threading.Lock()  # threads of a block share the array: poison it before any uses it

    def array(self, shape, dtype, alignment=None):
        with lock:
            before = len(self._allocations)
            a = original(self, shape, dtype, alignment)
            if shape != 0 and len(self._allocations) > before:
                a.fill(SHARED_POISON)
            return a

    kernelapi.FakeCUDAShared.array = array
    try:
        yield
    finally:
        kernelapi.FakeCUDAShared.array = original


class HistogramTiles(HistogramShared):
    """histogram_shared's cases on a fixed grid of tiles of 4 channels x ROWS rows: the
    kernel derives its tile from the grid (``ceil(shape / gridDim)``), so a tune target
    can ask for big tiles whatever constants the notebook defined."""

    CHANNELS, ROWS = 4, (128 if sim() else 1024)

    def launch(self, kernel, case, args):
        n, c = case.params["length"], case.params["channels"]
        grid = (math.ceil(c / self.CHANNELS), math.ceil(n / self.ROWS))
        with _dirty_shared():
            kernel[grid, case.block](args["data"], args["hist"])


EXERCISES = [
    HistogramShared(
        "histogram_shared",
        "09_histogram",
        "@cuda.jit def histogram(data, hist)",
        "count hist[c, v] += #rows with data[r, c] == v for the block's tile of "
        "CHANNELS_PER_BLOCK channels x ROWS_PER_BLOCK rows, in a shared-memory histogram "
        "that is zeroed, filled with atomics, and added to hist after a syncthreads",
        hints={
            "wrong": "Zero the shared histogram, syncthreads, count with cuda.atomic.add, "
            "syncthreads again, then add each count to hist with cuda.atomic.add; "
            "clip the last block's rows and channels to the array."
        },
    ),
    HistogramShared(
        "debug_histogram_sign",
        "09_histogram",
        "@cuda.jit def histogram_fixed(data, hist)",
        "fix the given privatized histogram so that values 128..255 are counted in their own bins",
        hints={"wrong": "what does int8(200) give?"},
        kind="debug",
    ),
]
