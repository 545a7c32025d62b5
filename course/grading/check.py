"""``course.check(exercise, kernel)``: run a student's kernel against an exercise spec.

For every case of the exercise the checker
1. makes fresh random inputs (seeded; the seed is in the report so a failure can be replayed),
2. puts outputs in a buffer *poisoned* with NaN (floats) or a sentinel (ints), with a guard
   band after the end that the kernel must not touch,
3. launches the kernel with the case's grid and block under a time limit,
4. compares every output with the float64 reference (tolerance stated), checks the guard
   band and that the inputs came back unchanged; cases marked ``repeats`` run again with
   fresh poison (in the simulator with a tiny thread switch interval, and traced by
   course.trace, which fails the case on a data race, an uninitialized shared-memory read
   or a syncthreads not reached by the whole block) to expose races.

It never raises because the kernel is wrong, crashes, hangs or writes out of bounds:
everything becomes a failed case with a message.
"""
from __future__ import annotations

import ctypes
import re
import secrets
import sys
import threading
import time
import traceback

import numpy as np

from .. import exercises as _ex
from .. import runtime
from .report import CaseResult, CheckResult

GUARD = 1024          # guard elements after a 1-D array (a few blocks' worth)
GUARD_2D = 32         # guard rows and columns around a 2-D array
INT_POISON = -777_777_777
GUARD_FLOAT = 31337.25   # guard-band sentinel for floats (finite: arithmetic changes it)
TIME_LIMIT_S = {"sim": 60.0, "gpu": 10.0}
# Simulator: repeat runs of cases with ``repeats > 1`` go through course.trace, and these
# findings fail the case (an exercise can opt out with a class attribute ``trace = False``).
TRACE_REPEATS = True
TRACE_FAILS = ("race", "uninitialized", "syncthreads")


class KernelTimeout(Exception):
    """Raised inside simulated threads when the time limit passes."""


def check(exercise: str, fn, *, hidden: bool = False, seed: int | None = None,
          time_limit: float | None = None, record: bool = True) -> CheckResult:
    """Check ``fn`` (a ``@cuda.jit`` kernel) against the exercise called ``exercise``.

    Returns a :class:`CheckResult` (``.passed``; shows as a table in a notebook).
    ``hidden=True`` also runs the instructor's hidden cases (the grader does this).
    """
    seed = secrets.randbits(32) if seed is None else int(seed)
    started = time.perf_counter()
    try:
        spec = _ex.get(exercise)
    except KeyError as exc:
        return CheckResult(exercise, False, runtime.MODE, seed, error=str(exc.args[0]))
    problem = _not_a_kernel(fn, spec)
    if problem:
        return CheckResult(exercise, False, runtime.MODE, seed, spec=spec, error=problem)

    limit = time_limit or TIME_LIMIT_S[runtime.MODE]
    results = []
    for i, case in enumerate(spec.all_cases(include_hidden=hidden)):
        if any(r.timed_out for r in results):
            # A kernel that hung once hangs again; on a GPU the context is still busy.
            results.append(CaseResult(case.name, case.launch, hidden=case.hidden))
            results[-1].fail("skipped: an earlier case hit the time limit")
            continue
        results.append(run_case(spec, fn, case, np.random.default_rng([seed, i]), limit))
    result = CheckResult(exercise, all(r.passed for r in results), runtime.MODE, seed,
                         spec=spec, cases=results, elapsed_s=time.perf_counter() - started,
                         hidden_run=hidden)
    if record:
        from .progress import record as record_progress

        record_progress(result)
    return result


def _not_a_kernel(fn, spec) -> str | None:
    if fn is None:
        return f"no kernel given: pass the function defined as {spec.signature}"
    if not (hasattr(fn, "py_func") and hasattr(fn, "__getitem__")):
        return (f"{getattr(fn, '__name__', fn)!r} is not a CUDA kernel: decorate it with "
                f"@cuda.jit (expected {spec.signature})")
    return None


# ---------------------------------------------------------------------------------------
# one case

