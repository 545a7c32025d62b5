"""What the judge asks the measurer (``measurer.py``), and how it checks the replies.

Two requests: a case's launch (:func:`measured_launch`, the ``launch`` that
``cases.run_cases`` calls: the kernel runs on the judge's buffers) and a tune exercise's
measured launch (:func:`judge_measure`: inputs made here, outputs sampled against a seed
only this side knows, timed with this GPU's measuring lock held).  A reply that brings back
anything that was not sent is tampering (``child.Tampered``).  The conversation around them,
and everything else a verdict depends on, is ``session.py``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext

from ... import exercises
from ..wall.child import Tampered
from ..wall.wire import allowed
from . import judge
from .cases import judge_measured, measure_failed, measured_rng
from .report import CaseResult


def measured_launch(m):
    """A ``launch`` for ``cases.run_cases``: the measurer runs the kernel on the judge's
    buffers; whatever comes back that was not sent is tampering."""

    def launch(spec, fn, staged, limit, race_hunt):
        header = {
            "op": "launch",
            "exercise": spec.name,
            "case": case_data(staged.case),
            "shapes": staged.shapes,
            "scalars": staged.scalars,
            "time_limit": limit,
            "race_hunt": race_hunt,
        }
        reply, arrays = m.ask(
            header, "launched", arrays=staged.buffers, expect=allowed(staged.buffers)
        )
        error = reply.get("error")
        if error:
            return {}, str(error)[:1000], reply.get("timed_out") is True
        same_arrays(arrays, allowed(staged.buffers))
        return arrays, None, False

    return launch


def case_data(case) -> dict:
    """What the measurer needs of a case to launch it: its name, parameters and geometry."""
    return {
        "name": case.name,
        "params": case.params,
        "grid": case.grid,
        "block": case.block,
        "shared_bytes": case.shared_bytes,
    }


def same_arrays(arrays: dict, sent: dict) -> None:
    """Tampering unless ``arrays`` are the buffers sent (``sent``: name -> (dtype, shape),
    ``wire.allowed``): the same names, shapes, dtypes."""
    if set(arrays) != set(sent) or any(
        arrays[k].shape != tuple(shape) or arrays[k].dtype != dtype
        for k, (dtype, shape) in sent.items()
    ):
        raise Tampered("a launch sent back other arrays than it was given")


MEASURE_S = 60.0  # seconds a measurement may hold this GPU's measuring lock


def judge_measure(
    m,
    spec,
    *,
    mode: str,
    seed: int,
    deadline: float,
    ceilings: dict | None,
    phases=None,
    shared: bool = False,
    counted: CaseResult | Callable[[], CaseResult] | None = None,
    profile: bool = False,
) -> CaseResult:
    """A tune exercise's figure: the measured launch's inputs made and its outputs judged
    here - every run's samples against a seed only this side knows, and the last run whole
    (``sampled.py``) - timed (GPU) with this machine's measuring lock held, the target and
    the ceilings applied here.  Three requests, so that the lock covers the GPU's work and
    not the pipes: ``stage`` (the inputs over, before the lock), ``measure`` (the runs, lock
    held, figures back) and ``collect`` (after the lock: the last run's arrays and every
    run's samples, which may be only what was sent plus the samples).  ``shared``: the
    inputs and reference from the run's store (``preps.py``); ``counted``: the simulator's
    verdict on the same kernel, for a card that hides the lesson (:func:`count_in_simulator`;
    a callable that makes it once the time passed, ``tune_cards.with_count``);
    ``profile``: one launch for a profiler, its outputs judged and nothing timed
    (``gpu_count.py``)."""
    from ...platform.gpu_lock import LockTimeout, device_lock
    from .sampled import plan

    def timed(name: str):
        return phases.timed(f"timed runs: {name}") if phases is not None else nullcontext()

    case = spec.measured_case(mode)
    with timed("judge prepare"):
        if shared:  # the class's one copy (``preps.py``)
            from . import preps

            prep = preps.prepare(spec, case, ("measured", seed), lambda: measured_rng(seed), False)
        else:
            prep = judge.prepare(spec, case, measured_rng(seed), guard=False)
        p = plan(spec, prep)
    with timed("inputs over"):  # before the lock: the pipe never holds the GPU
        staged, _ = m.ask(
            {
                "op": "stage",
                "exercise": spec.name,
                "case": case_data(case),
                "shapes": prep.shapes,
                "scalars": prep.scalars(),
                "sample": p.request(),
                "profile": profile,
            },
            "staged",
            arrays={**prep.buffers(fresh=False), **p.arrays()},  # only sent: no copies
        )
    if staged.get("error") is not None:
        return measure_failed(str(staged["error"]))
    waiting = time.perf_counter()
    try:
        with device_lock(mode == "gpu", deadline=deadline):
            if phases is not None:  # ``phases.Phases``: the wait is its own phase
                phases.moved("gpu lock wait", time.perf_counter() - waiting)
            # the lock is held at most MEASURE_S (a board's own budget where it asks for
            # more): a kernel slow only at the timed size cannot keep every other
            # submission's measurement waiting until its own deadline
            if mode == "gpu":
                m.chan.deadline = min(
                    deadline, time.monotonic() + max(MEASURE_S, spec.time_budget_s)
                )
            asked = time.perf_counter()
            reply, _ = m.ask({"op": "measure"}, "measured")
            if phases is not None:  # advisory: seconds moved between phases, nothing more
                took_steps(phases, reply.get("steps"), time.perf_counter() - asked)
            if mode == "gpu":
                m.chan.deadline = deadline
    except LockTimeout:
        return measure_failed("not judged: the GPU stayed busy past this submission's time limit")
    if reply.get("error") is not None:
        return measure_failed(str(reply["error"]))
    figures = reply.get("figures")
    if not isinstance(figures, dict):
        raise Tampered("a measurement came back without figures")
    with timed("outputs back"):  # after the lock: what the runs wrote, and the samples
        collected, arrays = m.ask({"op": "collect"}, "collected", expect=p.expect(prep))
    if collected.get("error") is not None:  # the runs wrote past an array, or no runs
        return measure_failed(str(collected["error"]))
    samples = {k[len("sample:") :]: arrays.pop(k) for k in list(arrays) if k.startswith("sample:")}
    same_arrays(arrays, prep.buffer_shapes())
    with timed("judge check"):
        return judge_measured(
            spec, case, prep, arrays, figures, mode, ceilings, p, samples, counted, profile
        )


SIM_ENV = {"NUMBA_ENABLE_CUDASIM": "1"}  # a measurer that counts in the simulator


def count_in_simulator(start, spec, load: dict, seed: int, deadline: float) -> CaseResult:
    """The simulator's verdict on the kernel ``load`` names (a unit, or a course entry) for
    a GPU whose memory hides what ``spec`` changes (``tune_cards.counted``): a measurer of
    its own, started by ``start()`` with :data:`SIM_ENV` (cold: a warm fork keeps its
    zygote's GPU mode), loads it and runs the small measured launch traced; its outputs
    are judged and the simulator target applied here, as on a laptop."""
    m = start()
    try:
        m.greeted()
        reply, _ = m.ask(load, "loaded")
        if reply.get("error"):
            return measure_failed(f"the simulator could not load the kernel: {reply['error']}")
        return judge_measure(m, spec, mode="sim", seed=seed, deadline=deadline, ceilings=None)
    finally:
        m.stop()


def took_steps(phases, value, waited: float) -> None:
    """The measurer's seconds per step of its measurement (``timed.Steps``), moved out of
    ``timed runs`` into its sub-phases - only where they are a dict of known steps to
    finite seconds, together within the ``waited`` seconds (``phases.steps``); anything
    else is ignored.  They never reach a verdict."""
    from ...exercises.timed import STEPS
    from ..phases import steps

    for name, seconds in steps(value, waited, STEPS).items():
        phases.moved(f"timed runs: {name}", seconds)


def sandbox_mb(names) -> int | None:
    """The measurer's memory budget (cgroup) for these exercises: the default, or more
    where an exercise's measured launch needs it (``memory_mb``: the attention board's
    2.7 GB of inputs and outputs, held several times over while they cross the pipe)."""
    need = [exercises.get(n).memory_mb for n in names if n]
    return max(need, default=0) or None
