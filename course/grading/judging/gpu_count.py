"""The GPU's own count on a card whose memory hides a tune exercise's lesson (issue #47).

On such a card (``exercises/tune_cards.py``: the transpose on a T4, L4, H100 or H200, the
reduction on an L4) time cannot tell the given kernel from the lesson's fix, so a count
decides.  The simulator's count (``measurer_calls.count_in_simulator``) is the laptop's and
stays; but it is a count of a *different run*: a small launch, in Python, where integers
never wrap.  A kernel that tells the two apart (``if A.shape[0] <= 64``, or
``(n << 60) >> 60 == n``, true only in the simulator) can run the fix there and the given
code on the GPU.  Blocking such expressions would be fixing cases; the mechanism is that a
verdict about the GPU must be read from the GPU.  So the judge also has the GPU count:

- a measurer of its own runs under Nsight Compute in the sandbox (``wall/counter.py``),
  stages the *measured* case (the size the GPU times), runs it once to compile and once
  between cuProfilerStart/Stop, and its outputs are judged as every run's are;
- ``ncu`` reads the hardware's counters of that launch (:func:`parse`): bank-conflict
  replays of every shared-memory access (loads, stores and atomics: a red team hid the
  given kernel's conflicts in ``cuda.atomic.exch`` when only loads and stores were read),
  the shared-memory instructions, and the global sectors;
- the GPU must have run the kernel the simulator counted (:func:`disagreement`): its
  shared-memory requests and global sectors per element within :data:`AGREE` of the
  simulator's.  A kernel can tell the two runs apart in any number of ways; whatever it
  does on the GPU instead (no shared memory and strided reads, or conflict-free dummy
  accesses that dilute the conflicts) changes what the GPU's counters see;
- the launch passes with at most :data:`SLACK` replays a shared-memory request.  The
  simulator's target is none, but the hardware's counter also counts a few collisions
  between warps: on an H200 (2026-11-29) the course's solutions read 0.022 (transpose,
  4096 x 4096) and 0.033 (reduction, 2^26) a request, the given kernels 15.8 and 2.41,
  and the red team's kernels, whose GPU path is the given code, 15.7 and 2.41.  0.25 sits
  7x above the first and 9x below the second.

Where the counters cannot be read (no ``ncu``, a driver that keeps them for
administrators, a profiler that fails), a notebook's check says so and the simulator's
count decides there (a student can only fool themselves); the class grader does not pass
the exercise on the simulator's word alone and says what the machine needs (:data:`FIX`).
"""

from __future__ import annotations

import csv
import re
import time
from dataclasses import dataclass

from ...exercises.outcome import CaseResult
from ..wall.child import Tampered
from ..wall.counter import FAMILIES
from ..wall.wire import WireError

SLACK = 0.25  # bank-conflict replays a shared-memory request the GPU's count forgives
# GPU count -> (the simulator's figure, how far apart per element they may be, what it is).
# Honest kernels: the transpose's tiles give 0.0625 shared requests and 0.25 sectors an
# element in both runs; the reduction's tree, 256 threads a block on the GPU and 64 in the
# simulator, 0.176 and 0.359 shared requests (2.04x) and 0.129 and 0.141 sectors.
AGREE = {
    "requests": ("shared_requests", 3.0, "shared-memory requests"),
    "sectors": ("sectors", 1.5, "global-memory sectors"),
}
PROFILER = "profiler"  # the GPU lock every Nsight Compute session of this user takes
PROFILE_S = 120.0  # seconds one GPU count may hold the profiler lock (its start included)
MAX_KERNELS = 64  # launches one profiled run may show (a case launches one or a few)
FIX = (
    "grade on a machine where Nsight Compute (ncu) is installed and the driver lets every "
    "user read the GPU's counters (nvidia module option NVreg_RestrictProfilingToAdminUsers=0)"
)
_VALUE = re.compile(r"^\d{1,15}(\.0+)?$")


class Unreadable(Exception):
    """The GPU's counters could not be read here; the message says why."""


@dataclass(frozen=True)
class Counts:
    """What Nsight Compute read of one profiled run, all its launches together."""

    replays: int  # extra shared-memory wavefronts from bank conflicts (every access)
    requests: int  # shared-memory instructions (warp requests: loads, stores, atomics)
    sectors: int  # global-memory 32-byte sectors (loads, stores, atomics)
    kernels: int  # launches profiled


