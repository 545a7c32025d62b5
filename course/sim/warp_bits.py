"""Bit intrinsics for numba's CUDA simulator: ``cuda.popc``/``ffs``/``clz``/``brev`` as the GPU
computes them.

The simulator's own versions format the value as a binary string, which goes wrong for
negative numbers (a minus sign, no two's complement) and for 64-bit values; here a value is
first taken as the 32- or 64-bit pattern the GPU holds (numpy integers keep their own width; a
Python int is 32 bits if it fits, else 64). :func:`course.sim.warp.install` adds these to the
simulator's ``FakeCUDAModule`` (``self`` is that fake ``cuda`` module).
"""

from __future__ import annotations

import numpy as np


def _bits(val) -> tuple[int, int]:
    """(non-negative bit pattern, width) of an integer, as the GPU sees it."""
    width = (
        val.dtype.itemsize * 8
        if isinstance(val, np.integer)
        else (32 if -(1 << 31) <= int(val) < (1 << 32) else 64)
    )
    return int(val) & ((1 << width) - 1), width


def popc(self, val):
    """Number of set bits."""
    return bin(_bits(val)[0]).count("1")


def ffs(self, val):
    """Position (1-based) of the least significant set bit; 0 for 0."""
    v, _w = _bits(val)
    return (v & -v).bit_length()


def clz(self, val):
    """Number of leading zero bits in the 32- or 64-bit pattern."""
    v, w = _bits(val)
    return w - v.bit_length()


def brev(self, val):
    """The 32- or 64-bit pattern with its bits in reverse order."""
    v, w = _bits(val)
    return int(format(v, f"0{w}b")[::-1], 2)


METHODS = {f.__name__: f for f in (popc, ffs, clz, brev)}
