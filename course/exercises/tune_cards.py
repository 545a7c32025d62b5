"""A tune exercise's GPU target on any card: a speed-up over the given kernel, timed here.

A fraction of the measured copy bandwidth tuned on one card does not carry to another: an
H200 has 1.4x an H100's bandwidth with the same SMs, so a kernel bound by its SMs (a
shared-memory tree, a conflicted tile, contended atomics) shows a smaller fraction there,
and a T4's slow memory hides what costs an H100 most.  What carries is the lesson itself:
the given (starter) kernel and the student's kernel, timed in the same run on the same card
by the same judged loop (``course/grading/judging/starter.py``), and the student's kernel must be
``Tune.speedup`` times faster.  The given kernel measures 1.0 on every card; the course's
solution measures what :data:`CALIBRATION` lists.

The starter's time is a denominator a noisy GPU could inflate (and a faster kernel with
it), so it has a floor on its figure: it counts as at most the time it would take at
``Tune.starter_floor`` of the card's ceiling (copy bandwidth or FP32 rate; each exercise's
floor is below what its starter reaches on every card the course knows).  A student never
times or runs the starter: the judge does, in its own process, with the GPU's measuring
lock held.

Why a speed-up, exercise by exercise (what bounds the two kernels; H100 figures from
``assets/benchmarks``; targets ``Tune.speedup``, each card's :func:`card_target`):

- ``tune_vector_add`` (1.5x): the solution is bound by DRAM and the chunked starter by its
  uncoalesced requests in L1 and L2, whose cost is the SMs', not the bandwidth's: the
  starter's share of the copy bandwidth differs by card, the ratio is what the lesson is.
- ``tune_reduction`` (1.12x): both trees are bound by their SMs (shared memory and a
  barrier per level), so their fraction of the copy bandwidth falls by 1.4x on an H200
  while the ratio stays 1.23-1.24 (H100, H200).
- ``tune_matmul`` (1.8x), ``tune_covariance`` (1.2x): FP32 work through L1 (naive) against
  the same work through shared tiles; the FP32 rate is the same on an H100 and an H200, but
  not on an A100 or a T4, and the ratio (about 3.5x and 1.4x) carries.
- ``tune_centering`` (1.5x): uncoalesced against coalesced, like the vector add; 4.0x on an
  H100, 3.8x on an H200.
- ``tune_histogram`` (1.6x): contended global atomics against shared ones, bound by the
  atomic units (2.5-2.8x on an H100 and H200).
- ``tune_transpose`` (1.04x): the conflict costs the SMs' shared-memory wavefronts while
  DRAM bounds both kernels; 1.08x on an H100 - the smallest margin of the course, so the
  target sits at :data:`MIN_SPEEDUP`.

**A card whose memory hides the lesson is graded by the count** (:func:`counted`).  Where
the calibration says the course's solution is not :data:`MARGIN` over :data:`MIN_SPEEDUP`
(``tune_transpose`` on an L4 or a T4, whose slow DRAM hides the bank conflict;
``tune_reduction`` on an L4), time cannot tell the two kernels apart, so a speed-up target
would fail honest students or pass the given kernel by noise.  There the time must only
not be slower than the given kernel's (:data:`NOT_SLOWER`), and the same kernel is also
measured in the simulator - a measurer of its own started in simulator mode, its small
launch traced and judged like a laptop's - whose count (bank-conflict replays, the spread
and ``issued`` bounds) must meet the simulator target: the thing the lesson changes,
counted where the card cannot time it; and the GPU's own counters of the measured launch
must agree (``grading/judging/gpu_count.py``: a kernel can tell the simulator's run from
the GPU's and fix only the first).  A card the course never saw is graded that way for
an exercise some known card hides, and by the lowest known speed-up otherwise.
``COURSE_TUNE_CARD`` (an instructor's rehearsal) judges as if on the card it names.
"""

from __future__ import annotations

import os