def run_case(spec, fn, case, rng, time_limit: float) -> CaseResult:
    """Run one case (with its repeats) and return its result; never raises."""
    from numba import cuda

    res = CaseResult(case.name, case.launch, hidden=case.hidden)
    try:
        host = spec.make_inputs(case, rng)
        expected = spec.reference(case, {k: _copy(v) for k, v in host.items()})
        out_specs = spec.outputs(case)
    except Exception as exc:  # noqa: BLE001 - a broken spec must still report
        res.fail(f"the exercise spec itself failed ({type(exc).__name__}: {exc}); "
                 "tell your instructor")
        return res

    for rep in range(max(1, case.repeats)):
        buffers, views = {}, {}
        # Every array sits in a bigger buffer whose guard band holds a finite sentinel:
        # reading past an input's end gives a value that changes any output it reaches,
        # and writing past an output's end changes the sentinel.
        for name, value in host.items():
            if isinstance(value, np.ndarray):
                buffers[name] = _guarded(value.shape, value.dtype, fill=value)
        for name, (shape, dtype) in out_specs.items():
            buffers[name] = _guarded(shape, np.dtype(dtype))
        dev = {name: cuda.to_device(buf) for name, buf in buffers.items()}
        for name, value in host.items():
            views[name] = _view(dev[name], value.shape) if isinstance(value, np.ndarray) \
                else value
        for name, (shape, _dtype) in out_specs.items():
            views[name] = _view(dev[name], shape)

        spec.prepare(case, views)
        error, timed_out = _launch_with_limit(spec, fn, case, views, time_limit,
                                              race_hunt=rep > 0)
        if error:
            res.fail(error, timed_out=timed_out)
            return res

        for name in list(out_specs) + [n for n in spec.inout if n in host]:
            shape = out_specs[name][0] if name in out_specs else host[name].shape
            got_full = dev[name].copy_to_host()
            msg = _guard_message(name, got_full, shape)
            if msg:
                res.fail(msg)
                return res
            got = got_full[tuple(slice(0, s) for s in shape)]
            if name in spec.inout and np.array_equal(got, host[name]) and \
                    not np.array_equal(got, expected[name]):
                res.fail(f"{name} came back unchanged: the kernel never wrote it "
                         "(is its body still `pass`, or does no thread reach the store?)")
                return res
            msg = compare(name, got, expected[name], spec.tolerance(case, name))
            if msg:
                res.fail(msg + (f" (on repeat run {rep + 1} of {case.repeats}: the kernel "
                                "gives different results on identical inputs - a race?)"
                                if rep else ""))
                return res
        for name, value in host.items():
            if isinstance(value, np.ndarray) and name not in spec.inout:
                now = dev[name].copy_to_host()
                msg = _guard_message(name, now, value.shape) or \
                    _changed_input_message(name, value, now[tuple(slice(0, s) for s in value.shape)])
                if msg:
                    res.fail(msg)
                    return res
    return res


def _copy(v):
    return v.copy() if isinstance(v, np.ndarray) else v


