"""``course.check(exercise, answer)``: run a student's kernel (or answer) against a spec.

For every case of a kernel exercise (kinds ``write``, ``debug`` and ``tune``) the checker
1. makes fresh random inputs (seeded; the seed is in the report so a failure can be replayed),
2. puts outputs in a buffer *poisoned* with NaN (floats) or a sentinel (ints), with a guard
   band after the end that the kernel must not touch,
3. launches the kernel with the case's grid and block under a time limit,
4. compares every output with the float64 reference (tolerance stated), checks the guard
   band and that the inputs came back unchanged; cases marked ``repeats`` run again with
   fresh poison (in the simulator with a tiny thread switch interval, and traced by
   course.sim.trace, which fails the case on a data race, an uninitialized shared-memory read
   or a syncthreads not reached by the whole block) to expose races.

Steps 1, 2 and 4 are ``judge.py`` (trusted), step 3 is ``launch.py``.  A ``predict``
exercise takes the student's answer instead of a kernel, and the spec computes the right one
(``spec.judge_answer`` in ``course/exercises/predict.py``); a ``tune`` exercise, once every
case passes, measures one launch against its target (``course/exercises/tune.py``).

It never raises because the kernel is wrong, crashes, hangs or writes out of bounds:
everything becomes a failed case with a message.
"""
from __future__ import annotations

import numbers
import secrets
import time

import numpy as np

from .. import exercises as _ex
from ..platform import runtime
from . import hidden as hidden_mod
from . import judge
from .launch import TIME_LIMIT_S, Interrupted, run_launch
from .messages import course_sentence
from ..exercises.outcome import TIMED
from .report import CaseResult, CheckResult

compare = judge.compare   # the comparison, also used by the exercise specs' own tests


def check(exercise: str, fn, *, hidden: bool = False, seed: int | None = None,
          time_limit: float | None = None, record: bool = True) -> CheckResult:
    """Check ``fn`` (a ``@cuda.jit`` kernel, or an answer) against the exercise ``exercise``.

    Returns a :class:`CheckResult` (``.passed``; shows as a table in a notebook).
    ``hidden=True`` also runs the instructor's hidden cases (the grader does this).
    """
    seed = secrets.randbits(32) if seed is None else int(seed)
    started = time.perf_counter()
    try:
        spec = _ex.get(exercise)
    except KeyError as exc:
        return CheckResult(exercise, False, runtime.MODE, seed, error=str(exc.args[0]))
    results, error = [], ""
    try:
        if spec.kind == "predict":
            results = spec.judge_answer(fn, hidden_mod.answers_for(spec))
        else:
            error = not_a_kernel(fn, spec) or ""
            if not error:
                kernel, error = admit(spec, fn, seed)
                error = course_sentence(error, fn, spec)
                fn = kernel
            results = [] if error else run_cases(spec, fn, seed, hidden, time_limit)
        if spec.kind == "tune" and results and all(r.passed for r in results):
            results.append(measure(spec, fn, seed))   # correct first; then the target
    except KeyboardInterrupt as exc:    # Stop: report what ran, record nothing
        done = exc.results if isinstance(exc, Interrupted) else results
        return CheckResult(exercise, False, runtime.MODE, seed, spec=spec, cases=done,
                           elapsed_s=time.perf_counter() - started, hidden_run=hidden,
                           interrupted=True)
    result = CheckResult(exercise, bool(results) and not error and all(r.passed for r in results),
                         runtime.MODE, seed, spec=spec, cases=results, error=error,
                         elapsed_s=time.perf_counter() - started, hidden_run=hidden)
    if record:
        from .progress import record as record_progress

        record_progress(result)
    return result


def admit(spec, fn, seed: int):
    """(the kernel rebuilt from its unit, "") or (None, why it cannot be checked).

    What a check runs is what a grader runs: the kernel's unit (``unit.py``) rebuilt in a
    fresh namespace, after it compiled for a real GPU (``gate.py``).  Nothing else a cell
    did travels with it."""
    from .unit import UnitError, extract, rebuild

    try:
        unit = extract(fn, spec.launch_names)
        kernel = rebuild(unit)
    except UnitError as exc:
        return None, f"your kernel cannot be checked: {exc}"
    return (kernel, "") if not (why := gate_error(spec, unit, seed)) else (None, why)


def gate_error(spec, unit: dict, seed: int, compiler=None) -> str | None:
    """None when ``unit`` compiles for the course's GPUs with the types of the exercise's
    first launch; else the sentence the check shows.  ``compiler``: the grader's sandboxed
    gate for this submission (``session.py``); this process's own gate by default."""
    from types import SimpleNamespace

    from .gate import GateFailed, GateUnavailable, gate, launch_types
    from .launch import views_of
    from .unit import constants

    kernel = SimpleNamespace(py_func=SimpleNamespace(__globals__=constants(unit)))
    cases = hidden_mod.all_cases(spec, False) or hidden_mod.all_cases(spec, True)
    if not cases and spec.kind != "tune":
        return None                 # nothing will be launched
    case = cases[0] if cases else spec.measured_case()
    try:
        prep = judge.prepare(spec, case, case_rng(seed, 0))
        _dev, views = views_of(prep.buffers(), prep.shapes, prep.scalars())
        calls = launch_types(spec, kernel, case, views)
    except Exception as exc:  # noqa: BLE001 - a broken spec must still report
        return spec_broken(exc)
    try:
        why = (compiler or gate()).check(unit, calls)
    except GateFailed as exc:
        return str(exc)
    except GateUnavailable as exc:
        return (f"the GPU compiler could not be started, so the kernel could not be checked "
                f"({exc}); reinstall with `pip install -e .` (numba-cuda[cu12])")
    if why is None:
        return None
    return f"your kernel does not compile for a GPU (numba-cuda, {_targets()}): {why}"