# name fragment -> the published figures the predictions use: (memory GB/s, SMs, boost GHz,
# FP32 TFLOP/s, L2 MB).  Matching is by the device's name, case-insensitively, first hit.
CARDS = {
    "H200": (4800, 132, 1.98, 67.0, 50),
    "H100": (3350, 132, 1.98, 67.0, 50),
    "A100": (2039, 108, 1.41, 19.5, 40),
    "L4": (300, 58, 2.04, 30.3, 48),
    "T4": (320, 40, 1.59, 8.1, 4),
}
# exercise -> {card: the course's solution's speed-up over the given kernel}: from the
# benchmark reports and checktimes (H100, H200), else predicted from CARDS (see the issue
# #47 note); "measured" cards are replaced by checktimes' figures when they move.
CALIBRATION = {
    "tune_vector_add": {"H100": 3.0, "H200": 3.5, "A100": 2.3, "L4": 1.2, "T4": 1.2},
    "tune_reduction": {"H100": 1.24, "H200": 1.23, "A100": 1.23, "L4": 1.05, "T4": 1.15},
    "tune_matmul": {"H100": 3.5, "H200": 3.5, "A100": 3.0, "L4": 3.0, "T4": 2.5},
    "tune_centering": {"H100": 4.0, "H200": 3.8, "A100": 3.0, "L4": 1.2, "T4": 1.3},
    "tune_covariance": {"H100": 1.4, "H200": 1.4, "A100": 1.4, "L4": 1.4, "T4": 1.4},
    "tune_histogram": {"H100": 2.8, "H200": 2.5, "A100": 2.5, "L4": 2.5, "T4": 2.5},
    "tune_transpose": {"H100": 1.08, "H200": 1.1, "A100": 1.15, "L4": 1.0, "T4": 1.0},
}


MIN_SPEEDUP = 1.04  # the given kernel against itself measures 1.00 +- 2 %: it always fails
NOT_SLOWER = 0.97  # a counted card's time bound: the given kernel's speed, less its noise
MARGIN = 1.1  # on a calibrated card the solution's figure is at least this over the target
CEILING_NAMES = {"copy_fraction": "copy bandwidth", "fp32_fraction": "FP32 rate"}


def card_of(device: str | None) -> str | None:
    """The calibrated card ``device`` (a device name; ``$COURSE_TUNE_CARD`` instead when
    set) is, or None."""
    name = _device(device).upper()
    for card in CARDS:
        if card in name.replace("-", " ").split():
            return card
    return None


def _device(device: str | None) -> str:
    return os.environ.get("COURSE_TUNE_CARD") or str(device or "")


def rehearsal(measured_on: str) -> str | None:
    """A report's sentence when ``COURSE_TUNE_CARD`` judged its tune targets as if on
    another card (an instructor's rehearsal) than the one they were measured on; else None."""
    card = os.environ.get("COURSE_TUNE_CARD")
    if not card:
        return None
    return (
        f"Tune targets judged **as if on {card}** (`COURSE_TUNE_CARD`); every time was "
        f"measured on {measured_on}."
    )


def hides(spec, card: str) -> bool:
    """True when ``card``'s calibration says time cannot show ``spec``'s lesson there."""
    cal = CALIBRATION.get(spec.name, {})
    return card in cal and cal[card] < MIN_SPEEDUP * MARGIN


def counted(spec, device: str | None) -> bool:
    """True when the simulator's count decides ``spec``'s target on ``device`` (see above)."""
    if not getattr(spec, "speedup", 0):
        return False
    card = card_of(device)
    cal = CALIBRATION.get(spec.name, {})
    return hides(spec, card) if card in cal else any(hides(spec, c) for c in cal)


def with_count(spec, ok: bool, text: str, counted_res) -> tuple[bool, str]:
    """(passed, sentence) of a counted card's verdict: the time's (``ok``, ``text``) and the
    counts (``counted_res``, a CaseResult; None: they did not run - a fail; a callable that
    makes it, called only when the time passed: a kernel too slow is not counted, and its
    counts hold no GPU lock)."""
    if callable(counted_res):
        if not ok:
            return False, text
        counted_res = counted_res()
    if counted_res is None:
        return False, (
            f"{text}; but on this GPU the simulator's count decides {spec.name}'s target, "
            "and it did not run - check again"
        )
    return ok and counted_res.passed, f"{text}; the simulator's count: {counted_res.message}"


