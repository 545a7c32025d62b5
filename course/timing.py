"""One timing helper for every lesson: :func:`benchmark`.

On a GPU it records CUDA events around each call (after warm-up calls that absorb the
first-call compile, ~1 s), so it measures device time of everything ``fn`` enqueues.
In the simulator it takes CPU wall time and marks the result ``simulated``: such a number
says how long the CPU took to *imitate* the kernel, never how fast a GPU would be.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from . import runtime


@dataclass
class Timing:
    """Times of repeated runs of one callable, in milliseconds."""

    times_ms: list[float]
    label: str = ""
    mode: str = field(default_factory=lambda: runtime.MODE)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)

    @property
    def simulated(self) -> bool:
        return self.mode != "gpu"

    def gbps(self, nbytes: float) -> float:
        """Effective bandwidth in GB/s (1e9 bytes/s) for ``nbytes`` moved per call."""
        return nbytes / (self.median_ms * 1e-3) / 1e9

    def gflops(self, flops: float) -> float:
        """Arithmetic rate in GFLOP/s for ``flops`` per call."""
        return flops / (self.median_ms * 1e-3) / 1e9

    def __repr__(self) -> str:
        where = "simulator wall time, not GPU speed" if self.simulated else "GPU, CUDA events"
        name = f"{self.label}: " if self.label else ""
        return (f"{name}{self.median_ms:.4g} ms median (min {self.min_ms:.4g}, "
                f"max {self.max_ms:.4g}, n={len(self.times_ms)}; {where})")


def benchmark(fn, *args, repeat: int | None = None, warmup: int | None = None,
              rotate: list[tuple] | None = None, label: str = "") -> Timing:
    """Time ``fn(*args)`` and return a :class:`Timing` (ms).

    ``fn`` should only enqueue device work (launch kernels on device arrays); copies to
    and from the host inside ``fn`` are timed too.  ``rotate``: a list of argument tuples
    used in turn, so that repeated runs do not all hit a warm cache.
    Defaults: 3 warm-up + 20 timed runs on a GPU; 1 + 3 in the simulator.
    """
    from numba import cuda

    if repeat is None:
        repeat = 20 if runtime.MODE == "gpu" else 3
    if warmup is None:
        warmup = 3 if runtime.MODE == "gpu" else 1
    if repeat < 1 or warmup < 0:
        raise ValueError(f"repeat must be >= 1 and warmup >= 0 (got {repeat}, {warmup})")
    arg_sets = rotate if rotate else [args]

    for i in range(warmup):
        fn(*arg_sets[i % len(arg_sets)])
    cuda.synchronize()

    times = []
    if runtime.MODE == "gpu":
        for i in range(repeat):
            start, stop = cuda.event(), cuda.event()
            start.record()
            fn(*arg_sets[i % len(arg_sets)])
            stop.record()
            stop.synchronize()
            times.append(cuda.event_elapsed_time(start, stop))
    else:
        for i in range(repeat):
            t0 = time.perf_counter()
            fn(*arg_sets[i % len(arg_sets)])
            cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    return Timing(times, label=label)
