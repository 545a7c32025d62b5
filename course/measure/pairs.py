"""Two float32 values in one 64-bit word: half the load instructions for the same bytes.

numba emits one load instruction per scalar element.  Shared memory serves one load
instruction per clock (at most 128 bytes), so a kernel that loads single floats from it can
run out of load slots long before it runs out of FMA units.  Packing two float32 values
into a float64 slot makes every ``ld.shared.f64`` bring two of them; on the GPU packing and
unpacking are register moves (libdevice ``hiloint2double`` / ``double2loint``), no
arithmetic.  The simulator has no libdevice, so there the same helpers reinterpret the bits
with numpy.  Used by the flash-attention kernel (lesson 08) and the flat centering kernel
(lesson 06), which reads a float32 array through a float64 view.
"""

from __future__ import annotations

import struct as _struct

import numpy as np
from numba import cuda

from ..platform import runtime

if runtime.MODE == "gpu":
    from numba.cuda import libdevice as _ld

    @cuda.jit(device=True, inline=True)
    def pack2(lo, hi):
        """A float64 whose low 32 bits are float32 ``lo`` and high 32 bits ``hi``."""
        return _ld.hiloint2double(_ld.float_as_int(hi), _ld.float_as_int(lo))

    @cuda.jit(device=True, inline=True)
    def unpack2(x):
        """(lo, hi): the two float32 values packed in float64 ``x``."""
        return _ld.int_as_float(_ld.double2loint(x)), _ld.int_as_float(_ld.double2hiint(x))

else:
    # Plain Python in the simulator: kernels there are Python code and may call any function.
    # (A cuda.jit device function would also work, but every call to one takes a global
    # lock in the simulator, and 256 threads calling it in an inner loop crawl.)
    def pack2(lo, hi):
        """A float64 whose low 32 bits are float32 ``lo`` and high 32 bits ``hi``."""
        return _struct.unpack("<d", _struct.pack("<ff", lo, hi))[0]

    def unpack2(x):
        """(lo, hi): the two float32 values packed in float64 ``x``."""
        lo, hi = _struct.unpack("<ff", _struct.pack("<d", x))
        return np.float32(lo), np.float32(hi)