def target_sentence(spec, target: float | None = None) -> str:
    if target is None and counted(spec, "NVIDIA H100"):  # the spec's own words: an H100's
        return (
            f"at least {NOT_SLOWER:g}x the speed of the given kernel (not slower), both timed "
            "on the same GPU in the same run, and the simulator's count above and the GPU's own "
            "bank-conflict counters, which decide "
            "(on an H100 or H200; the check states your card's)"
        )
    if target is None:
        return (
            f"at least {spec.speedup:g}x the speed of the given kernel, both timed on the "
            "same GPU in the same run (on an H100 or H200; the check states your card's)"
        )
    return f"at least {target:g}x the speed of the given kernel, both timed on this GPU in the same run"


def card_target(spec, card: str) -> float:
    """The speed-up ``spec`` asks for on a calibrated ``card``: ``Tune.speedup``, lowered
    where the card's calibration says the course's solution reaches less (to that figure
    over :data:`MARGIN`), never below :data:`MIN_SPEEDUP`."""
    cal = CALIBRATION.get(spec.name, {}).get(card, spec.speedup * MARGIN)
    return round(max(MIN_SPEEDUP, min(spec.speedup, cal / MARGIN)), 2)


def target_for(spec, device: str | None) -> tuple[float, str]:
    """(the speed-up ``spec`` asks for on ``device``, a sentence about the card)."""
    card = card_of(device)
    cal = CALIBRATION.get(spec.name, {})
    device = "".join(ch for ch in _device(device) if ch.isprintable())[:80]
    if counted(spec, device):
        why = (
            f"the course's solution measures about {cal[card]:g}x here: this card's memory "
            "hides what the exercise changes"
            if card in cal
            else "some cards' memory hides what this exercise changes"
        )
        return NOT_SLOWER, (
            f". This GPU ({card if card in cal else device or 'unknown'}): {why}, so the "
            f"time must only not be slower than the given kernel's (>= {NOT_SLOWER:g}x) and "
            "the simulator's count of the same kernel and this GPU's own counters decide"
            + ("" if card in cal else " (it has no calibration)")
        )
    if card is None or card not in cal:
        # the most any calibrated card allows: an honest kernel never fails for the card
        t = min((card_target(spec, c) for c in cal), default=spec.speedup)
        return t, (
            f". This GPU ({device or 'unknown'}) has no calibration; the target used is "
            f"{target_sentence(spec, t)} (the lowest the course sets on a card it knows)"
        )
    t = card_target(spec, card)
    return t, f". On this GPU ({card}) the course's solution measures about {cal[card]:g}x"


def speedup_value(spec, f: dict, ceil: dict) -> tuple:
    """(speed-up, what, ">=", target, note) of the fastest judged run ``f["ms"]`` over the
    given kernel's (``ceil["starter"]``, timed by the judge), its time capped by the floor."""
    from .tune_figures import finite, gpu_fraction

    ms = finite(f["ms"])
    starter = ceil["starter"]
    s_ms = finite(starter["ms"])
    cap = starter_cap_ms(spec, ceil)
    counted = min(s_ms, cap) if cap else s_ms
    if not ms > 0 or not counted > 0:
        raise ValueError("a time of 0 ms")
    v = counted / ms
    frac = gpu_fraction(spec, ms, ceil)
    capped = f", counted at its floor {counted:.4g} ms" if counted < s_ms else ""
    what = (
        f"speed-up over the given kernel ({ms:.4g} ms vs its {s_ms:.4g} ms{capped}; "
        f"{frac:.3g} of the measured {CEILING_NAMES[spec.gpu_metric]})"
    )
    target, note = target_for(spec, ceil.get("device"))
    return v, what, ">=", target, note


def starter_cap_ms(spec, ceil: dict) -> float:
    """The slowest the given kernel counts as: its work at ``spec.starter_floor`` of the
    card's ceiling (0: no floor)."""
    if not spec.starter_floor:
        return 0.0
    _n, nbytes, flops = spec.work(spec.gpu_case)
    if spec.gpu_metric == "copy_fraction":
        return nbytes / (spec.starter_floor * float(ceil["copy_gbps"]) * 1e9) * 1e3
    return flops / (spec.starter_floor * float(ceil["fp32_tflops"]) * 1e12) * 1e3
