"""Lesson 10 - reading a profile: the access-pattern kernel that the validation report and
the notebook profile (the lessons' own kernels are imported from their modules)."""
from __future__ import annotations

from numba import cuda


@cuda.jit
def copy_access(x, y, stride, offset):
    # Thread i copies x[stride * i + offset] to y[i]: stride 1 and offset 0 is the coalesced
    # copy; stride 2 or 32 spreads a warp's loads over 2x or 32x the sectors; offset 1
    # shifts them off the 128-byte line. x and y are global memory.
    i = cuda.grid(1)
    if i < y.size and stride * i + offset < x.size:
        y[i] = x[stride * i + offset]


PTX_SIGNATURES = {"copy_access": "void(float32[::1], float32[::1], int64, int64)"}
