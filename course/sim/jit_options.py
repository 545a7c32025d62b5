"""``@cuda.jit`` options a real GPU takes and numba's simulator refuses.

``@cuda.jit(lineinfo=True, max_registers=32)`` is an honest kernel for a GPU (a line table
for the profiler, a register cap for occupancy), but the simulator's ``jit`` raises
``TypeError`` on both: a laptop would reject a kernel the class GPU accepts.  In simulator
mode :func:`install` wraps ``numba.cuda.jit`` so that those options are accepted and
ignored (there are no registers or line tables in the simulator); the compile gate still
compiles the kernel with them for a real GPU.
"""

from __future__ import annotations

import functools

GPU_ONLY = ("lineinfo", "max_registers", "launch_bounds", "forceinline", "lto")


def install() -> None:
    """Make the simulator's ``cuda.jit`` take (and ignore) :data:`GPU_ONLY` options."""
    from numba import cuda

    original = cuda.jit
    if getattr(original, "course_ignores", None) == GPU_ONLY:
        return

    @functools.wraps(original)
    def jit(*args, **options):
        for name in GPU_ONLY:
            options.pop(name, None)
        return original(*args, **options)

    jit.course_ignores = GPU_ONLY
    cuda.jit = jit
