"""GPU programming in Python with numba.cuda: the package the course notebooks import.

``import course`` must come first in a notebook: it decides, before numba loads, whether
kernels run on a real NVIDIA GPU (``course.MODE == "gpu"``) or in numba's CPU simulator
(``course.MODE == "sim"``).  That is its only side effect.

The package is built in floors, each a subpackage that imports only from the floors below
it (``tests/test_layout.py`` checks): ``platform`` (mode, device, files) -> ``measure``
(timing, ceilings, tables) -> ``sim`` (the simulator's warp intrinsics and tracer) ->
``hardware`` (Nsight Compute, profiles, occupancy) -> ``kernels`` (one module per lesson) ->
``exercises`` (specs) -> ``grading`` (checks and grading) -> ``leaderboard`` (the class
service) -> ``show`` (plots, widgets, figures) -> ``bench`` (reports from a GPU).

Everything else is imported on first use::

    course.check("vector_add", add)      # auto-graded check -> CheckResult
    course.progress()                    # which checks passed, in which mode, when
    course.submit("tune_vector_add", add_fast)   # the class leaderboard (GPU time, rank)
    course.benchmark(fn)                 # timing (CUDA events on a GPU)
    course.profile(kernel[grid, block], *args)   # Nsight Compute / the simulator's tracer
    course.size(lecture=1 << 20, sim=2000)
"""
from .platform import runtime as _runtime

MODE = _runtime.select_mode()
_runtime.silence_known_noise()
if MODE == "sim":
    from .sim import jit_options as _simjit
    from .sim import scheduler as _simscheduler
    from .sim import warp as _simwarp

    _simwarp.install()  # warp shuffles & co. for the simulator, which lacks them
    _simscheduler.install()  # its block scheduler, yielding the GIL to working threads
    _simjit.install()  # @cuda.jit(lineinfo=..., max_registers=...) as on a GPU

size = _runtime.size
banner = _runtime.banner

_LAZY = {
    "check": ("course.grading", "check"),
    "progress": ("course.grading", "progress"),
    "benchmark": ("course.measure.timing", "benchmark"),
    "device_info": ("course.platform.runtime", "device_info"),
    "profile": ("course.hardware.profiling", "profile"),
    "submit": ("course.leaderboard.client", "submit"),
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
