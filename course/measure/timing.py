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

from ..platform import runtime


@dataclass
class Timing:
    """Times of repeated runs of one callable, in milliseconds."""

    times_ms: list[float]
    label: str = ""
    mode: str = field(default_factory=lambda: runtime.MODE)
    batch: int = 1  # calls per pair of events (GPU; see benchmark)

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
        where = (
            "simulator wall time, not GPU speed"
            if self.simulated
            else f"GPU, CUDA events{f', batches of {self.batch}' if self.batch > 1 else ''}"
        )
        name = f"{self.label}: " if self.label else ""
        return (
            f"{name}{self.median_ms:.4g} ms median (min {self.min_ms:.4g}, "
            f"max {self.max_ms:.4g}, n={len(self.times_ms)}; {where})"
        )


HOLD_US = 2000  # the hold kernel's sleep: covers the host enqueueing a batch
BATCH_BELOW_MS = 5.0  # calls shorter than this are timed in batches of BATCH
BATCH = 10


def benchmark(
    fn,
    *args,
    repeat: int | None = None,
    warmup: int | None = None,
    rotate: list[tuple] | None = None,
    label: str = "",
    batch: int | None = None,
) -> Timing:
    """Time ``fn(*args)`` and return a :class:`Timing` (ms per call).

    ``fn`` should only enqueue device work (launch kernels on device arrays); copies to
    and from the host inside ``fn`` are timed too.  ``rotate``: a list of argument tuples
    used in turn, so that repeated runs do not all hit a warm cache.
    Defaults: 3 warm-up + 20 timed runs on a GPU; 0 + 1 in the simulator (it compiles
    nothing to warm up, and its wall time says how long the CPU imitated the kernel, not how
    fast a GPU is: one run says that as well as three).

    On a GPU, numba needs ~20 us of host time to launch a kernel, which would dominate a
    short kernel timed on its own (and adds 1-5% to a 1-2 ms one: the GPU idles from the
    start event until the launch arrives).  Calls shorter than 5 ms are therefore timed in
    batches of 10 queued behind a kernel that holds the GPU for 2 ms (so the events bracket device
    work only, as nvbench's blocking kernel does) - fewer than 10 when one call takes the host
    more than a tenth of the hold to enqueue (``_batching``); ``batch=1`` times single calls.
    """
    from numba import cuda

    if repeat is None:
        repeat = 20 if runtime.MODE == "gpu" else 1
    if warmup is None:
        warmup = 3 if runtime.MODE == "gpu" else 0
    if repeat < 1 or warmup < 0 or (batch is not None and batch < 1):
        raise ValueError(
            f"repeat and batch must be >= 1 and warmup >= 0 (got {repeat}, {batch}, {warmup})"
        )
    arg_sets = rotate if rotate else [args]

    for i in range(warmup):
        fn(*arg_sets[i % len(arg_sets)])
    cuda.synchronize()

    if runtime.MODE != "gpu":
        times = []
        for i in range(repeat):
            t0 = time.perf_counter()
            fn(*arg_sets[i % len(arg_sets)])
            cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return Timing(times, label=label)

    hold = batch is not None and batch > 1
    if batch is None:
        batch, hold = _batching(cuda, fn, arg_sets[0])
    times = [
        events_ms(cuda, fn, arg_sets[i % len(arg_sets)], batch, hold=hold) for i in range(repeat)
    ]
    t = Timing(times, label=label)
    t.batch = batch
    return t


def _batching(cuda, fn, args) -> tuple[int, bool]:
    """(batch, hold) for ``fn``: calls shorter than BATCH_BELOW_MS go behind the hold kernel,
    as many at a time as the host can enqueue while it holds the GPU (a call that launches
    several kernels can take the host longer than the GPU: 10 of them would outlast the
    hold, and the GPU would wait for the host); longer calls, or calls the hold cannot
    cover even once, are timed one at a time."""
    t0 = time.perf_counter()
    fn(*args)
    host_ms = (time.perf_counter() - t0) * 1e3
    cuda.synchronize()
    if events_ms(cuda, fn, args, 1, hold=False) >= BATCH_BELOW_MS:
        return 1, False
    fits = int(0.8 * (HOLD_US / 1000) / max(host_ms, 1e-3))
    return max(1, min(BATCH, fits)), fits >= 1


def time_call(fn, hold: bool = False) -> tuple[float, float]:
    """(device ms, host ms) of one call of ``fn`` between two CUDA events (GPU only);
    ``hold``: queued behind the hold kernel, so the events bracket device work only.  Work
    ``fn``'s caller enqueued before this call (copies that reset buffers) is not timed."""
    from numba import cuda

    if hold:
        _hold_kernel()[1, 1](HOLD_US)
    start, stop = cuda.event(), cuda.event()
    start.record()
    t0 = time.perf_counter()
    fn()
    host_ms = (time.perf_counter() - t0) * 1e3
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop), host_ms


def events_ms(cuda, fn, args, batch: int, hold: bool) -> float:
    """ms per call of ``batch`` calls between two CUDA events (behind a hold kernel)."""
    if hold:
        _hold_kernel()[1, 1](HOLD_US)
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(batch):
        fn(*args)
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop) / batch


_HOLD = []


def warm_hold() -> None:
    """The hold kernel compiled and launched once, for a microsecond (GPU only)."""
    _hold_kernel()[1, 1](1)


def _hold_kernel():
    """A one-thread kernel that sleeps ~``microseconds`` (GPU only, compiled once)."""
    if not _HOLD:
        from numba import cuda

        @cuda.jit
        def hold(microseconds):
            for _ in range(microseconds):
                cuda.nanosleep(1000)

        _HOLD.append(hold)
    return _HOLD[0]
