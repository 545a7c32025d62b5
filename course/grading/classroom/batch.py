"""``python -m course grade SUBMISSIONS... --out grades.csv``: grade a class's notebooks.

For each submitted notebook (this process only *reads* it):
1. find its lesson (notebook metadata written by ``release``, else the file name, else
   ``--lesson``) and the instructor notebook's plan (setup cells + exercise cells);
2. find the student's exercise cells: by the cell marker ``metadata.course.exercise``, then
   by cell id, then by the function name the check passes (``def add(``), each cell read at
   most once and within one budget (``steps.py``);
3. run the instructor's setup cells and the student's exercise cells in a fresh worker
   process (``worker.py``) with a wall time limit and resource limits, while this process
   makes every case's inputs, keeps the references and judges what comes back
   (``session.py``: why a student cell cannot forge a verdict);
4. turn the verdicts (or their absence) into points, reasons, a CSV row and feedback.

Submissions are read at start-up to find their lessons and keys, then dropped, and read again
(the same bytes) when their job starts (``intake.py``): the grader holds one notebook per
running job.  Hidden cases and, on a GPU, the ceilings are loaded/measured once, in this
process, before any worker starts.
The sandbox the workers run in and what it holds on each host: ``isolate.py`` and
instructor/README.md ("Threat model").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import notebook as nbk
from . import preflight
from .graded import Graded, merge, write_csv
from .intake import student_name
from .verdicts import classify

__all__ = ["Graded", "grade_one", "load_plans", "main"]


# ---------------------------------------------------------------------------------------
# one submission, end to end


def grade_one(sub, plans: dict, settings) -> Graded:
    """Grade one submission (an ``intake.Submission``, read already) with the run's
    ``settings.GradeSettings``; never raises (a broken submission is a row with a reason).

    The route, stage by stage: its notebook and lesson (``prepare.read_submission``, once)
    -> the worker's steps (``steps.make_steps``) -> the session (``session.grade_steps``: the
    worker runs the cells and sends each kernel as a unit; the gate compiles it; the
    measurer launches every case, ``cases.run_cases``, and a tune exercise's measured
    launch; the judge decides each) -> points and reasons (``scoring.score``)."""
    from ..phases import Phases
    from .intake import forget
    from .prepare import read_submission

    phases = Phases()
    with phases.timed("notebook"):
        read_submission(sub, plans, settings.lesson)  # read (again) now, parsed once
    try:
        g = _grade_read(sub, plans, settings, phases)
        g.phases = phases.as_dict()
        return g
    finally:
        forget(sub)  # the grader holds a notebook only while its job runs


def _grade_read(sub, plans: dict, settings, phases) -> Graded:
    """:func:`grade_one` once the submission's notebook is read and parsed."""
    g = Graded(sub.student or student_name(sub.path, plans), sub.name, seed=settings.seed)
    nb, lesson = sub.notebook, sub.lesson
    if nb is None:
        g.status = "rejected"  # the submission's fault (verdicts.py)
        g.reasons.append(sub.problem)
    if lesson is None or lesson not in plans:
        g.status = "rejected" if g.status == "rejected" else "error"
        g.reasons.append(
            f"cannot tell which lesson this notebook is (known: "
            f"{', '.join(sorted(plans))})"
            + (
                f"; --lesson {settings.lesson} is not one of them"
                if settings.lesson
                else "; name it with --lesson"
            )
        )
        return g
    plan = plans[lesson]
    g.lesson = lesson
    from .. import hidden

    for name in plan.exercises:
        g.points[name], g.max_points[name] = 0.0, hidden.points_for(name)
    if nb is None:
        return g
    from .steps import TooMuchToRead, make_steps

    try:
        with phases.timed("notebook"):
            steps = make_steps(plan, nb, g)
    except TooMuchToRead as exc:
        g.status = "rejected"
        g.reasons.append(str(exc))
        return g
    except Exception as exc:  # noqa: BLE001 - whose fault it is, said (verdicts.py)
        g.status, why = classify("reading the cells", exc)
        g.reasons.append(why)
        return g
    if not any(s["exercise"] for s in steps):
        return g
    from ..judging.session import grade_steps
    from ..wall.child import INTERRUPTED

    try:
        out = grade_steps(steps, settings)
    except Exception as exc:  # noqa: BLE001 - whose fault it is, said (verdicts.py)
        if not INTERRUPTED.is_set():
            g.status, why = classify("the grader", exc)
            g.reasons.append(why)
            return g
    if INTERRUPTED.is_set():  # the run was stopped under it: neither its fault nor ours
        g.status = "interrupted"
        g.reasons.append("not graded: the grading run was stopped before it was done")
        return g
    g.status = out.status
    phases.merge(out.phases.seconds)
    from .scoring import score

    with phases.timed("scoring"):
        score(g, plan, out, settings)
    return g


