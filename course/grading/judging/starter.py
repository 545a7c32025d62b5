"""The given kernel of a tune exercise, timed by the judge: the denominator of its GPU target.

A tune exercise's GPU target is a speed-up over the kernel the student copy gives
(``course/exercises/tune_cards.py``).  That kernel is timed here, by the same loop as the
student's (``measurer.measure_launch``: every run restored and poisoned, its outputs
sampled against a seed only this side knows, the last run judged whole, the tails checked),
on the same card, in the same process run, with this GPU's measuring lock held - and never
by a process that holds anything of a student's:

- when a class is graded, the judge times every starter before any worker starts
  (:func:`time_all`, called where the ceilings are measured), so no submission's launch
  can run beside it and slow it down (a slower starter would make every kernel look
  faster);
- in a notebook, ``course.check`` times it in the notebook's process the first time a
  tune exercise is measured (there a student can only fool themselves);
- a starter whose runs come back wrong gives no time, and the check says so (the course's
  fault, not the student's).

The starter's time is cached per process and device; ``Tune.starter_floor`` caps what a
noisy time could add (``tune_cards.starter_cap_ms``).
"""

from __future__ import annotations

from ...platform import runtime
from . import judge

SEED = 20_26  # the starter's inputs: fixed, so one timing serves every student of a run
_TIMED: dict = {}  # (device, exercise) -> the starter's figures


class StarterFailed(RuntimeError):
    """The given kernel could not be timed (wrong results, a GPU error): no target."""


def with_starter(spec, ceilings: dict | None) -> dict | None:
    """``ceilings`` plus the device's name and the given kernel's figures (``"starter"``),
    for a tune exercise with a speed-up target on a GPU; else ``ceilings`` unchanged."""
    if runtime.MODE != "gpu" or not getattr(spec, "speedup", 0):
        return ceilings
    if ceilings is None:
        from ...measure.perf import measured_ceilings

        ceilings = measured_ceilings()
    device = runtime.device_name()
    return dict(ceilings, device=device, starter=starter_figures(spec, device))


def counted_here(spec) -> bool:
    """True on a GPU whose memory hides what ``spec`` changes: the simulator's count decides
    (``tune_cards.counted``; the measured launch is counted too, ``count_in_simulator``)."""
    from ...exercises.tune_cards import counted

    return runtime.MODE == "gpu" and counted(spec, runtime.device_name())


def timed_so_far() -> list:
    """[device, exercise, figures] of every starter timed in this process (plain data)."""
    return [[d, n, f] for (d, n), f in _TIMED.items()]


def keep_timed(rows) -> None:
    """Take starters timed by another process of the run on this GPU (``timed_so_far``)."""
    _TIMED.update({(d, n): f for d, n, f in rows})


def starter_figures(spec, device: str, measure=None) -> dict:
    """The given kernel's judged figures on ``device``, timed once per process."""
    key = (device, spec.name)
    if key not in _TIMED:
        _TIMED[key] = time_starter(spec, measure)
    return _TIMED[key]


def time_all(names=None) -> dict:
    """Time the starter of every tune exercise (``names``: only those) now; {name: ms}."""
    from ...exercises import all_exercises

    device = runtime.device_name()
    out = {}
    for name, spec in all_exercises().items():
        if getattr(spec, "speedup", 0) and (names is None or name in names):
            out[name] = starter_figures(spec, device)["ms"]
    return out


def time_starter(spec, measure=None) -> dict:
    """Time and judge the given kernel of ``spec`` at its GPU case; its figures.

    ``measure``: ``(spec, kernel, staged, sample) -> (figures, arrays, samples,
    trespass)``, the measurer's ``measure_launch`` by default (the tests pass a stand-in)."""
    import numpy as np

    from ...exercises.starters import STARTERS
    from ...platform.gpu_lock import device_lock
    from .sampled import plan

    if measure is None:
        from ..wall.measurer import measure_launch as measure
    kernel = STARTERS[spec.name]
    case = spec.measured_case("gpu")
    rng = np.random.default_rng([SEED, 1 << 20])  # as cases.measured_rng(SEED)
    prep = judge.prepare(spec, case, rng, guard=False)
    p = plan(spec, prep)
    try:
        with device_lock(runtime.MODE == "gpu"):
            figures, returned, samples, trespass = measure(
                spec, kernel, prep.staged(case), dict(p.request(), domains=p.domains)
            )
    except Exception as exc:  # noqa: BLE001 - a sentence, never a traceback
        raise StarterFailed(f"{type(exc).__name__}: {exc}") from None
    runs = figures.get("runs", 0) if isinstance(figures.get("runs"), int) else 0
    at_least = runs + 2 if runtime.MODE == "gpu" else 1 + p.sim_runs  # as judge_measured
    wrong = (
        trespass
        or p.wrong(spec, case, prep, samples, at_least=at_least)
        or judge.judge(spec, case, prep, returned)
    )
    if wrong:
        raise StarterFailed(f"the given kernel's timed runs were judged wrong: {wrong}")
    if not isinstance(figures.get("ms"), float) or not figures["ms"] > 0:
        raise StarterFailed(f"the given kernel's runs gave no time ({figures.get('ms')!r})")
    return dict(figures)
