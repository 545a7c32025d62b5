"""``course.check(exercise, answer)``: run a student's kernel (or answer) against a spec.

This is the notebook's face of checking: the kernel is rebuilt from its unit and gated
(:func:`admit`), then every case runs in this process through the case engine
(``cases.py``: fresh seeded inputs, poisoned and guarded outputs, a time limit, every
output compared with the float64 reference, repeats that hunt races), and the result is
shown as a table (``report.py``) and recorded (``progress.py``).  The grader stands on the
same engine (``session.py``), with the launches in a sandboxed measurer.

A ``predict`` exercise takes the student's answer instead of a kernel, and the spec computes
the right one (``spec.judge_answer`` in ``course/exercises/predict.py``); a ``tune``
exercise, once every case passes, measures one launch against its target
(``course/exercises/tune.py``).

It never raises because the kernel is wrong, crashes, hangs or writes out of bounds:
everything becomes a failed case with a message.
"""

from __future__ import annotations

import html
import secrets
import time

from ... import exercises as _ex
from ...platform import runtime
from .. import hidden as hidden_mod
from ..messages import course_sentence
from ..source.unit import not_a_kernel
from ..wall.launch import Interrupted
from . import judge
from .cases import gate_error, judge_measured, measure_failed, measured_rng, run_cases
from .report import CaseResult, CheckResult
from .starter import counted_here

compare = judge.compare  # the comparison, also used by the exercise specs' own tests


def check(
    exercise: str,
    fn,
    *,
    hidden: bool = False,
    seed: int | None = None,
    time_limit: float | None = None,
    record: bool = True,
) -> CheckResult:
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
        if spec.kind == "predict" and (key := hidden_mod.answers_for(spec)) is None:
            results = spec.record_answer(fn)  # type: ignore[attr-defined]  # a Predict spec
            answered = Answered(exercise, False, runtime.MODE, seed, spec=spec, cases=results)
            answered.elapsed_s = time.perf_counter() - started
            return _recorded(answered, record)
        if spec.kind == "predict":
            results = spec.judge_answer(fn, key)  # type: ignore[attr-defined]
        else:
            error = not_a_kernel(fn, spec) or ""
            if not error:
                kernel, error = admit(spec, fn, seed)
                error = course_sentence(error, fn, spec)
                fn = kernel
            results = [] if error else run_cases(spec, fn, seed, hidden, time_limit)
        if spec.kind == "tune" and results and all(r.passed for r in results):
            results.append(measure(spec, fn, seed))  # correct first; then the target
    except KeyboardInterrupt as exc:  # Stop: report what ran, record nothing
        done = exc.results if isinstance(exc, Interrupted) else results
        return CheckResult(
            exercise,
            False,
            runtime.MODE,
            seed,
            spec=spec,
            cases=done,
            elapsed_s=time.perf_counter() - started,
            hidden_run=hidden,
            interrupted=True,
        )
    result = CheckResult(
        exercise,
        bool(results) and not error and all(r.passed for r in results),
        runtime.MODE,
        seed,
        spec=spec,
        cases=results,
        error=error,
        elapsed_s=time.perf_counter() - started,
        hidden_run=hidden,
    )
    return _recorded(result, record)


def _recorded(result: CheckResult, record: bool) -> CheckResult:
    if record:
        from .progress import record as record_progress

        record_progress(result)
    return result


