"""The launch half of a check: put guarded buffers on the device, launch, bring them back.

This half runs where the kernel is launched: in your notebook for ``course.check``, and in
the grading measurer (``measurer.py``, a process that runs only the kernel) when a class is
graded.  It decides nothing: what it
returns goes to ``judge.py``, which compares it with a reference this process never sees.
It never raises because the kernel is wrong, crashes or hangs: the error becomes a message.
Stop (the notebook's interrupt, Ctrl-C) is the one exception that passes: the simulated
threads are ended first, and ``check.py`` reports the check as interrupted.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import traceback
from dataclasses import dataclass

from ...platform import runtime

TIME_LIMIT_S = {"sim": 60.0, "gpu": 10.0}
# Simulator: repeat runs of cases with ``repeats > 1`` go through course.sim.trace, and these
# findings fail the case (an exercise can opt out with a class attribute ``trace = False``).
TRACE_REPEATS = True
TRACE_FAILS = ("race", "uninitialized", "syncthreads")


class KernelTimeout(Exception):
    """Raised inside simulated threads when the time limit passes."""


class Interrupted(KeyboardInterrupt):
    """Stop pressed during a check's cases; ``results``: the cases that finished before."""

    def __init__(self, results=()):
        super().__init__("interrupted")
        self.results = list(results)


@dataclass(frozen=True)
class Staged:
    """One case staged for a launch: what every launcher takes, in this order, after the
    exercise and the kernel (:func:`run_launch`, :func:`views_of`,
    ``measurer.measure_launch``, and the grader's launch through the measurer).

    ``buffers``: host arrays by argument name (guarded for a test case, plain for a measured
    launch: ``judge.Prepared.staged`` makes them); ``shapes``: each array's shape inside its buffer
    (the kernel gets views of that size, so writing past the end lands in the guard band);
    ``scalars``: the other arguments (sizes, constants)."""

    case: object
    buffers: dict
    shapes: dict
    scalars: dict


def run_launch(spec, fn, staged: Staged, time_limit: float, race_hunt: bool = False):
    """Launch ``fn`` on copies of the staged buffers; (buffers after the launch, error,
    timed_out)."""
    dev, views = views_of(staged)
    spec.prepare(staged.case, views)
    error, timed_out = _launch_with_limit(spec, fn, staged.case, views, time_limit, race_hunt)
    if error:
        return {}, error, timed_out
    return {name: d.copy_to_host() for name, d in dev.items()}, None, False


def views_of(staged: Staged):
    """(device buffers, launch arguments): each array a view of its guarded buffer."""
    from numba import cuda

    dev = {name: cuda.to_device(buf) for name, buf in staged.buffers.items()}
    views = dict(staged.scalars)
    for name, d in dev.items():
        views[name] = d[tuple(slice(0, s) for s in staged.shapes[name])]
    return dev, views


# ---------------------------------------------------------------------------------------
# launching under a time limit


def _launch_with_limit(spec, fn, case, views, limit: float, race_hunt: bool):
    """Launch and synchronize; return (error message or None, timed_out)."""
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings():  # a check's small grids are the point, not a mistake
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        return _launch_limited(spec, fn, case, views, limit, race_hunt)


def _launch_limited(spec, fn, case, views, limit: float, race_hunt: bool):
    from numba import cuda

    if runtime.MODE == "gpu":
        box = {}

        def work():
            try:
                spec.launch(fn, case, views)
                cuda.synchronize()
            except BaseException as exc:  # noqa: BLE001
                box["exc"] = exc

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            return (
                f"time limit: the kernel was still running after {limit:g} s (an endless "
                "loop?). The GPU stays busy until it ends: restart the notebook kernel.",
                True,
            )
        exc = box.get("exc")
        return (_explain(exc, fn) if exc else None), False

    old_interval = sys.getswitchinterval()
    watchdog = _SimWatchdog(limit)
    traced = race_hunt and TRACE_REPEATS and getattr(spec, "trace", True)
    try:
        if race_hunt and not traced:
            # untraced race hunt: switch simulated threads often so races change results
            # (the tracer finds races from the recorded accesses, whatever the interleaving)
            sys.setswitchinterval(1e-5)
        watchdog.start()
        if traced:
            return _traced_launch(spec, fn, case, views), False
        from ...sim.scheduler import threaded

        with threaded() if race_hunt else contextlib.nullcontext():
            spec.launch(fn, case, views)  # (a race hunt: interleaved threads, every block)
        cuda.synchronize()
        return None, False
    except KeyboardInterrupt:  # Stop: end every simulated thread, then stop the check
        _stop_sim_threads(patience=1.0)
        raise
    except BaseException as exc:  # noqa: BLE001 - KernelTimeout, IndexError, anything
        if watchdog.fired or isinstance(exc, KernelTimeout):
            return (
                f"time limit: the kernel did not finish within {limit:g} s in the "
                "simulator (an endless loop, or a loop bound that never moves?)",
                True,
            )
        return _explain(exc, fn), False
    finally:
        watchdog.cancel()
        sys.setswitchinterval(old_interval)