# ---------------------------------------------------------------------------------------
# CSV and command line


def load_plans(src: Path) -> dict:
    """lesson -> Plan for every instructor notebook in ``src`` that has exercises."""
    plans = {}
    for p in sorted(src.glob("*.ipynb")):
        plan = nbk.plan(p)
        if plan.exercises:
            plans[p.stem] = plan
    return plans


def main(argv=None) -> int:
    """``python -m course grade SUBMISSIONS... --out grades.csv [--feedback DIR] ...``"""
    ap = argparse.ArgumentParser(
        prog="python -m course grade",
        description="Grade submitted notebooks to a CSV (one row per "
        "student) and per-student feedback files.",
        epilog=SCORING,
    )
    ap.add_argument("submissions", nargs="+", type=Path, help="notebooks or folders of them")
    ap.add_argument("--out", type=Path, default=Path("grades.csv"), help="the CSV to write")
    ap.add_argument("--feedback", type=Path, help="folder for <student>.md and .html")
    ap.add_argument(
        "--instructor",
        type=Path,
        metavar="DIR",
        help="the instructor folder: notebooks/ with the solution notebooks and "
        "instructor/hidden/ with the hidden cases, keys and private seed "
        "(default: this checkout)",
    )
    ap.add_argument(
        "--notebooks",
        type=Path,
        help="instructor notebooks (default: notebooks/ of the instructor folder)",
    )
    ap.add_argument(
        "--lesson",
        help="lesson of every submission, e.g. 01_vector_add "
        "(default: from the notebook or its file name)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="seconds per submission, all exercises together (default 600)",
    )
    ap.add_argument(
        "--case-time-limit",
        type=float,
        default=None,
        help="seconds per check case (default: course.check's: 60 sim, 10 GPU)",
    )
    ap.add_argument(
        "--memory-mb",
        type=int,
        default=None,
        help="address-space limit per submission in MiB, 0 = none (default: "
        "16384 in the simulator, none on a GPU, whose driver maps a lot)",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="submissions graded at once (with "
        "--executor dask and no --scheduler: the LocalCluster's worker count)",
    )
    ap.add_argument(
        "--executor",
        choices=("local", "dask"),
        default="local",
        help="local: --jobs subprocesses on this machine (default); dask: one "
        "task per submission on a Dask distributed cluster",
    )
    ap.add_argument(
        "--scheduler",
        help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 "
        "(default: a LocalCluster on this machine)",
    )
    ap.add_argument(
        "--gpus",
        type=int,
        default=None,
        help="with --executor dask and no --scheduler: spread the workers over this many "
        "of this machine's GPUs, each GPU's workers on its share of the cores (default: "
        "every GPU it sees)",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=None,
        help="input seed (default: random, the same for every student)",
    )
    ap.add_argument(
        "--format",
        choices=("csv", "canvas", "gradescope"),
        default="csv",
        help="csv: one column per exercise; canvas: Canvas's gradebook import "
        "(one column per lesson; the per-exercise CSV is written beside it); "
        "gradescope: Gradescope's results.json for one student's notebooks",
    )
    ap.add_argument(
        "--roster",
        type=Path,
        help="CSV with submission,id[,name,sis_id,login,section]: maps submissions to LMS ids",
    )
    ap.add_argument(
        "--isolation",
        dest="isolation_choice",
        choices=("auto", "none"),
        default="auto",
        help="auto: run each worker in a private mount namespace where the system "
        "allows (hidden cases covered, course and outputs read-only); none: "
        "do not try (default auto)",
    )
    ap.add_argument(
        "--all-or-nothing",
        action="store_true",
        help="every exercise earns its points only if every case passes (default: "
        "write and predict exercises in proportion to the cases passed, "
        "debug and tune exercises all or nothing)",
    )
    ap.add_argument(
        "--cold",
        action="store_true",
        help="start every sandboxed process afresh (a new interpreter each) instead of "
        "forking it from a warm zygote: slower, for comparison",
    )
    ap.add_argument("--profile", type=Path, help="write where the time went (JSON, phases summed)")
    opts = ap.parse_args(argv)
    problem = preflight.arguments(opts)
    if problem:
        print(f"grade: {problem}", file=sys.stderr)
        return 2
    try:
        plans = load_plans(opts.notebooks)
    except (nbk.NotebookError, nbk.MarkerError) as exc:
        print(f"grade: cannot read the instructor notebooks: {exc}", file=sys.stderr)
        return 2
    if not plans:
        print(f"grade: no instructor notebook with exercises in {opts.notebooks}", file=sys.stderr)
        return 2
    problem = preflight.lesson(opts.lesson, plans)
    if problem:
        print(f"grade: {problem}", file=sys.stderr)
        return 2
    from .prepare import before_workers

    subs, summary, settings = before_workers(opts, plans)  # warm sandboxes starting
    if opts.format == "gradescope" and not any(s.size for s in subs):
        from .gradescope import write_results

        return write_results(
            opts.out,
            None,
            0.0,
            "No notebook (.ipynb) was found in your "
            "submission: upload the lesson's notebook file itself.",
        )
    if not subs:
        print(
            f"grade: no notebook (.ipynb) in {', '.join(map(str, opts.submissions))}",
            file=sys.stderr,
        )
        return 2
    files = subs
    t0 = time.perf_counter()
    from .classrun import grade_all

    rows = grade_all(files, plans, opts, settings, grade_one)
    if opts.format == "gradescope":  # one container, one student: all files are theirs
        for g in rows:
            g.student = "submission"
    rows = merge(rows)
    exercises = list(
        dict.fromkeys(
            e for p in plans.values() for e in p.exercises if any(e in g.max_points for g in rows)
        )
    )
    if opts.format == "canvas":
        from .lms import RosterError, read_roster, write_canvas

        try:
            roster = read_roster(opts.roster) if opts.roster else None
        except RosterError as exc:
            print(f"grade: {exc}", file=sys.stderr)
            return 2
        write_canvas(rows, opts.out, roster)
        write_csv(rows, opts.out.with_name(opts.out.stem + ".exercises.csv"), exercises)
    elif opts.format == "gradescope":
        from .gradescope import write_results

        write_results(opts.out, rows[0], time.perf_counter() - t0)
    else:
        write_csv(rows, opts.out, exercises)
    if opts.feedback:
        from .feedback import write_all

        t = time.perf_counter()
        summary += write_all(rows, opts.feedback)
        if opts.profile is not None and opts.profile.exists():  # the last phase
            prof = json.loads(opts.profile.read_text())
            prof["phases"]["feedback"] = round(time.perf_counter() - t, 4)
            opts.profile.write_text(json.dumps(prof, indent=1))
    for line in summary:
        print(f"note: {line}")
    print(
        f"graded {len(files)} notebook(s) of {len(rows)} student(s) in "
        f"{time.perf_counter() - t0:.0f} s (seed {settings.seed}) -> {opts.out}"
        + (f", feedback in {opts.feedback}" if opts.feedback else "")
    )
    return 0


SCORING = (
    "Scoring: a write or predict exercise earns its points in proportion to the "
    "cases (or answers) it passes; a debug or tune exercise earns them only when every "
    "case passes, because its given kernel passes most cases as given (0 points for "
    "11 of 12). --all-or-nothing makes every exercise all or nothing. Each student's "
    "feedback says which rule gave each score."
)