def said_error(said: str) -> str:
    """Nsight Compute's first error line in ``said`` (its own output), bounded."""
    for line in said.splitlines():
        if line.startswith("==ERROR=="):
            return "".join(ch for ch in line[9:].strip() if ch.isprintable())[:200]
    return ""


def parse(table: str, said: str = "") -> Counts:
    """The :class:`Counts` of ncu's CSV ``table`` (``--csv --print-units base``): every
    profiled launch must carry metrics of every ``counter.FAMILIES``, each a whole number;
    anything else is :class:`Unreadable` (with ncu's own error where it gave one)."""
    lines = table.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        why = said_error(said) or said_error(table)
        raise Unreadable(why or "Nsight Compute wrote no counters")
    sums: dict = {}  # (launch, family) -> total
    for row in csv.DictReader(lines[start:]):
        name = str(row.get("Metric Name") or "")
        family = next((f for f, p in FAMILIES.items() if re.fullmatch(p, name)), None)
        if family is None:
            continue
        v = str(row.get("Metric Value") or "").replace(",", "")
        if not _VALUE.match(v):
            raise Unreadable(f"a counter that is not a count: {v[:20]!r}")
        key = (str(row.get("ID")), family)
        sums[key] = sums.get(key, 0) + int(float(v))
    ids = {i for i, _ in sums}
    if not ids:
        raise Unreadable(said_error(said) or "no launch was profiled")
    if len(ids) > MAX_KERNELS:
        raise Unreadable(f"{len(ids)} launches were profiled, at most {MAX_KERNELS} expected")
    missing = [(i, f) for i in ids for f in FAMILIES if (i, f) not in sums]
    if missing:
        raise Unreadable(f"launch {missing[0][0]} has no {missing[0][1]} counter")
    total = {f: sum(v for (_, g), v in sums.items() if g == f) for f in FAMILIES}
    return Counts(**total, kernels=len(ids))


def disagreement(spec, counts: Counts, sim_figures) -> str | None:
    """Why the GPU's launch is not the kernel the simulator counted (:data:`AGREE`, per
    element of each run's case), or None."""
    n_gpu, n_sim = spec.work(spec.gpu_case)[0], spec.work(spec.sim_case)[0]
    for key, (sim_key, bound, what) in AGREE.items():
        s = (sim_figures or {}).get(sim_key)
        if not isinstance(s, int | float) or isinstance(s, bool) or s < 0:
            return f"the simulator's count gave no {what} to compare with this GPU's"
        g, s = getattr(counts, key) / n_gpu, s / n_sim
        if (g or s) and (not g or not s or max(g / s, s / g) > bound):
            return (
                f"{what} per element: {g:.3g} on this GPU, {s:.3g} in the simulator - they "
                f"must agree within {bound:g}x: the GPU did not run what the simulator counted"
            )
    return None


def verdict(spec, counts: Counts, sim_figures=None) -> CaseResult:
    """The GPU count's verdict on ``spec``'s measured launch (``spec.sim_metric`` is
    ``replays`` with target 0): the same kernel as the simulator's (:func:`disagreement`,
    against ``sim_figures``, the simulator count's figures) with at most :data:`SLACK`
    replays a request."""
    res = CaseResult("timed launch (GPU count)", "", timed=True)
    per = counts.replays / counts.requests if counts.requests else 0.0
    res.message = (
        f"{counts.replays:,} bank-conflict replays in {counts.requests:,} shared-memory "
        f"requests ({per:.3g} a request, at most {SLACK:g}), read by Nsight Compute from "
        "the measured case's launch"
    )
    other = disagreement(spec, counts, sim_figures)
    if other:
        res.fail(f"{res.message}; {other}")
    elif per > SLACK:
        res.fail(res.message)
    return res


def has_counter(spec) -> bool:
    """True when the GPU can count what ``spec``'s simulator target counts."""
    return getattr(spec, "sim_metric", None) == "replays" and spec.sim_target == 0