def _poison(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return INT_POISON if info.min <= INT_POISON else info.max
    return 0


def _guard_value(dtype):
    """The finite sentinel of guard bands (NaN would survive `y = x + y`, a sentinel not)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":  # float16 is coarse at 31337: use a small sentinel there
        return np.asarray(GUARD_FLOAT if dtype.itemsize > 2 else 7.375, dtype=dtype)[()]
    return _poison(dtype)


def _guarded(shape, dtype, fill=None) -> np.ndarray:
    """A host buffer: data (``fill``, or the poison) plus a sentinel guard band after
    (1-D) or around (2-D+) it."""
    if len(shape) == 1:
        full = (shape[0] + GUARD,)
    else:
        full = tuple(s + GUARD_2D for s in shape)
    buf = np.full(full, _guard_value(dtype), dtype=dtype)
    buf[tuple(slice(0, s) for s in shape)] = _poison(dtype) if fill is None else fill
    return buf


def _view(dev_array, shape):
    return dev_array[tuple(slice(0, s) for s in shape)]


def _guard_message(name, full, shape) -> str | None:
    region = tuple(slice(0, s) for s in shape)
    mask = np.ones(full.shape, dtype=bool)
    mask[region] = False
    touched = full[mask] != _guard_value(full.dtype)
    if not touched.any():
        return None
    idx = np.argwhere(mask)[np.argmax(touched)]
    where = int(idx[0]) if len(idx) == 1 else tuple(int(i) for i in idx)
    return (f"wrote out of bounds: {name} has shape {tuple(shape)}, but the kernel wrote "
            f"{name}[{where}] (past the end) - is a bounds check (`if i < n`) missing?")


def compare(name: str, got: np.ndarray, expected, tol) -> str | None:
    """None if ``got`` matches ``expected`` within ``tol``; otherwise one readable sentence."""
    expected = np.asarray(expected)
    if got.shape != expected.shape:
        return f"{name} has shape {got.shape}, expected {expected.shape}"
    poison = _poison(got.dtype)
    unwritten = np.isnan(got) if (isinstance(poison, float) and np.isnan(poison)) \
        else (got == poison) & (expected != poison)
    if tol.exact:
        wrong = got != expected
    else:
        with np.errstate(invalid="ignore"):
            wrong = ~(np.abs(got.astype(np.float64) - expected) <=
                      tol.atol + tol.rtol * np.abs(expected))
    if not wrong.any():
        return None
    first = tuple(int(i) for i in np.argwhere(wrong)[0])
    where = first[0] if len(first) == 1 else first
    count = int(wrong.sum())
    if unwritten[first]:
        n_unwritten = int(unwritten.sum())
        return (f"{name}[{where}] was never written (still holds the poison value); "
                f"{n_unwritten} of {got.size} elements unwritten")
    return (f"{name}: {count} of {got.size} elements wrong; first at index {where}: "
            f"got {_num(got[first])}, expected {_num(expected[first])}")


def _changed_input_message(name, before, after) -> str | None:
    changed = before != after
    if before.dtype.kind == "f":
        changed &= ~(np.isnan(before) & np.isnan(after))
    if not changed.any():
        return None
    first = tuple(int(i) for i in np.argwhere(changed)[0])
    where = first[0] if len(first) == 1 else first
    return (f"the input {name} was modified: {name}[{where}] was {_num(before[first])}, "
            f"now {_num(after[first])} - inputs must come back unchanged")


def _num(x) -> str:
    return f"{x:.7g}" if isinstance(x, (float, np.floating)) else str(x)


# ---------------------------------------------------------------------------------------
# launching under a time limit

def _launch_with_limit(spec, fn, case, views, limit: float, race_hunt: bool):
    """Launch and synchronize; return (error message or None, timed_out)."""
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
            return (f"time limit: the kernel was still running after {limit:g} s (an endless "
                    "loop?). The GPU stays busy until it ends: restart the notebook kernel.",
                    True)
        exc = box.get("exc")
        return (_explain(exc, fn) if exc else None), False

    old_interval = sys.getswitchinterval()
    watchdog = _SimWatchdog(limit)
    try:
        if race_hunt:
            sys.setswitchinterval(1e-5)  # switch simulated threads often: races show up
        watchdog.start()
        if race_hunt and TRACE_REPEATS and getattr(spec, "trace", True):
            return _traced_launch(spec, fn, case, views), False
        spec.launch(fn, case, views)
        cuda.synchronize()
        return None, False
    except BaseException as exc:  # noqa: BLE001 - KernelTimeout, IndexError, anything
        if watchdog.fired or isinstance(exc, KernelTimeout):
            return (f"time limit: the kernel did not finish within {limit:g} s in the "
                    "simulator (an endless loop, or a loop bound that never moves?)", True)
        return _explain(exc, fn), False
    finally:
        watchdog.cancel()
        sys.setswitchinterval(old_interval)


def _traced_launch(spec, fn, case, views) -> str | None:
    """Launch under course.trace (simulator repeat runs): a race, an uninitialized shared
    read or a partial syncthreads becomes the case's failure message."""
    from numba import cuda

    from .. import trace

    with trace.recording() as traces:
        spec.launch(fn, case, views)
    cuda.synchronize()
    for t in traces:
        for p in t.problems():
            if p.kind in TRACE_FAILS:
                hint = (" - use cuda.atomic.add (or another cuda.atomic op) where several "
                        "blocks update the same element" if "different blocks" in p.message
                        else "")
                return f"{p.kind} found by course.trace: {p.message}{hint}"
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

    deadline = time.monotonic() + patience
    while True:
        alive = [t for t in threading.enumerate() if isinstance(t, BlockThread) and t.is_alive()]
        for t in alive:
            t.abort = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident),
                                                       ctypes.py_object(KernelTimeout))
            t.syncthreads_event.set()
        if once or not alive or time.monotonic() > deadline:
            return
        time.sleep(0.02)


_SIM_THREAD = re.compile(r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]:?\s*(.*)",
                         re.S)


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
        return (f"the simulator stopped thread {_dims(t)} of block {_dims(b)}: {what}"
                + (f" at line {line}" if line else ""))
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
