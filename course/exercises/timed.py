"""Timed runs, every one judged: the loop a tune exercise's measured launch runs in.

Why a kernel cannot skip work on any of these runs is argued in ``tune.py``'s docstring.
What this module does, run after run (warm-ups, the probe and every timed run alike):

1. *restore*: every array of the launch is copied device-to-device from a pristine copy made
   once (outputs poisoned, in-out arrays and inputs as the judge sent them), then the spec's
   ``prepare`` and (GPU) a read of a scratch buffer larger than L2, so every timed run
   starts from the same cold cache; all of it enqueued before the start event, untimed
   (on an H100 the figures stay within -3 % .. +0.2 % of the old untouched-buffer timing);
2. *launch* (on a GPU between two CUDA events, behind the hold kernel when short);
3. *sample*: values at positions drawn only now, from the judge's seed
   (:func:`positions`), go back to the judge, which recomputes the positions and compares
   the values with its float64 reference; the last run's arrays go back whole.

Every array runs in a contiguous buffer with a *tail* band after it that is never restored:
after the runs the tails must be untouched and the pristine copies unchanged (a kernel that
wrote past its arrays fails the measurement).  In the simulator the figure is the traced
launch (run 0); ``sim_runs`` more runs go through the same loop (the tests use them).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ..platform import runtime

SAMPLES = 4096  # judged elements of each output per run (all of them when fewer)
MAX_RUNS = 40  # judged runs of one measurement, at most (bounds the judge's read)
TAIL = 1024  # elements after each array's buffer, never restored
TAIL_BYTE = 0xA5
WARMUP, REPEAT = 3, 30  # GPU: runs before the timed ones, timed runs
SLOW_MS, BUDGET_MS = 200.0, 6000.0  # a launch slower than this is timed in about that much
MIN_SLOW_RUNS = 3  # but never fewer runs than this (a mean and a spread)
HOLD_BELOW_MS = 5.0  # launches shorter than this wait behind the hold kernel


def positions(
    seed: int, run: int, index: int, size: int, domain=None, count: int | None = None
) -> np.ndarray:
    """Flat positions of output number ``index`` judged after run ``run``: every element
    when there are at most ``count`` (of ``domain``, the elements the reference judges, when
    given), else ``count`` drawn from ``np.random.default_rng([seed, run, index])``."""
    n, count = (size if domain is None else len(domain)), count or SAMPLES
    pick = (
        np.arange(n)
        if n <= count
        else np.random.default_rng([seed, run, index]).integers(0, n, count)
    )
    return pick.astype(np.int64) if domain is None else np.asarray(domain, np.int64)[pick]


def sample_count(size: int, domain=None) -> int:
    return min(SAMPLES, size if domain is None else len(domain))


class Arrays:
    """The launch's arrays on the device: working buffers (contiguous, a tail after each)
    and pristine copies to restore them from."""

    def __init__(self, arrays: dict, shapes: dict, scalars: dict):
        from numba import cuda

        self.host, self.pristine, self.flat, self.work = {}, {}, {}, {}
        for name, buf in arrays.items():
            a = np.ascontiguousarray(buf[tuple(slice(0, s) for s in shapes[name])])
            tail = np.full(TAIL * a.itemsize, TAIL_BYTE, np.uint8).view(a.dtype)
            self.host[name] = a
            self.flat[name] = cuda.to_device(np.concatenate([a.ravel(), tail]))
            self.work[name] = self.flat[name][: a.size].reshape(a.shape)
            self.pristine[name] = cuda.to_device(a)
        self.views = dict(scalars, **self.work)

    def restore(self) -> None:
        for name, w in self.work.items():
            w.copy_to_device(self.pristine[name])

    def take(self, name: str, pos: np.ndarray) -> np.ndarray:
        """The working values of ``name`` at flat positions ``pos``."""
        flat = self.flat[name]
        if runtime.MODE != "gpu":
            return flat.copy_to_host()[pos]
        return _gather(flat, pos)

    def collect(self) -> tuple[dict, str | None]:
        """(the working arrays, on the host; why the runs wrote outside them, or None): each
        buffer comes back once, with its tail, and each pristine copy is compared."""
        whole = {}
        for name, a in self.host.items():
            flat = self.flat[name].copy_to_host()
            if (flat[a.size :].view(np.uint8) != TAIL_BYTE).any():
                return {}, (
                    f"the kernel wrote past the end of {name} during the timed runs "
                    "(is a bounds check missing?)"
                )
            if not np.array_equal(
                self.pristine[name].copy_to_host().view(np.uint8), a.view(np.uint8)
            ):
                return {}, (
                    f"the kernel wrote outside its arrays during the timed runs (the "
                    f"judge's pristine copy of {name} changed)"
                )
            whole[name] = flat[: a.size].reshape(a.shape)
        return whole, None


STEPS = ("to device", "compile", "warm-up", "launches", "sampling", "copies", "traced", "sim runs")


class Steps(dict):
    """Seconds per step of one measurement (:data:`STEPS`), each lap exclusive of the
    sampling done in it: where the time went, for the profile only (``phases.py``)."""

    def __init__(self):
        super().__init__()
        self.t, self.sampled = time.perf_counter(), 0.0

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self[name] = self.get(name, 0.0) + max(0.0, now - self.t - self.sampled)
        self.t, self.sampled = now, 0.0

    def sampling(self, seconds: float) -> None:
        self["sampling"] = self.get("sampling", 0.0) + seconds
        self.sampled += seconds


class Sampling:
    """What the judge asked to see of every run: its seed, the outputs (in order), the
    elements each reference judges (``domains``: None for all), runs in the simulator;
    ``steps``: where the measurement's time went (:class:`Steps`)."""

    def __init__(self, seed: int, names: list, domains: dict, sim_runs: int = 0):
        self.seed, self.names, self.domains = int(seed), list(names), domains
        self.sim_runs = int(sim_runs)
        self.steps = Steps()

    def take(self, arrays: Arrays, run: int) -> dict:
        t = time.perf_counter()
        out = {}
        for j, name in enumerate(self.names):
            pos = positions(self.seed, run, j, arrays.host[name].size, self.domains.get(name))
            out[name] = arrays.take(name, pos)
        self.steps.sampling(time.perf_counter() - t)
        return out