def count_on_gpu(
    start, spec, load: dict, seed: int, deadline: float, mode: str = "gpu", sim_figures=None
):
    """The GPU count's CaseResult for the kernel ``load`` names, by a measurer run under
    ncu (``start()``: a started ``Child`` of ``wall/counter.py``); a str (why) where the
    counters could not be read.  ``mode`` is the measurer's (the tests' is the simulator).
    The GPU's profiler lock is held throughout (``course.profile`` takes it too);
    ``sim_figures``: the simulator count's, which the GPU's run must agree with."""
    if not has_counter(spec):
        return f"the GPU has no counter for {spec.name}'s {spec.sim_metric}"
    from ...platform.gpu_lock import LockTimeout, device_lock

    try:  # one profiler at a time on a GPU: a second ncu session reads nothing
        with device_lock(mode == "gpu", deadline=deadline, purpose=PROFILER):
            # the lock is held at most PROFILE_S: a kernel slow under the profiler cannot keep
            # every other submission's count waiting until its own deadline
            until = min(deadline, time.monotonic() + PROFILE_S)
            return _count(start, spec, load, seed, until, mode, sim_figures)
    except LockTimeout:
        return "another profiler kept this GPU busy past the time limit"


def _count(start, spec, load: dict, seed: int, until: float, mode: str, sim_figures):
    from .cases import measure_failed
    from .measurer_calls import judge_measure

    m = start()
    m.chan.deadline = until
    try:
        try:
            first, _ = m.chan.recv()
            if first.get("op") == "counters":  # ncu never started the measurer
                why = first.get("error") or said_error(str(first.get("said") or ""))
                return str(why or "Nsight Compute ended without starting the measurer")[:200]
            if first.get("op") != "hello":
                raise Tampered("the GPU count's first message was not its greeting")
            reply, _ = m.ask(load, "loaded")
            if reply.get("error"):
                return measure_failed(f"the GPU count could not load the kernel: {reply['error']}")
            res = judge_measure(
                m, spec, mode=mode, seed=seed, deadline=until, ceilings=None, profile=True
            )
            if not res.passed:
                return res
            m.chan.send({"op": "bye"})
            last, _ = m.chan.recv()
        except WireError as exc:
            if exc.timed_out:
                return measure_failed(f"the GPU count ran past its {PROFILE_S:g} s")
            m.settle()
            return f"the measurer under Nsight Compute ended early ({m.last_words() or exc})"
        if last.get("op") != "counters":
            raise Tampered("the GPU count ended without Nsight Compute's table")
        if last.get("error"):
            return str(last["error"])[:200]
        try:
            counts = parse(str(last.get("table") or ""), str(last.get("said") or ""))
        except Unreadable as exc:
            return str(exc)
        return verdict(spec, counts, sim_figures)
    finally:
        m.stop()


def counted_verdict(start_sim, start_gpu, spec, load, seed, deadline, strict) -> CaseResult:
    """The counted verdict on the kernel ``load`` names: the simulator's count (a measurer
    started by ``start_sim``) and, where it passes, the GPU's (``start_gpu``; None: none
    asked), :func:`confirmed` together; a notebook's GPU count that breaks is a reason."""
    from .measurer_calls import count_in_simulator

    sim = count_in_simulator(start_sim, spec, load, seed, deadline)
    if not sim.passed or start_gpu is None:
        return sim
    try:
        gpu = count_on_gpu(start_gpu, spec, load, seed, deadline, sim_figures=sim.figures)
    except (Tampered, WireError, OSError) as exc:
        if strict:
            raise
        gpu = f"{type(exc).__name__}: {exc}"
    return confirmed(sim, gpu, strict)


def confirmed(sim: CaseResult, gpu, strict: bool) -> CaseResult:
    """The counted verdict: the simulator's count ``sim`` and the GPU's (``gpu``: a
    CaseResult, a str saying why it could not be read, or None: not asked because the
    simulator's already failed).  ``strict`` (the class grader): an unread GPU count fails."""
    if gpu is None or not sim.passed:
        return sim
    res = CaseResult(sim.name, sim.launch, timed=True)
    if isinstance(gpu, CaseResult):
        res.message = f"{sim.message}; this GPU's own count: {gpu.message}"
        if not gpu.passed:
            res.fail(res.message)
        return res
    if strict:
        res.fail(
            f"{sim.message}; but this GPU's own count could not be read ({gpu}), and the "
            f"grader does not pass this exercise on the simulator's count alone: {FIX}"
        )
        return res
    res.message = (
        f"{sim.message}; not confirmed on this GPU: its own counters could not be read "
        f"({gpu}) - the class grader reads them"
    )
    return res
