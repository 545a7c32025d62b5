"""The arrays a kernel sees under course.sim.trace: every element access is recorded.

``course.sim.trace`` hands the kernel a :class:`Traced` for each array argument and each
``cuda.shared.array``.  Indexing it records the access as a byte offset from the start of
the allocation, computed from the view's own data address and strides, so an access through
a *derived* array lands on the address it really touches: a slice (``x[8:]``, ``A[i, :]``),
``.T``, ``.real``, ``.transpose()``, ``.swapaxes()``, ``.reshape()``, ``.ravel()``,
``.squeeze()``, ``.diagonal()``, ``.view(same-size dtype)`` and ``.flat[k]`` all return traced
arrays over the same allocation, and coalescing, sector and bank counts stay right.

What cannot be mapped back to the allocation raises :class:`TraceBypass` inside the kernel,
which fails the launch (and so the measurement) with a sentence that names the array: a
copy (``.copy()``, ``.astype()``, ``.flatten()``, ``.imag`` of a real array, a reshape that
copies, fancy indexing), a view that reinterprets the items at another size, a whole-array
method that reads elements the tracer does not see (``.sum()``, ``.max()``, ``.item()``, ...)
and ``np.asarray(x)`` (or any numpy function that converts ``x`` to a plain array).  Only
the metadata (``shape``, ``size``, ``ndim``, ``dtype``, ``strides``, ``itemsize``,
``nbytes``, ``flags``) passes through untouched.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from .trace_analysis import READ, WRITE

META = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes", "flags"})
VIEW_ATTRS = frozenset({"T", "real", "imag"})
VIEW_METHODS = frozenset(
    {"transpose", "reshape", "ravel", "view", "swapaxes", "squeeze", "diagonal"}
)


class TraceBypass(RuntimeError):
    """A kernel reached an array's memory by a way the tracer cannot count."""


def _in_kernel() -> bool:
    return hasattr(threading.current_thread(), "blockIdx")


class Traced:
    """Stands in for an array inside the traced kernel and records each element access."""

    __slots__ = ("_a", "_info", "_rec", "_base", "_start")

    def __init__(self, arr, info, recorder, base):
        # base: data address of this allocation (each block has its own shared arrays, so
        # offsets are taken from the block's allocation, not from the first block's)
        self._a, self._info, self._rec, self._base = arr, info, recorder, base
        self._start = arr.__array_interface__["data"][0] - base

    # -- addresses ----------------------------------------------------------------------
    def offset(self, idx):
        """Byte offset from the allocation's start of the element at the full integer index
        ``idx``; None when ``idx`` is not one (a slice, a partial or fancy index)."""
        a = self._a
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != a.ndim:
            return None
        off = self._start
        for i, s, n in zip(idx, a.strides, a.shape):
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
                return None
            i = int(i)
            off += (i + n if i < 0 else i) * s
        return off

    def record(self, idx, kind, frame):
        """Record one access of the element at full integer index ``idx``."""
        off = self.offset(idx)
        if off is None:
            raise TraceBypass(self.bypass(f"the index {idx!r}"))
        self._rec.access(self._info, off, kind, frame)

    def record_all(self, kind, frame):
        """Record an access of every element of this (derived) array, in C order."""
        for idx in np.ndindex(*self._a.shape):
            self._rec.access(self._info, self.offset(idx), kind, frame)

    def bypass(self, how: str) -> str:
        name = self._info.name
        what = (
            f"{name} directly ({name}[i], or a slice of it)"
            if name.isidentifier()
            else f"the {name} array directly"
        )
        return f"the kernel reads {name} through {how}, which the tracer cannot count; index {what}"

    def derived(self, arr, how: str) -> Traced:
        """``arr``, made from this array, as a traced array over the same allocation."""
        if not isinstance(arr, np.ndarray):
            raise TraceBypass(self.bypass(how))
        if arr.dtype.itemsize != self._info.itemsize:
            raise TraceBypass(
                self.bypass(
                    f"{how} (items of {arr.dtype.itemsize} bytes, not {self._info.itemsize})"
                )
            )
        if arr.size and not np.may_share_memory(arr, self._a):
            raise TraceBypass(self.bypass(f"{how} (a copy, not a view)"))
        return Traced(arr, self._info, self._rec, self._base)

    # -- the array interface -------------------------------------------------------------
    def __getitem__(self, idx):
        val = self._a[idx]
        if isinstance(val, np.ndarray):
            return self.derived(val, f"the index {idx!r}")
        self.record(idx, READ, sys._getframe(1))
        return val

    def __setitem__(self, idx, val):
        off = self.offset(idx)
        if off is not None:
            self._a[idx] = val
            self._rec.access(self._info, off, WRITE, sys._getframe(1))
            return
        target = self.derived(self._a[idx], f"the index {idx!r}")  # a slice: every element
        self._a[idx] = val
        target.record_all(WRITE, sys._getframe(1))

    def __len__(self):
        return len(self._a)

    def __getattr__(self, name):
        if name in META:
            return getattr(self._a, name)
        if name in VIEW_ATTRS:
            return self.derived(getattr(self._a, name), f".{name}")
        if name in VIEW_METHODS:
            method = getattr(self._a, name)
            return lambda *args, **kw: self.derived(method(*args, **kw), f".{name}()")
        if name == "flat":
            return Flat(self)
        if name.startswith("__"):  # numpy's probes (__array_interface__, ...): not here
            raise AttributeError(name)
        raise TraceBypass(self.bypass(f".{name}"))

    def __array__(self, dtype=None, copy=None):
        if _in_kernel():
            raise TraceBypass(self.bypass("np.asarray (or a numpy function of the whole array)"))
        return np.asarray(self._a, dtype=dtype)


class Flat:
    """``x.flat`` under the tracer: element k (C order) is recorded at its real address."""

    __slots__ = ("_t",)

    def __init__(self, traced):
        self._t = traced

    def __len__(self):
        return self._t._a.size

    def _index(self, k):
        a = self._t._a
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise TraceBypass(self._t.bypass(f".flat[{k!r}]"))
        k = int(k) + (a.size if k < 0 else 0)
        if not 0 <= k < a.size:
            raise IndexError(f"index {k} is out of bounds for .flat of size {a.size}")
        return tuple(int(i) for i in np.unravel_index(k, a.shape))

    def __getitem__(self, k):
        idx = self._index(k)
        self._t.record(idx, READ, sys._getframe(1))
        return self._t._a[idx]

    def __setitem__(self, k, val):
        idx = self._index(k)
        self._t._a[idx] = val
        self._t.record(idx, WRITE, sys._getframe(1))
