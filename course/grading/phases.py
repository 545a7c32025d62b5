"""Where a grading run's time goes: seconds per phase, summed over a class.

Each submission's judge keeps a :class:`Phases` (``session.py``) and times its stages with
:meth:`Phases.timed`; the times are exclusive (a stage timed inside another is taken out of
the outer one), so a submission's phases add up to its wall time.  A child may say how long
its own imports took (the ``took`` of its greeting): :func:`reported` accepts only a finite
number of seconds within the submission's time, and the value only ever moves seconds
between two phases of the profile, never into a verdict; so do the seconds a measurer says
each step of a measurement took (:func:`steps`, moved out of ``timed runs``).  ``grade --profile FILE`` sums the
class's phases (``batch.py``), ``bench grading`` reports them.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

ORDER = (
    "sandbox start",  # a worker, measurer or gate made and greeted (cold: a new interpreter)
    "imports",  # what its children said their imports took
    "gpu warm-up",  # a GPU measurer's helper kernels compiled and run, before any lock
    "gpu warm-up: context",  # ... and its CUDA context made
    "notebook",  # the submission read, parsed, its cells found
    "cells",  # the student's cells run by the worker
    "compile gate",  # the kernel compiled for the GPU targets
    "kernel load",  # the measurer rebuilding the unit
    "cases",  # every public and hidden case: what its sub-phases do not cover
    "cases: inputs",  # each case's inputs and float64 reference made (or taken: preps.py)
    "cases: first launch",  # an exercise's first case there and back (the measurer compiles)
    "cases: launches",  # every other case's buffers to the measurer, launched, back
    "cases: judge check",  # what came back judged against the reference
    "gpu lock wait",  # waiting for this GPU's measuring lock
    "timed runs",  # a tune exercise's measured launch: what its sub-phases do not cover
    # (the requests' decoding, the replies' checks); its sub-phases: the judge's own first
    # and last two, the others what the measurer says its steps took (``timed.STEPS``)
    "timed runs: judge prepare",  # the inputs and the float64 reference made
    "timed runs: inputs over",  # the inputs piped to the measurer (before the lock)
    "timed runs: to device",  # the arrays, their pristine copies and tails to the device
    "timed runs: compile",  # the first (untimed, judged) run: the kernel's compile
    "timed runs: warm-up",  # the probe and the warm-up runs
    "timed runs: launches",  # the timed runs (restores, L2 flushes, launches)
    "timed runs: sampling",  # every run's samples gathered and brought back
    "timed runs: copies",  # the last run's arrays whole, the tails and pristine copies checked
    "timed runs: traced",  # simulator: the traced launch
    "timed runs: sim runs",  # simulator: the extra judged runs the tests ask for
    "timed runs: outputs back",  # the outputs and samples piped back (after the lock)
    "timed runs: judge check",  # the samples and the whole output judged
    "scoring",  # points, reasons
    "feedback",  # the feedback files (once, at the end of a run)
)


class Phases:
    """Seconds per phase of one submission (or, summed, of a class)."""

    def __init__(self, seconds: dict | None = None):
        self.seconds: dict[str, float] = dict(seconds or {})
        self._inner: list[float] = []  # per open timer: seconds taken by timers inside it

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, float(seconds))

    def moved(self, name: str, seconds: float) -> None:
        """``seconds`` of the innermost open timer belong to ``name`` instead."""
        self.add(name, seconds)
        if self._inner:
            self._inner[-1] += seconds

    @contextmanager
    def timed(self, name: str):
        self._inner.append(0.0)
        t = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - t
            inner = self._inner.pop()
            self.add(name, took - inner)
            if self._inner:
                self._inner[-1] += took

    def merge(self, other: dict) -> None:
        for k, v in other.items():
            if isinstance(k, str) and isinstance(v, (int, float)) and math.isfinite(v):
                self.add(k, v)

    def as_dict(self) -> dict:
        known = [k for k in ORDER if k in self.seconds]
        return {
            k: round(self.seconds[k], 4) for k in known + sorted(set(self.seconds) - set(ORDER))
        }


def reported(value, limit: float) -> float | None:
    """A child's own timing, if it is one: a finite number of seconds in [0, ``limit``]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0.0 <= value <= limit else None


def steps(value, limit: float, known) -> dict:
    """A measurer's seconds per step, if they are that: a dict of at most ``len(known)``
    ``known`` names to finite seconds in [0, ``limit``], together no more than ``limit``
    (the seconds the judge waited for them); anything else: {} (all of it ignored)."""
    if not isinstance(value, dict) or len(value) > len(known):
        return {}
    got = {k: reported(v, limit) for k, v in value.items() if isinstance(k, str) and k in known}
    if len(got) != len(value) or any(v is None for v in got.values()):
        return {}
    good = {k: float(v) for k, v in got.items() if v is not None}
    return good if sum(good.values()) <= limit else {}


def table(seconds: dict, wall: float, students: int, jobs: int) -> str:
    """A markdown table of a class's phases: seconds summed over the class, per student, and
    the share of the job slots' time (``wall`` x ``jobs``)."""
    slots = max(wall * max(1, jobs), 1e-9)
    rows = [
        "| phase | seconds (class) | per student | share of job-slot time |",
        "|---|---:|---:|---:|",
    ]
    for k, v in Phases(seconds).as_dict().items():
        rows.append(f"| {k} | {v:.1f} | {v / max(1, students):.2f} | {100 * v / slots:.0f}% |")
    total = sum(seconds.values())
    rows.append(
        f"| **all phases** | {total:.1f} | {total / max(1, students):.2f} | {100 * total / slots:.0f}% |"
    )
    return "\n".join(rows)
