"""Grading one submission: the trusted side (the *judge*) of two conversations.

The grader's own process keeps everything a verdict depends on: the seed, every case's
inputs and float64 reference, the list of cases (public and hidden), the ceilings GPU
figures are divided by, and the comparison (``judge.py``).  It talks to two processes it
started, one request at a time, over pipes this side owns:

- the **worker** (``worker.py``) runs the student's cells.  It answers ``run cell i`` with
  whether the cell failed and, for an exercise, the kernel it defined *as data* (a unit,
  ``unit.py``: source text and constant values) or the answer of a predict exercise;
- the **measurer** (``measurer.py``) runs only that kernel, rebuilt from its unit after it
  compiled for a real GPU (``gate.py``): every case's launch, and a tune exercise's measured
  launch (with this GPU's measuring lock held here, and its outputs judged too): the
  requests and the checks of their replies are ``measurer_calls.py``.

So no figure, output or answer is computed where a student's statement ran.  Whatever the
worker sends out of turn, malformed, or not at all ends the conversation: a reply that does
not fit is *tampering* (the exercise in progress gets 0 points and the instructor a note),
silence past the time limit is a *timeout*, a dead worker a *crash*.  A measurer that dies
costs only the exercise it was measuring.  Both run in the sandbox (``wall/isolate.py``);
a GPU that hides what a tune exercise changes gets a second measurer, in the simulator,
and a third that reads the GPU's own counters (``gpu_count.py``): both counts decide too.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ... import exercises as _ex
from ..phases import Phases
from ..wall.child import Child, Tampered
from ..wall.wire import WireError
from .cases import gate_error, run_cases
from .gpu_count import counted_verdict
from .measurer_calls import SIM_ENV, judge_measure, measured_launch, sandbox_mb
from .report import CaseResult, CellError, Judged, Started, Tampering
from .settings import GradeSettings
from .starter import counted_here

if TYPE_CHECKING:
    from ..wall.gate import Gate


@dataclass
class Outcome:
    """What grading one submission produced (all of it decided on this side)."""

    events: list = field(default_factory=list)  # Started, CellError, Judged, Tampering
    status: str = "graded"  # graded | timeout | crashed | tampered
    last: str = ""  # last words of a crashed worker
    mode: str = ""  # the worker's, once it greeted: sim | gpu
    phases: Phases = field(default_factory=Phases)  # where its time went (``phases.py``)


@dataclass(frozen=True)
class Ran:
    """The worker's reply to ``run``, checked: the cell's error text (or None) and, when the
    step is an exercise's, what the cell defined under the function's name (``have``:
    kernel | value | missing | other) with the kernel's unit (data) or why it has none."""

    error: str | None
    have: str | None
    unit: object = None
    unit_error: object = None

    @classmethod
    def read(cls, reply: dict, fn: str | None) -> Ran:
        """The reply as a Ran, or Tampered when it does not fit the request."""
        error, have = reply.get("error"), reply.get("have")
        if error is not None and not isinstance(error, str):
            raise Tampered("a cell's error message was not text")
        if fn and have not in ("kernel", "value", "missing", "other"):
            raise Tampered(f"the worker did not say whether `{fn}` is defined")
        return cls(error, have, reply.get("unit"), reply.get("unit_error"))


@dataclass
class Judge:
    """What every exercise of one submission is judged with (all of it on this side)."""

    settings: GradeSettings  # the run's seed, mode, limits and ceilings
    start_measurer: Callable[[], Child]  # a started Child running measurer.py
    start_gate: Callable[[], Child] | None = None  # ... running gate.py (sandboxed)
    start_counter: Callable[[], Child] | None = None  # a measurer in the simulator
    start_gpu_counter: Callable[[], Child] | None = None  # ... under Nsight Compute
    measurer: Child | None = None
    compiler: Gate | None = None  # this submission's compile gate
    on_stage: Callable[[str], None] | None = None  # "testing", then "timing"
    deadline: float = float("inf")  # time.monotonic() when the submission's time is up
    phases: Phases = field(default_factory=Phases)

    @property
    def seed(self) -> int:
        return self.settings.seed

    @property
    def mode(self) -> str:
        return self.settings.mode

    def stage(self, name: str) -> None:
        if self.on_stage is not None:
            self.on_stage(name)

    def ready_measurer(self):
        """The submission's measurer: started on the first kernel exercise, kept for the
        next one (it rebuilds each exercise's unit in place of the last), started afresh
        after one whose kernel hung or broke it."""
        if self.measurer is None:
            self.measurer = self.start_measurer()
            self.measurer.greeted()
        return self.measurer

    def measure(self, m: Child, spec, load: dict | None = None) -> CaseResult:
        """A tune exercise's measured launch by measurer ``m``, judged with this
        submission's seed, deadline and ceilings (``measurer_calls.judge_measure``); on a
        GPU that hides what it changes, counted too (``load``: the kernel; ``gpu_count.py``)."""
        counted = None  # the counts, made only if the time passes (``tune_cards.with_count``)
        if self.mode == "gpu" and counted_here(spec) and self.start_counter and load:
            starts = (self.start_counter, self.start_gpu_counter, spec, load, self.seed)
            counted = partial(counted_verdict, *starts, self.deadline, strict=True)
        return judge_measure(
            m,
            spec,
            mode=self.mode,
            seed=self.seed,
            deadline=self.deadline,
            ceilings=self.settings.ceilings,
            phases=self.phases,
            shared=self.settings.shared_inputs,
            counted=counted,
        )

    def close_measurer(self):
        if self.measurer is not None:
            self.measurer.stop()
            self.measurer = None

    def gate(self):
        """This submission's compile gate: its own compiler process, in the sandbox, inside
        the submission's deadline (restarted by the Gate after any failure)."""
        if self.compiler is None:
            from ..wall.gate import Gate

            self.compiler = Gate(start=self.start_gate)
        return self.compiler

    def close(self):
        self.close_measurer()
        if self.compiler is not None:
            self.compiler.close()
            self.compiler = None


