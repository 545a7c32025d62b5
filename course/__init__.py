"""GPU programming in Python with numba.cuda: the package the course notebooks import.

``import course`` must come first in a notebook.  It has four side effects:

1. it decides whether kernels run on a real NVIDIA GPU (``course.MODE == "gpu"``) or in
   numba's CPU simulator (``course.MODE == "sim"``), setting ``NUMBA_ENABLE_CUDASIM=1``
   for the simulator unless the user set it;
2. it hides the two numba performance warnings that are noise at teaching sizes
   (``platform.runtime.silence_known_noise``);
3. in the simulator only, it adds what the simulator lacks: warp intrinsics
   (``sim.warp``), a block scheduler that yields to working threads (``sim.scheduler``)
   and the GPU's ``@cuda.jit`` options (``sim.jit_options``);
4. in a notebook (IPython), a stopped cell ends in one course sentence instead of a
   traceback through numba's simulator (``platform.interrupt``).

The subpackages and which may import which: ``tests/test_layout.py`` (the one place
that says); each subpackage's docstring says what it holds.

Everything else is imported on first use::

    course.check("vector_add", add)      # auto-graded check -> CheckResult
    course.progress()                    # which checks passed, in which mode, when
    course.submit("tune_vector_add", add_fast)   # the class leaderboard (GPU time, rank)
    course.benchmark(fn)                 # timing (CUDA events on a GPU)
    course.profile(kernel[grid, block], *args)   # Nsight Compute / the simulator's tracer
    course.size(lecture=1 << 20, sim=2000)
"""

from .platform import interrupt as _interrupt
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

_interrupt.install()  # Stop: one sentence (what ran, that it stopped, the kernel is usable)

size = _runtime.size
banner = _runtime.banner

_LAZY = {
    "check": ("course.grading", "check"),
    "progress": ("course.grading", "progress"),
    "benchmark": ("course.measure.timing", "benchmark"),
    "device_info": ("course.platform.runtime", "device_info"),
    "profile": ("course.hardware.profiler", "profile"),
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