class Answered(CheckResult):
    """A predict check in a copy with no answer key (a student's): the answers are recorded
    for grading, neither passed nor failed (``.passed`` is False, ``.answered`` says whether
    every question has an answer the grader can judge); the spec's ``experiment`` says
    where the notebook lets the student see for themselves."""

    @property
    def answered(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases)

    def _headline(self) -> str:
        mode = "GPU" if self.mode == "gpu" else "simulator"
        ok = sum(c.passed for c in self.cases)
        said = (
            "recorded for grading: this copy has no answer key, so your instructor's grader "
            "scores the answers"
            if self.answered
            else f"{len(self.cases) - ok} still need an answer the grader can judge (below)"
        )
        seen = getattr(self.spec, "experiment", "")
        see = f"; to see for yourself, {seen}" if seen and self.answered else ""
        return (
            f"{self.exercise}: {ok} of {len(self.cases)} questions answered ({mode}) - {said}{see}."
        )

    def __repr__(self) -> str:
        lines = [f"[{'ANSWERED' if self.answered else 'INCOMPLETE'}] {self._headline()}"]
        for c in self.cases:
            lines.append(f"  {'answered' if c.passed else 'FAIL    '} {c.name}")
            if not c.passed:
                lines.append(f"       -> {c.message}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        color, bg = ("#0b5cad", "#eef5fc") if self.answered else ("#b42318", "#fff1f0")
        rows = "".join(
            f"<tr><td>{html.escape(c.name)}</td><td>"
            + (
                "<span style='color:#0b5cad'>answered</span>"
                if c.passed
                else f"<span style='color:#b42318'><b>fail</b></span> {html.escape(c.message)}"
            )
            + "</td></tr>"
            for c in self.cases
        )
        return (
            f"<div class='course-check' data-passed='false' data-answered="
            f"'{str(self.answered).lower()}' style='border:2px solid {color};background:{bg};"
            f"padding:6px 10px;border-radius:6px'><div style='color:{color};font-weight:"
            f"bold'>&#9998; {html.escape(self._headline())}</div><table style='border-"
            f"collapse:collapse;font-size:90%'>{rows}</table></div>"
        )


def admit(spec, fn, seed: int):
    """(the kernel rebuilt from its unit, "") or (None, why it cannot be checked).

    What a check runs is what a grader runs: the kernel's unit (``unit.py``) rebuilt in a
    fresh namespace, after it compiled for a real GPU (``gate.py``).  Nothing else a cell
    did travels with it."""
    from ..source.unit import UnitError, extract, rebuild

    try:
        unit = extract(fn, spec.launch_names)
        kernel = rebuild(unit)
    except UnitError as exc:
        return None, f"your kernel cannot be checked: {exc}"
    return (kernel, "") if not (why := gate_error(spec, unit, seed)) else (None, why)


def measure(spec, fn, seed: int) -> CaseResult:
    """A tune exercise's measured launch against its target (``course/exercises/tune.py``);
    every run's outputs are judged (sampled, ``sampled.py``) and the last run's whole, so
    a kernel that skips work on any run gets no figure."""
    from ...platform.gpu_lock import device_lock
    from ..wall.measurer import measure_launch
    from .sampled import plan

    case = spec.measured_case()
    try:
        prep = judge.prepare(spec, case, measured_rng(seed), guard=False)
        p = plan(spec, prep)
        with device_lock(runtime.MODE == "gpu"):
            figures, returned, samples, trespass = measure_launch(
                spec, fn, prep.staged(case), dict(p.request(), domains=p.domains)
            )
    except Exception as exc:  # noqa: BLE001 - the report, never a traceback
        return measure_failed(f"{type(exc).__name__}: {exc}")
    if trespass:
        return measure_failed(trespass)
    counted = (lambda: _count(spec, fn, seed)) if counted_here(spec) else None  # if the time passes
    return judge_measured(
        spec, case, prep, returned, figures, plan=p, samples=samples, counted=counted
    )


COUNT_S = 300.0  # the simulator's count of one kernel, its start included


def _count(spec, fn, seed: int) -> CaseResult:
    """The counted verdict on ``fn`` where this GPU hides what ``spec`` changes
    (``starter.counted_here``): the simulator's, by a measurer of its own in simulator mode,
    and the GPU's own counters, by one under Nsight Compute (``gpu_count.py``), as the
    grader starts them (a notebook's: no sandbox, in a temporary folder; counters that
    cannot be read here are said, and the simulator's count decides)."""
    import tempfile
    from pathlib import Path

    from ..source.unit import UnitError, extract
    from ..wall.child import Child
    from ..wall.counter import COUNTER, ncu_env
    from .gpu_count import counted_verdict
    from .measurer_calls import SIM_ENV

    try:
        load = {"op": "load", "unit": extract(fn, spec.launch_names)}
    except UnitError as exc:
        return measure_failed(f"the simulator cannot count this kernel: {exc}")
    deadline = time.monotonic() + COUNT_S
    with tempfile.TemporaryDirectory(prefix="course-count-") as tmp:

        def child(module: str, name: str, env: dict) -> Child:
            return Child(module, Path(tmp) / name, deadline, 0, COUNT_S, None, None, env)

        sim = lambda: child("course.grading.wall.measurer", "m", SIM_ENV)  # noqa: E731
        gpu = lambda: child(COUNTER, "g", ncu_env())  # noqa: E731
        try:
            return counted_verdict(sim, gpu, spec, load, seed, deadline, strict=False)
        except Exception as exc:  # noqa: BLE001 - the report, never a traceback
            return measure_failed(f"the count failed: {type(exc).__name__}: {exc}")