def grade_steps(steps: list[dict], settings: GradeSettings, on_stage=None) -> Outcome:
    """Run ``steps`` (from ``batch.make_steps``) in a worker and judge every exercise."""
    out = Outcome()
    s = settings
    deadline = time.monotonic() + s.timeout
    run_dir = s.isolation.run_dir if s.isolation is not None else None
    with tempfile.TemporaryDirectory(prefix="course-grade-", dir=run_dir) as name:
        tmp = Path(name)
        worker = Child(
            "course.grading.wall.worker",
            tmp / "worker",
            deadline,
            s.memory_mb,
            s.timeout,
            s.isolation,
        )
        worker.phases = out.phases
        jd = _new_judge(
            s, tmp, deadline, on_stage, sandbox_mb(step.get("exercise") for step in steps)
        )
        jd.phases = out.phases
        try:
            worker.greeted()
            out.mode = s.mode
            for n, step in enumerate(steps):
                _run_step(worker, jd, n, step, out)
            worker.chan.send({"op": "bye"})
            worker.finish()
        except WireError as exc:
            if not (exc.timed_out or exc.closed):
                _tampered(out, str(exc))
            else:
                out.status = "timeout" if exc.timed_out else "crashed"
                if exc.closed:
                    worker.settle()
            worker.stop()
            out.last = worker.last_words()
        except Tampered as exc:
            _tampered(out, str(exc))
        finally:
            worker.stop()
            jd.close()
    return out


def _new_judge(
    s: GradeSettings, tmp: Path, deadline: float, on_stage=None, memory: int | None = None
) -> Judge:
    """A Judge whose measurers and compile gate start in their own folders under ``tmp``,
    in the sandbox, with the submission's deadline."""
    from ..wall.counter import COUNTER, ncu_env
    from ..wall.gate import start_sandboxed

    def timed(child: Child) -> Child:
        child.phases = jd.phases  # its start and imports: phases of their own
        return child

    def measurer(prefix="measurer-", env=None, m="course.grading.wall.measurer") -> Child:
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=tmp)) / "m"
        return timed(Child(m, folder, deadline, *limits, s.isolation, memory, env))

    limits = (s.memory_mb, s.timeout)
    jd = Judge(
        s,
        measurer,
        start_gate=lambda: timed(start_sandboxed(tmp, deadline, *limits, s.isolation)),
        start_counter=lambda: measurer("counter-", SIM_ENV),
        start_gpu_counter=lambda: measurer("gpu-counter-", ncu_env(), COUNTER),
        on_stage=on_stage,
        deadline=deadline,
    )
    return jd


def judge_unit(spec, unit: dict, settings: GradeSettings, on_stage=None):
    """(error, case results) of a kernel that arrived as a unit (data: the leaderboard's
    ``course.submit``): no student statement to run, so no worker; the gate, then the
    measurer runs every case and, for a tune exercise or board, the measured launch."""

    def run(jd):
        try:
            return _judge_kernel(jd, spec, unit, None)
        except Tampered as exc:
            return f"the kernel unit is malformed ({exc})", []

    return _alone(spec, settings, run, on_stage)


def judge_entry(spec, name: str, settings: GradeSettings, on_stage=None):
    """(error, case results) of one of the course's own kernels entered on a board by the
    instructor (``exercises/entries.py``): the same cases, measured launch and judging as a
    unit, in the same measurer; it carries a name, not code, so there is nothing to gate."""
    return _alone(
        spec,
        settings,
        lambda jd: _run_loaded(
            jd, spec, {"op": "load", "entry": name}, f"the course kernel {name} cannot run here"
        ),
        on_stage,
    )


def _alone(spec, s: GradeSettings, run, on_stage=None) -> tuple[str, list]:
    """``run(judge)`` with a judge of its own (no grading worker), its measurer closed after."""
    deadline = time.monotonic() + s.timeout
    run_dir = s.isolation.run_dir if s.isolation is not None else None
    with tempfile.TemporaryDirectory(prefix="course-judge-", dir=run_dir) as tmp:
        jd = _new_judge(s, Path(tmp), deadline, on_stage, sandbox_mb([spec.name]))
        try:
            return run(jd)
        finally:
            jd.close()