def _targets() -> str:
    from .gate import TARGETS

    return ", ".join(f"sm_{a}{b}" for a, b in TARGETS)


def run_cases(spec, fn, seed: int, hidden: bool, time_limit: float | None,
              launch=run_launch) -> list:
    """Every case of a kernel exercise; a list of CaseResult.  ``launch`` runs the kernel
    on the judge's buffers: in this process by default, in the grading worker when a class
    is graded (``session.py`` passes one that asks the worker)."""
    limit = time_limit or TIME_LIMIT_S[runtime.MODE]
    results = []
    for i, case in enumerate(hidden_mod.all_cases(spec, hidden)):
        if any(r.timed_out for r in results):
            # A kernel that hung once hangs again; on a GPU the context is still busy.
            results.append(skipped(case))
            continue
        rng = hidden_mod.case_rng(seed, i) if case.hidden else case_rng(seed, i)
        try:
            results.append(run_case(spec, fn, case, rng, limit, launch))
        except KeyboardInterrupt:       # Stop: no further case runs (launch.py ended it)
            raise Interrupted(results) from None
    return results


def case_rng(seed: int, i: int) -> np.random.Generator:
    """The inputs of case ``i`` depend on the seed and ``i`` only (replayable)."""
    return np.random.default_rng([seed, i])


def skipped(case) -> CaseResult:
    res = CaseResult(case.name, case.launch, hidden=case.hidden)
    res.fail("skipped: an earlier case hit the time limit")
    return res


def not_a_kernel(fn, spec) -> str | None:
    """Why ``fn`` cannot be checked as the exercise's kernel, or None."""
    if fn is None:
        return f"no kernel given: pass the function defined as {spec.signature}"
    if not (hasattr(fn, "py_func") and hasattr(fn, "__getitem__")):
        return (f"{getattr(fn, '__name__', fn)!r} is not a CUDA kernel: decorate it with "
                f"@cuda.jit (expected {spec.signature})")
    return None


def run_case(spec, fn, case, rng, time_limit: float, launch=run_launch) -> CaseResult:
    """Run one case (with its repeats) and return its result; never raises for the kernel."""
    res = CaseResult(case.name, case.launch, hidden=case.hidden)
    try:
        prep = judge.prepare(spec, case, rng)
    except Exception as exc:  # noqa: BLE001 - a broken spec must still report
        res.fail(spec_broken(exc))
        return res
    for rep in range(max(1, case.repeats)):
        returned, error, timed_out = launch(spec, fn, case, prep.buffers(), prep.scalars(),
                                            prep.shapes, time_limit, race_hunt=rep > 0)
        msg = error or judge.judge(spec, case, prep, returned, rep)
        if msg:
            res.fail(msg, timed_out=timed_out)
            return res
    return res


def measure(spec, fn, seed: int) -> CaseResult:
    """A tune exercise's measured launch against its target (``course/exercises/tune.py``);
    every run's outputs are judged (sampled, ``sampled.py``) and the last run's whole, so
    a kernel that skips work on any run gets no figure."""
    from .gpu_lock import device_lock
    from .measurer import measure_launch
    from .sampled import plan

    case = spec.measured_case()
    try:
        prep = judge.prepare(spec, case, measured_rng(seed), guard=False)
        p = plan(spec, prep)
        with device_lock(runtime.MODE == "gpu"):
            figures, returned, samples, trespass = measure_launch(
                spec, fn, case, prep.buffers(), prep.shapes, prep.scalars(),
                dict(p.request(), domains=p.domains))
    except Exception as exc:  # noqa: BLE001 - the report, never a traceback
        return measure_failed(f"{type(exc).__name__}: {exc}")
    if trespass:
        return measure_failed(trespass)
    return judge_measured(spec, case, prep, returned, figures, plan=p, samples=samples)


def measured_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, 1 << 20])


def judge_measured(spec, case, prep, returned: dict, figures: dict, mode=None,
                   ceilings=None, plan=None, samples=None) -> CaseResult:
    """The target's verdict, or no figure when any run's outputs are wrong: the last run's
    arrays (``returned``) whole, every run's ``samples`` against ``plan`` (``sampled.py``),
    or a figure past this GPU's ceilings (``Tune.judge_figures``)."""
    mode = mode or runtime.MODE
    wrong = None
    if plan is not None:          # every run's samples, earliest first
        timed = figures.get("runs", 0) if isinstance(figures.get("runs"), int) else 0
        wrong = plan.wrong(spec, case, prep, samples or {},
                           at_least=1 + plan.sim_runs if mode == "sim" else timed + 2)
    if not wrong and (wrong := judge.judge(spec, case, prep, returned)):
        wrong = f"no figure: the measured launch ({case.name}) gave wrong results - {wrong}"
    if wrong:
        res = CaseResult(TIMED, case.launch)
        res.fail(wrong)
        return res
    res = spec.judge_figures(figures, mode, ceilings)
    if res.figures is None:     # {}: a figure past the ceiling, nothing to grade or rank
        res.figures = {k: float(v) for k, v in figures.items()
                       if isinstance(v, numbers.Real) and not isinstance(v, bool)}
    return res


def measure_failed(why: str) -> CaseResult:
    res = CaseResult(TIMED, "")
    res.fail(f"the measured launch failed: {why[:300]}")
    return res


def spec_broken(exc) -> str:
    return (f"the exercise spec itself failed ({type(exc).__name__}: {exc}); "
            "tell your instructor")