def judged_runs(
    spec, fn, case, arrays: Arrays, sampling: Sampling, traced=None, copies=True, profile=False
):
    """(figures, the last run's arrays, samples: name -> (runs, k) array, trespass or None).

    ``traced``: ``(fn, case, views) -> figures``, the simulator's traced launch (run 0).
    ``copies=False``: the last run's arrays and the trespass check are left on the device
    (None, None): the grader's measurer fetches them after the measuring lock is given
    back (``arrays.collect()``).  ``profile`` (GPU): after the compile
    run, one run between cuProfilerStart and cuProfilerStop and no timed run - what a
    profiler reads (``grading/wall/counter.py``); its figures are ``{"runs": 0}``."""
    rows, times, steps = [], [], sampling.steps
    launch = lambda: spec.launch(fn, case, arrays.views)  # noqa: E731

    def run(timed: bool = False, hold: bool = False, trace=None, profiled: bool = False):
        arrays.restore()
        spec.prepare(case, arrays.views)
        if timed and FLUSH_L2:
            _flush_l2()
        if profiled:  # the one launch the profiler counts, and nothing else
            from numba import cuda

            cuda.synchronize()
            cuda.profile_start()
            launch()
            cuda.synchronize()
            cuda.profile_stop()
            figures = None
        elif trace is not None:
            figures = trace(fn, case, arrays.views)
        elif timed:
            from ..measure.timing import time_call

            figures = time_call(launch, hold)
        else:
            from numba import cuda

            launch()
            cuda.synchronize()
            figures = None
        rows.append(sampling.take(arrays, len(rows)))
        return figures

    if runtime.MODE != "gpu":
        figures = run(trace=traced)
        steps.lap("traced")
        for _ in range(sampling.sim_runs):
            run()
        steps.lap("sim runs")
    else:
        run()  # compiles: judged, not timed
        steps.lap("compile")
    if runtime.MODE == "gpu" and profile:
        run(profiled=True)
        steps.lap("launches")
        figures = {"runs": 0}
    elif runtime.MODE == "gpu":
        probe, host_ms = run(timed=True)
        hold = probe < HOLD_BELOW_MS and host_ms < 0.8 * _hold_ms()
        if probe > SLOW_MS:  # a seed board's naive kernel: fewer
            count, warm = max(MIN_SLOW_RUNS, min(REPEAT, int(BUDGET_MS / probe))), 0
        else:
            count, warm = REPEAT, WARMUP - 1
        for _ in range(warm):
            run(timed=True, hold=hold)
        steps.lap("warm-up")
        times = [run(timed=True, hold=hold)[0] for _ in range(count)]
        steps.lap("launches")
        figures = _figures(times)
    samples = {name: np.stack([r[name] for r in rows]) for name in sampling.names}
    if not copies:
        return figures, None, samples, None
    whole, trespass = arrays.collect()
    steps.lap("copies")
    return figures, whole, samples, trespass


