"""Exercises as the instructor notebooks define them, and ``python -m course checktimes``.

:func:`defined` runs a lesson's set-up cells (the grader's plan) and then one exercise cell,
either as the instructor wrote it or as the student copy has it (``### GIVEN:`` lines and
stubs, made by the release), and returns the kernel or answer it defines.  The tests use it
to prove that every solution passes and every student copy fails; ``checktimes`` uses it to
time ``course.check`` on each solution, the wait a student has each time they run a check.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

from ..source.unit import run_cell
from . import notebook as nbk


@functools.cache
def _setup(lesson: str, notebooks: str):
    plan = nbk.plan(Path(notebooks) / f"{lesson}.ipynb")
    ns = {"__name__": "__main__", "display": lambda *a, **k: None}
    for c in plan.setup:
        run_cell(c.source, f"<{lesson} setup cell {c.index + 1}>", ns)
    return plan, ns


def defined(name: str, student: bool = False, notebooks: Path | None = None):
    """(the function or answer exercise ``name``'s cell defines, the cell's namespace)."""
    from ...exercises import get
    from .student import strip_solutions

    spec = get(name)
    from ..hidden import notebooks_dir

    plan, ns = _setup(spec.lesson, str(notebooks or notebooks_dir()))
    ex = plan.exercises[name]
    src = strip_solutions(ex.cell) if student else ex.cell.source
    local = dict(ns)
    run_cell(src, f"<{name}>", local)  # the course's own cells
    return local[ex.function], local


def main(argv=None) -> int:
    """``python -m course checktimes [--out FILE.md]``: seconds per check of every solution."""
    ap = argparse.ArgumentParser(
        prog="python -m course checktimes",
        description="Time course.check on every exercise's solution "
        "(public cases, as a student runs it).",
    )
    ap.add_argument("--out", type=Path, help="also write the table (markdown) here")
    ap.add_argument("--only", nargs="*", help="exercise names (default: all)")
    ap.add_argument(
        "--instructor",
        type=Path,
        metavar="DIR",
        help="the instructor folder (notebooks/ with solutions; default: this checkout)",
    )
    opts = ap.parse_args(argv)
    from ..hidden import InstructorFolderError, use_instructor

    try:
        if opts.instructor:
            use_instructor(opts.instructor)
    except InstructorFolderError as exc:
        print(f"checktimes: {exc}", file=sys.stderr)
        return 2
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    import course

    from ...exercises import all_exercises

    warnings.simplefilter("ignore", NumbaPerformanceWarning)  # small launches are the point
    from ...platform.runtime import device_info

    ceilings = ""
    if course.MODE == "gpu":  # measured once per device and cached: not a check's cost
        from ...measure.perf import measured_ceilings

        t0 = time.perf_counter()
        measured_ceilings()
        ceilings = (
            f" The device's copy and FP32 ceilings (used by tune targets) were measured "
            f"first, once, in {time.perf_counter() - t0:.1f} s, and cached."
        )
    from ..judging.check import admit
    from ..wall.gate import gate

    rows, times, gates, tunes = [], [], [], []
    for name, spec in all_exercises().items():
        if opts.only and name not in opts.only:
            continue
        fn, _ = defined(name)
        gate_s = 0.0
        if spec.kind != "predict":  # the compile gate alone, its cache empty
            gate()._cache.clear()
            t0 = time.perf_counter()
            admit(spec, fn, 1)
            gate_s = time.perf_counter() - t0
            gates.append(gate_s)
            gate()._cache.clear()
        t0 = time.perf_counter()
        r = course.check(name, fn, record=False, seed=1)
        dt = time.perf_counter() - t0
        times.append(dt)
        rows.append(
            f"| `{name}` | {spec.kind} | {spec.lesson} | {len(r.cases)} | "
            f"{'pass' if r.passed else 'FAIL'} | {dt:.1f} | "
            f"{gate_s:.2f} |"
        )
        print(rows[-1], flush=True)
        if spec.kind == "tune":  # the given kernel, measured as if a student handed it in
            tunes.append(tune_row(name, spec, r))
            print(tunes[-1], flush=True)
    dev = device_info().get("name", course.MODE) if course.MODE == "gpu" else "simulator"
    head = [
        f"# Check times ({dev}, {time.strftime('%Y-%m-%d')})",
        "",
        f"`course.check` on each exercise's solution, public cases (seed 1); "
        f"{len(times)} exercises, median {statistics.median(times):.1f} s, "
        f"max {max(times):.1f} s.{ceilings} Each check includes its compile gate "
        f"(``course/grading/wall/gate.py``) with an empty cache; that step alone, the last "
        f"column, has median {statistics.median(gates or [0]):.2f} s (a repeated check "
        f"of the same kernel finds it cached).",
        *_judged_as(dev),
        "",
        "| exercise | kind | lesson | cases | result | seconds | of which compile gate |",
        "|---|---|---|---|---|---|---|",
    ]
    text = "\n".join(head + rows + tune_head(dev) + tunes) + "\n"
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(text)
    print(f"median {statistics.median(times):.1f} s, max {max(times):.1f} s")
    starters_fail = all(r.split(" | ")[3] == "fails" for r in tunes)
    return 0 if all("| pass |" in r for r in rows) and starters_fail else 1


def _judged_as(device: str) -> list:
    """The rehearsal's line (``tune_cards.rehearsal``) as report lines, or none."""
    from ...exercises.tune_cards import rehearsal

    line = rehearsal(f"the {device}")
    return ["", line] if line else []


