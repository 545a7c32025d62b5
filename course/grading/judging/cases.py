"""The case engine: every case of a kernel exercise run and judged, and the measured launch's
verdict.  Both faces stand on it: ``check.py`` (``course.check`` in a notebook: the kernel
launched in this process) and ``session.py`` (the grader: the kernel launched by the
measurer process), which passes its own ``launch`` and compile gate.

For every case the engine
1. makes fresh random inputs (seeded; the seed is in the report so a failure can be replayed),
2. puts outputs in a buffer *poisoned* with NaN (floats) or a sentinel (ints), with a guard
   band after the end that the kernel must not touch,
3. launches the kernel with the case's grid and block under a time limit (``launch``),
4. compares every output with the float64 reference (tolerance stated), checks the guard
   band and that the inputs came back unchanged; cases marked ``repeats`` run again with
   fresh poison (in the simulator with a tiny thread switch interval, and traced by
   course.sim.trace, which fails the case on a data race, an uninitialized shared-memory read
   or a syncthreads not reached by the whole block) to expose races.

Steps 1, 2 and 4 are ``judge.py`` (trusted), step 3 is ``launch.py``.  It never raises
because the kernel is wrong, crashes, hangs or writes out of bounds: everything becomes a
failed case with a message.
"""

from __future__ import annotations

import contextlib
import functools
import numbers

import numpy as np

from ...exercises.outcome import TIMED
from ...platform import runtime
from .. import hidden as hidden_mod
from ..wall.launch import TIME_LIMIT_S, Interrupted, run_launch
from . import judge
from .report import CaseResult


def run_cases(
    spec,
    fn,
    seed: int,
    hidden: bool,
    time_limit: float | None,
    launch=run_launch,
    first_failure: bool = False,
    shared: bool = False,
    phases=None,
) -> list:
    """Every case of a kernel exercise; a list of CaseResult.  ``launch`` runs the kernel
    on the judge's buffers: in this process by default, in the grading measurer when a class
    is graded (``session.py`` passes one that asks the measurer).  ``first_failure``: stop
    after the first failed case (the verdict is already "not passed"; the course's own
    tests use it for their mutants).  ``shared``: take each case's inputs and reference
    from the run's store (``preps.py``: a class graded with one seed makes them once).
    ``phases``: a grading judge's ``Phases``, given the inputs', the first launch's and the
    checks' seconds (``phases.ORDER``)."""
    limit = time_limit or TIME_LIMIT_S[runtime.MODE]
    results: list[CaseResult] = []
    for i, case in enumerate(hidden_mod.all_cases(spec, hidden)):
        if first_failure and results and not results[-1].passed:
            break
        if any(r.timed_out for r in results):
            # A kernel that hung once hangs again; on a GPU the context is still busy.
            results.append(skipped(case))
            continue
        make = _maker(spec, case, seed, i, shared)
        try:
            results.append(run_case(spec, fn, case, make, limit, launch, phases, first=not i))
        except KeyboardInterrupt:  # Stop: no further case runs (launch.py ended it)
            raise Interrupted(results) from None
    return results


def _maker(spec, case, seed: int, i: int, shared: bool):
    """A function making case ``i``'s ``judge.Prepared`` (its inputs depend on the seed and
    ``i``); ``shared``: taken from the run's store (``preps.py``) under that key."""
    rng_of = functools.partial(hidden_mod.case_rng if case.hidden else case_rng, seed, i)
    if shared:
        from . import preps

        return functools.partial(preps.prepare, spec, case, (case.hidden, seed, i), rng_of)
    return functools.partial(_prepare, spec, case, rng_of)


def _prepare(spec, case, rng_of) -> judge.Prepared:
    return judge.prepare(spec, case, rng_of())


def case_rng(seed: int, i: int) -> np.random.Generator:
    """The inputs of case ``i`` depend on the seed and ``i`` only (replayable)."""
    return np.random.default_rng([seed, i])


def measured_rng(seed: int) -> np.random.Generator:
    """The inputs of a tune exercise's measured launch (a stream no case uses)."""
    return np.random.default_rng([seed, 1 << 20])


def skipped(case) -> CaseResult:
    res = CaseResult(case.name, case.launch, hidden=case.hidden)
    res.fail("skipped: an earlier case hit the time limit")
    return res


def run_case(
    spec, fn, case, make, time_limit: float, launch=run_launch, phases=None, first=False
) -> CaseResult:
    """Run one case (with its repeats) and return its result; never raises for the kernel.
    ``make``: a function that makes the case's ``judge.Prepared``; ``phases`` and
    ``first`` (the exercise's first case: its launch compiles): see :func:`run_cases`."""
    res = CaseResult(case.name, case.launch, hidden=case.hidden)

    def timed(name: str):
        return phases.timed(name) if phases is not None else contextlib.nullcontext()

    try:
        with timed("cases: inputs"):
            prep = make()
    except Exception as exc:  # noqa: BLE001 - a broken spec must still report
        res.fail(spec_broken(exc))
        return res
    for rep in range(max(1, case.repeats)):
        with timed("cases: first launch" if first and not rep else "cases: launches"):
            returned, error, timed_out = launch(
                spec, fn, prep.staged(case), time_limit, race_hunt=rep > 0
            )
        with timed("cases: judge check"):
            msg = error or judge.judge(spec, case, prep, returned, rep)
        if msg:
            res.fail(msg, timed_out=timed_out)
            return res
    return res


