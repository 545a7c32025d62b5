"""GPU programming in Python with numba.cuda: the package the course notebooks import.

``import course`` must come first in a notebook: it decides, before numba loads, whether
kernels run on a real NVIDIA GPU (``course.MODE == "gpu"``) or in numba's CPU simulator
(``course.MODE == "sim"``).  That is its only side effect.

Everything else is imported on first use::

    course.check("vector_add", add)      # auto-graded check -> CheckResult
    course.progress()                    # which checks passed, in which mode, when
    course.benchmark(fn)                 # timing (CUDA events on a GPU)
    course.profile(kernel[grid, block], *args)   # Nsight Compute / the simulator's tracer
    course.size(lecture=1 << 20, sim=2000)
"""
from . import runtime as _runtime

MODE = _runtime.select_mode()
_runtime.silence_known_noise()
if MODE == "sim":
    from . import simwarp as _simwarp

    _simwarp.install()  # warp shuffles & co. for the simulator, which lacks them

size = _runtime.size
banner = _runtime.banner

_LAZY = {
    "check": ("course.grading", "check"),
    "progress": ("course.grading", "progress"),
    "benchmark": ("course.timing", "benchmark"),
    "device_info": ("course.runtime", "device_info"),
    "profile": ("course.profiling", "profile"),
}

__all__ = ["MODE", "size", "banner", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'course' has no attribute {name!r}")