def tune_head(device: str) -> list:
    import course

    how = (
        "speed-up over the given kernel, both timed by the judged loop on this GPU in this "
        "run (the given kernel's own time: the judge's, ``grading/judging/starter.py``)"
        if course.MODE == "gpu"
        else "the simulator's counted figure"
    )
    return [
        "",
        f"## Tune targets on this device ({device})",
        "",
        f"Each tune exercise's figure ({how}) for the given kernel (the student copy's, "
        "measured as if handed in: it must fail) and for the course's solution (it must "
        "pass); the margin is the solution's figure over the target.  Where this card's memory "
        "hides what an exercise changes, the time must only not be slower and the simulator's "
        "count of the same kernel decides (``exercises/tune_cards.py``): shown by its verdict.",
        "",
        "| exercise | target | given kernel | verdict | solution | verdict | margin |",
        "|---|---|---|---|---|---|---|",
    ]


def tune_row(name: str, spec, solved) -> str:
    """One row of the tune table: the given kernel's measured figure and the solution's."""
    from ..judging.check import measure

    given, _ = defined(name, student=True)
    g = measure(spec, given, 1)
    s = solved.cases[-1] if solved.cases else None
    target = _number(s.message, "target ") if s else None
    sol = _number(s.message, "measured ") if s else None
    margin = "-"
    if s is not None and target and sol:
        below = _text_of(s.message, "target ").startswith("<")
        margin = f"{(target / sol if below else sol / target):.3g}x"
    return (
        f"| `{name}` | {_text(s, 'target ')} | {_text(g, 'measured ')}{_detail(g)} | "
        f"{'PASSES' if g.passed else 'fails'}{_count(g)} | {_text(s, 'measured ')}{_detail(s)} | "
        f"{'pass' if s is not None and s.passed else 'FAIL'}{_count(s)} | {margin} |"
    )


def _count(res) -> str:
    """The simulator's count beside a counted card's verdict: ' (count 0, target <= 0)'."""
    msg = res.message if res is not None else ""
    if "the simulator's count: " not in msg:
        return ""
    c = msg.split("the simulator's count: ", 1)[1]
    return f" (count {_text_of(c, 'measured ')}, target {_text_of(c, 'target ')})"


def _detail(res) -> str:
    """A GPU figure's times and share of the ceiling: ' (0.29 ms vs its 0.87 ms; ...)'."""
    msg = res.message if res is not None else ""
    if "given kernel (" not in msg:
        return ""
    return " (" + msg.split("given kernel (", 1)[1].split("):", 1)[0].replace("|", "/") + ")"


def _text(res, after: str) -> str:
    return _text_of(res.message if res is not None else "", after)


def _text_of(msg: str, after: str) -> str:
    """The measured figure (``after="measured "``) or the target (``"target "``) of a
    check's timed result, as the report shows it."""
    mark = {"measured ": ": measured ", "target ": ", target "}[after]
    if mark not in msg:
        return (msg[:80] or "-").replace("|", "/")
    rest = msg.split(mark, 1)[1]
    words = rest.split(",")[0].split()[: 2 if after == "target " else 1]
    return " ".join(words).rstrip(".;").replace("|", "/")


def _number(message: str, after: str) -> float | None:
    try:
        return float(_text_of(message, after).split()[-1])
    except (ValueError, IndexError):
        return None