def gate_error(spec, unit: dict, seed: int, compiler=None, shared: bool = False) -> str | None:
    """None when ``unit`` compiles for the course's GPUs with the types of the exercise's
    first launch; else the sentence the check shows.  ``compiler``: the grader's sandboxed
    gate for this submission (``session.py``); this process's own gate by default.
    ``shared``: the first case's inputs from the run's store, as :func:`run_cases` takes
    them (``preps.py``)."""
    from types import SimpleNamespace

    from ..source.unit import constants
    from ..wall.gate import GateFailed, GateUnavailable, gate, launch_types
    from ..wall.launch import views_of

    kernel = SimpleNamespace(py_func=SimpleNamespace(__globals__=constants(unit)))
    cases = hidden_mod.all_cases(spec, False) or hidden_mod.all_cases(spec, True)
    if not cases and spec.kind != "tune":
        return None  # nothing will be launched
    case = cases[0] if cases else spec.measured_case()
    try:
        if cases and not case.hidden:  # run_cases' first case, made as it makes it
            prep = _maker(spec, case, seed, 0, shared)()
        else:
            prep = judge.prepare(spec, case, case_rng(seed, 0))
        _dev, views = views_of(prep.staged(case))
        calls = launch_types(spec, kernel, case, views)
    except Exception as exc:  # noqa: BLE001 - a broken spec must still report
        return spec_broken(exc)
    try:
        why = (compiler or gate()).check(unit, calls)
    except GateFailed as exc:
        return str(exc)
    except GateUnavailable as exc:
        return (
            f"the GPU compiler could not be started, so the kernel could not be checked "
            f"({exc}); reinstall with `pip install -e .` (numba-cuda[cu12])"
        )
    if why is None:
        return None
    return f"your kernel does not compile for a GPU (numba-cuda, {_targets()}): {why}"


def _targets() -> str:
    from ..wall.gate import TARGETS

    return ", ".join(f"sm_{a}{b}" for a, b in TARGETS)


def judge_measured(
    spec,
    case,
    prep,
    returned: dict,
    figures: dict,
    mode=None,
    ceilings=None,
    plan=None,
    samples=None,
    counted=None,
    profiled: bool = False,
) -> CaseResult:
    """The target's verdict, or no figure when any run's outputs are wrong: the last run's
    arrays (``returned``) whole, every run's ``samples`` against ``plan`` (``sampled.py``),
    or a figure past this GPU's ceilings (``Tune.judge_figures``).  On a GPU the target is
    a speed-up over the given kernel, which the judge times itself (``starter.py``);
    ``counted``: the simulator's verdict where the card hides the lesson (``tune_cards``);
    ``profiled``: a launch run for a profiler (``gpu_count.py``) - right outputs pass here."""
    mode = mode or runtime.MODE
    wrong = None
    if plan is not None:  # every run's samples, earliest first
        timed = figures.get("runs", 0) if isinstance(figures.get("runs"), int) else 0
        wrong = plan.wrong(
            spec,
            case,
            prep,
            samples or {},
            at_least=1 + plan.sim_runs if mode == "sim" else timed + 2,
        )
    if not wrong and (wrong := judge.judge(spec, case, prep, returned)):
        wrong = f"no figure: the measured launch ({case.name}) gave wrong results - {wrong}"
    if wrong:
        res = CaseResult(TIMED, case.launch, timed=True)
        res.fail(wrong)
        return res
    if profiled:
        return CaseResult(TIMED, case.launch, timed=True)
    if mode == "gpu":  # the given kernel's time, the GPU target's denominator
        from .starter import StarterFailed, with_starter

        try:
            ceilings = with_starter(spec, ceilings)
        except StarterFailed as exc:
            return measure_failed(f"the given kernel could not be timed ({exc})")
    res = spec.judge_figures(figures, mode, ceilings, counted)
    if res.figures is None:  # {}: a figure past the ceiling, nothing to grade or rank
        res.figures = {
            k: float(v)
            for k, v in figures.items()
            if isinstance(v, numbers.Real) and not isinstance(v, bool)
        }
    return res


def measure_failed(why: str) -> CaseResult:
    res = CaseResult(TIMED, "", timed=True)
    res.fail(f"the measured launch failed: {why[:300]}")
    return res


def spec_broken(exc) -> str:
    return f"the exercise spec itself failed ({type(exc).__name__}: {exc}); tell your instructor"