def warm_up() -> None:
    """GPU: this process's CUDA context made and the helper kernels compiled (the L2 flush,
    the gather, the hold kernel), with tiny launches of the course's own code, so that none
    of it happens while the judge holds the measuring lock.  Nothing in the simulator."""
    if runtime.MODE != "gpu":
        return
    from numba import cuda

    from ..measure.timing import warm_hold

    _flush_l2()
    _gather(cuda.to_device(np.zeros(4, np.float32)), np.zeros(1, np.int64))
    warm_hold()
    cuda.synchronize()


def _figures(times: list) -> dict:
    t = np.asarray(times, dtype=np.float64)
    return {
        "ms": float(t.min()),
        "median_ms": float(statistics.median(times)),
        "max_ms": float(t.max()),
        "mean_ms": float(t.mean()),
        "std_ms": float(t.std()),
        "runs": len(times),
    }


def _hold_ms() -> float:
    from ..measure.timing import HOLD_US

    return HOLD_US / 1000


FLUSH_L2 = True  # timed runs start with the restore's writes out of L2 (see _flush_l2)
_FLUSH = []


def _flush_l2() -> None:
    """Read a scratch buffer larger than L2 (twice an H100's or H200's 50 MB): the restore
    just wrote the arrays' last tens of MB, and those lines would still sit in L2, dirty,
    when the timed launch starts - its first reads of them fast, their write-backs charged
    to it.  After this read every timed run starts from the same cold L2 (untimed)."""
    from numba import cuda, float32

    if not _FLUSH:

        @cuda.jit("void(float32[::1], float32[::1])")
        def touch(src, out):
            acc = float32(0.0)
            for k in range(cuda.grid(1), src.size, cuda.gridsize(1)):
                acc += src[k]
            if acc == float32(-1.5):  # never: keeps the loads
                out[0] = acc

        _FLUSH.extend(
            [touch, cuda.device_array(32 << 20, np.float32), cuda.device_array(1, np.float32)]
        )
    touch, scratch, out = _FLUSH
    touch[1024, 256](scratch, out)


_GATHER = []


def _gather(flat, pos: np.ndarray) -> np.ndarray:
    """flat[pos] on the device, as bytes (one kernel for every dtype), brought back."""
    from numba import cuda

    if not _GATHER:

        @cuda.jit("void(uint8[::1], int64[::1], int64, uint8[::1])")
        def gather(src, where, itemsize, out):
            t = cuda.grid(1)
            if t < out.size:
                k = t // itemsize
                out[t] = src[where[k] * itemsize + t % itemsize]

        _GATHER.append(gather)
    size = flat.dtype.itemsize
    out = cuda.device_array(len(pos) * size, np.uint8)
    n = max(1, out.size)
    _GATHER[0][(n + 255) // 256, 256](flat.view(np.uint8), cuda.to_device(pos), size, out)
    return out.copy_to_host().view(flat.dtype)