def _traced_launch(spec, fn, case, views) -> str | None:
    """Launch under course.sim.trace (simulator repeat runs): a race, an uninitialized shared
    read or a partial syncthreads becomes the case's failure message."""
    from numba import cuda

    from ...sim import trace

    with trace.recording() as traces:
        spec.launch(fn, case, views)
    cuda.synchronize()
    for t in traces:
        for p in t.problems():
            if p.kind in TRACE_FAILS:
                hint = (
                    " - use cuda.atomic.add (or another cuda.atomic op) where several "
                    "blocks update the same element"
                    if "different blocks" in p.message
                    else ""
                )
                return f"{p.kind} found by course.sim.trace: {p.message}{hint}"
    return None


class _SimWatchdog:
    """After ``limit`` seconds, keep raising KernelTimeout inside every simulated CUDA
    thread (threads still being started get it on a later round) until cancelled."""

    def __init__(self, limit: float):
        self.fired = False
        self._limit = limit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()

    def cancel(self):
        self._stop.set()
        if self.fired:
            _stop_sim_threads()

    def _run(self):
        if self._stop.wait(self._limit):
            return
        self.fired = True
        while not self._stop.wait(0.05):
            _stop_sim_threads(once=True)


def _stop_sim_threads(once: bool = False, patience: float = 5.0) -> None:
    """Raise KernelTimeout in every live simulator thread (until none is left)."""
    from numba.cuda.simulator.kernel import BlockThread

    from ...sim.scheduler import stop_threads

    threads = [t for t in threading.enumerate() if isinstance(t, BlockThread)]
    stop_threads(threads, patience=patience, exc=KernelTimeout, once=once)


_SIM_THREAD = re.compile(
    r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]:?\s*(.*)", re.S
)


def _explain(exc: BaseException, fn) -> str:
    """Turn an exception from compiling/launching a student kernel into one message."""
    text = str(exc).strip()
    kind = type(exc).__name__
    m = _SIM_THREAD.match(text)
    line = _student_line(exc, fn)
    if m:
        t, b, rest = m.group(1, 2, 3), m.group(4, 5, 6), m.group(7)
        what = f"{kind}: {rest}" if rest else kind
        if kind == "IndexError":
            what += " - an index past the end of an array (a missing bounds check?)"
        return f"the simulator stopped thread {_dims(t)} of block {_dims(b)}: {what}" + (
            f" at line {line}" if line else ""
        )
    if "TypingError" in kind or "NumbaError" in kind or "LoweringError" in kind:
        first = text.splitlines()[0] if text else kind
        return f"the kernel did not compile ({kind}): {first[:300]}"
    return f"{kind}: {text[:400]}" + (f" at line {line}" if line else "")


def _dims(t) -> str:
    x, y, z = (int(v) for v in t)
    return f"({x})" if y == 0 and z == 0 else f"({x}, {y}, {z})"


def _student_line(exc, fn) -> str | None:
    """'5 (`y[i] = x[i]`)': the line of the student's kernel where the exception happened."""
    import linecache

    code = getattr(getattr(fn, "py_func", None), "__code__", None)
    if code is None:
        return None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code is code:
            text = linecache.getline(code.co_filename, lineno).strip()
            return f"{lineno} of {code.co_name}" + (f" (`{text}`)" if text else "")
    return None