def _tampered(out: Outcome, message: str) -> None:
    out.status = "tampered"
    current = next((e.exercise for e in reversed(out.events) if isinstance(e, Started)), None)
    out.events.append(Tampering(current, message))


def _run_step(worker, jd: Judge, n: int, step: dict, out: Outcome) -> None:
    ex, fn = step.get("exercise"), step.get("function") or ""
    out.events.append(Started(step["label"], ex))
    with out.phases.timed("cells"):
        reply, _ = worker.ask(
            {
                "op": "run",
                "step": n,
                "label": step["label"],
                "source": step["source"],
                "want": fn,
                "exercise": ex,
            },
            "ran",
            n,
        )
    ran = Ran.read(reply, fn if ex else None)  # what the worker says, checked
    if ran.error:
        out.events.append(CellError(step["label"], step["kind"], ex, ran.error[:500]))
    if not ex:
        return
    spec = _ex.get(ex)
    if ran.have == "missing":
        out.events.append(
            Judged(
                ex,
                f"your {ex} cell does not define `{fn}`"
                if not ran.error
                else f"`{fn}` was not defined because the cell failed: {ran.error}",
            )
        )
        return
    err, cases = "", []
    if spec.kind == "predict":
        with out.phases.timed("cases"):
            cases = _judge_answer(worker, n, spec, fn)
    elif ran.have != "kernel":
        err = f"`{fn}` is not a CUDA kernel: decorate it with @cuda.jit (expected {spec.signature})"
    else:
        err, cases = _judge_kernel(jd, spec, ran.unit, ran.unit_error)
    out.events.append(Judged(ex, err, cases))


def _judge_kernel(jd: Judge, spec, unit, unit_error) -> tuple[str, list]:
    """(error, cases) of a kernel exercise: gate, then every case and the target, all
    launched by a measurer that runs nothing but the rebuilt kernel."""
    from ..source.unit import UnitError, validate

    if isinstance(unit_error, str):
        return f"your kernel cannot be checked: {unit_error[:500]}", []
    try:
        validate(unit)
    except UnitError as exc:
        raise Tampered(f"the worker sent a malformed kernel unit ({exc})") from None
    try:
        with jd.phases.timed("compile gate"):
            why = gate_error(spec, unit, jd.seed, jd.gate(), jd.settings.shared_inputs)
    except UnitError as exc:
        return f"your kernel cannot be checked: {exc}", []
    if why:
        return why, []
    return _run_loaded(jd, spec, {"op": "load", "unit": unit}, "your kernel cannot be checked")


def _run_loaded(jd: Judge, spec, load: dict, cannot: str) -> tuple[str, list]:
    """(error, cases): the measurer loads the kernel (``load``), runs every case and, for a
    tune exercise or board, the measured launch."""
    try:
        with jd.phases.timed("kernel load"):
            m = jd.ready_measurer()
            reply, _ = m.ask(load, "loaded")
        if reply.get("error"):
            return f"{cannot}: {str(reply['error'])[:500]}", []
        jd.stage("testing")
        with jd.phases.timed("cases"):
            launch = measured_launch(m)
            cases = run_cases(
                spec,
                None,
                jd.seed,
                True,
                jd.settings.limit,
                launch=launch,
                shared=jd.settings.shared_inputs,
                phases=jd.phases,
            )
        if spec.kind == "tune" and cases and all(c.passed for c in cases):
            jd.stage("timing")
            with jd.phases.timed("timed runs"):
                cases.append(jd.measure(m, spec, load))
    except (WireError, Tampered) as exc:
        if jd.measurer and getattr(exc, "closed", False):
            jd.measurer.settle()  # its own end (a signal), not the SIGKILL of closing it
        last = jd.measurer.last_words() if jd.measurer else ""
        jd.close_measurer()
        if getattr(exc, "timed_out", False) or time.monotonic() >= jd.deadline - 1:
            return (
                "not judged: it ran past the time limit for a submission (its tests and "
                "timed launches did not finish in time)"
            ), []
        return (
            f"the kernel broke the process that measures it ({exc}"
            + (f"; {last}" if last else "")
            + ")"
        ), []
    if any(c.timed_out for c in cases):
        jd.close_measurer()  # a hung kernel may still hold the GPU: start afresh
    return "", cases


def _judge_answer(worker, n: int, spec, name: str) -> list:
    reply, _ = worker.ask({"op": "value", "step": n, "name": name}, "value", n)
    if reply.get("defined") is not True:
        raise Tampered("the worker lost a name it said was defined")
    if "unreadable" in reply:
        res = CaseResult("your answer", "-")
        res.fail(f"`{name}` holds a {reply['unreadable']}, not a number, a string or a list")
        return [res]
    from ..hidden import answers_for

    return spec.judge_answer(reply.get("value"), answers_for(spec))
