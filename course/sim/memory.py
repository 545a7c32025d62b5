"""What a simulated thread finds in memory it did not write: poison, as a GPU gives garbage.

numba's simulator makes a ``cuda.local.array`` with ``np.empty``, and numpy hands a freed
buffer of the same size straight back: the next simulated thread's local array then holds
the last thread's values, so a kernel that reads its local array before writing it could
pass values from thread to thread (a running total with no atomic, no shared memory, no
barrier - and wrong on a GPU, where each thread's local memory starts as garbage).  Shared
arrays are kept for a whole launch, so a block could likewise read what the block before it
left.  :func:`install` (``import course``, simulator mode) makes every local array start
poisoned, and the scheduler (``scheduler.py``) poisons a launch's shared arrays before each
block runs: NaN for floats, the largest value for integers, True for booleans.  A kernel
that reads what it never wrote then computes with poison, and its check fails.
"""

from __future__ import annotations

import numpy as np

_installed = False


def poison(dtype) -> object:
    """The value unwritten memory of ``dtype`` holds here."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    if dtype.kind == "b":
        return True
    return 0


def poison_shared(module) -> None:
    """Poison every shared array of the launch whose fake ``cuda`` module is ``module``
    (a block is about to run)."""
    shared = getattr(module, "_shared", None)
    if shared is None:
        return
    for arr in getattr(shared, "_allocations", {}).values():
        if isinstance(arr, np.ndarray):
            arr.fill(poison(arr.dtype))
    dyn = getattr(shared, "_dynshared", None)
    if isinstance(dyn, np.ndarray):
        dyn.fill(-1)  # all bits set: NaN for floats, -1 for integers


def install() -> None:
    """Poisoned local arrays (idempotent; simulator only)."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernelapi

    make = kernelapi.FakeCUDALocal.array  # numba's: np.empty

    def array(self, shape, dtype, alignment=None):
        arr = make(self, shape, dtype, alignment)
        arr.fill(poison(arr.dtype))
        return arr

    kernelapi.FakeCUDALocal.array = array
    _installed = True
