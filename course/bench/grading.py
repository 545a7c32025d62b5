"""``python -m course bench grading``: grade a class of 25 on this machine, attackers included.

The rehearsal an instructor runs on the class's GPU box before the term, and the proof that
the grader's wall holds there (issue #38):

- 21 honest students, each submitting one lesson's student copy with every solution filled
  in, round-robin over :data:`LESSONS` (lessons 01 and 04: one tune exercise each; set
  ``COURSE_BENCH_GRADING_LESSONS`` for others);
- 4 attackers, each an honest notebook with one exercise cell replaced by an attack
  (:data:`ATTACKS`): a matmul that skips the work when its output already holds numbers
  (it ranked first at 0.012 ms before every timed run was judged), a vector add that skips
  half the work at the measured size, a signature string that runs Python when numba
  ``eval``s it, and a body that would be typed one way and simulated another;
- ``python -m course grade CLASS --jobs 8`` in a subprocess, timed;
- the report: the wall time, every student's points, and for each attacker the points of
  the attacked exercise (must be 0) with the grader's reason; honest students must get full
  marks.  Runs only when named (it grades for minutes).
"""

from __future__ import annotations

import csv
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .grading_attacks import ATTACKS, GPU_SIZE_ONLY, MARK

TITLE = "Grading a class - wall and CPU time, where it went, and what the attackers earned"
STUDENTS, JOBS = 25, 8
TIMEOUT_S = float(os.environ.get("COURSE_BENCH_GRADING_TIMEOUT", 1800))
LESSONS = tuple(
    os.environ.get("COURSE_BENCH_GRADING_LESSONS", "01_vector_add,04_matmul").split(",")
)


def make_class(
    folder: Path,
    notebooks: Path,
    students: int = STUDENTS,
    lessons: tuple = LESSONS,
    attackers: bool = True,
) -> dict:
    """Write the class's submissions (``folder/<student>/<lesson>.ipynb``): ``students``
    in all, the attackers among them when ``attackers`` (those of ``lessons``); student ->
    (lesson, attacked exercise or None)."""
    from ..grading.classroom import notebook as nbk

    plan = {}
    attacks = {k: v for k, v in ATTACKS.items() if attackers and v[0] in lessons}
    honest = max(0, students - len(attacks))
    for i in range(honest):
        lesson = lessons[i % len(lessons)]
        plan[f"s{i:03d}"] = (lesson, None, None)
    for student, (lesson, exercise, source) in attacks.items():
        plan[student] = (lesson, exercise, source)
    copies: dict = {}
    for student, (lesson, exercise, source) in plan.items():
        if lesson not in copies:
            copies[lesson] = json.dumps(_solved_student_copy(notebooks / f"{lesson}.ipynb"))
        nb = json.loads(copies[lesson])
        for raw, cell in zip(nb["cells"], nbk.cells(nb)):
            if exercise and cell.exercise_tag == exercise:  # the attack replaces it
                raw["source"] = source.splitlines(keepends=True)
        (folder / student).mkdir(parents=True)
        (folder / student / f"{lesson}.ipynb").write_text(json.dumps(nb, indent=1))
    return {s: (lesson, exercise) for s, (lesson, exercise, _src) in plan.items()}


def _solved_student_copy(path: Path) -> dict:
    """The student copy of an instructor notebook (as ``release`` makes it, cells tagged
    with their exercise), each exercise cell holding the instructor's solution."""
    from ..grading.classroom import notebook as nbk
    from ..grading.classroom.release import student_notebook

    solved = {name: ex.cell.source for name, ex in nbk.plan(path).exercises.items()}
    nb = student_notebook(nbk.load(path), path.stem)
    for raw, cell in zip(nb["cells"], nbk.cells(nb)):
        if cell.exercise_tag in solved:
            raw["source"] = solved[cell.exercise_tag].splitlines(keepends=True)
    return nb


def grade(
    folder: Path,
    out: Path,
    jobs: int = JOBS,
    timeout: float = 3600.0,
    extra: tuple = (),
) -> tuple[float, list[dict], str, dict]:
    """(seconds, the CSV's rows, the end of the grader's output, its profile) of grading
    ``folder`` (``extra``: more ``grade`` options: ``--executor``, ``--cold``...).  The
    grader's progress lines are printed and kept in ``out/grade.log`` as they come; at
    ``timeout``, Ctrl-C or SIGTERM the grader is stopped (SIGTERM: it writes its profile and
    the rows so far) and what it left is reported."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "course", "grade", str(folder), "--out", str(out / "grades.csv")]
    cmd += ["--feedback", str(out / "feedback"), "--jobs", str(jobs)]
    cmd += ["--profile", str(out / "profile.json"), *extra]
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    killer = threading.Timer(timeout, proc.send_signal, (signal.SIGTERM,))
    killer.start()
    previous = signal.signal(signal.SIGTERM, _interrupted)
    with open(out / "grade.log", "w") as log:
        try:
            for line in iter(proc.stdout.readline, b""):
                text = line.decode(errors="replace")
                log.write(text)
                print("  | " + text.rstrip(), flush=True)
        except KeyboardInterrupt:
            log.write("\n(interrupted: the grader was told to stop)\n")
            proc.send_signal(signal.SIGTERM)
            rest, _ = proc.communicate(timeout=60)
            log.write(rest.decode(errors="replace"))
        finally:
            killer.cancel()
            signal.signal(signal.SIGTERM, previous)
            proc.wait()
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    csv_path, prof_path = out / "grades.csv", out / "profile.json"
    rows = list(csv.DictReader(csv_path.open())) if csv_path.exists() else []
    profile = json.loads(prof_path.read_text()) if prof_path.exists() else {}
    profile["cpu_s"] = round(
        (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2
    )
    return took, rows, (out / "grade.log").read_text(errors="replace")[-3000:], profile


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def verdicts(plan: dict, rows: list[dict]) -> list[dict]:
    """One line per student: points, max, and for attackers the attacked exercise's points
    and the reason the grader gave."""
    out = []
    by = {r["student"]: r for r in rows}
    for student, (lesson, exercise) in sorted(plan.items()):
        r = by.get(student, {})
        line = {
            "student": student,
            "lesson": lesson,
            "status": r.get("status", "missing"),
            "total": r.get("total", ""),
            "max": r.get("max", ""),
            "attack": exercise or "",
        }
        if exercise:
            line["attacked_points"] = r.get(exercise, "")
            line["reason"] = next(
                (x for x in r.get("reasons", "").split(" | ") if exercise in x),
                r.get("reasons", ""),
            )[:300]
        out.append(line)
    return out


def run(report, opts=None) -> None:
    """Grade one class (``opts``: :func:`main`'s options; none: the rehearsal) into
    ``report``: wall and CPU time, the profile's phases, every student's verdict."""
    from ..grading.phases import table
    from ..platform.resources import ROOT

    opts = opts or parser().parse_args([])
    lessons = tuple(opts.lessons.split(","))
    extra = ["--executor", opts.executor] + (["--cold"] if opts.cold else [])
    extra += ["--scheduler", opts.scheduler] if opts.scheduler else []
    with tempfile.TemporaryDirectory(prefix="course-bench-grading-") as tmp:
        tmp = Path(tmp)
        plan = make_class(tmp / "class", ROOT / "notebooks", opts.students, lessons, opts.attackers)
        Path(MARK).unlink(missing_ok=True)
        print(
            f"grading {len(plan)} students ({', '.join(lessons)}), --jobs {opts.jobs}, "
            f"{opts.executor}{', cold' if opts.cold else ''}",
            flush=True,
        )
        took, rows, said, profile = grade(tmp / "class", tmp, opts.jobs, opts.timeout, tuple(extra))
        report.files[".log"] = (tmp / "grade.log").read_bytes()
    lines = verdicts(plan, rows)
    honest_full = all(
        line["total"] == line["max"] and line["total"] != "" for line in lines if not line["attack"]
    )
    import course

    judged = [
        line
        for line in lines
        if line["attack"] and (course.MODE == "gpu" or line["student"] not in GPU_SIZE_ONLY)
    ]
    attacks_zero = all(line.get("attacked_points") in ("0", "0.0") for line in judged)
    done = len(rows)
    report.data["grading"] = {
        "students": len(plan),
        "graded": done,
        "lessons": lessons,
        "jobs": opts.jobs,
        "executor": opts.executor,
        "warm": not opts.cold,
        "seconds": took,
        "per_minute": round(60 * done / took, 2) if took else 0.0,
        "cpu_s": profile.get("cpu_s"),
        "interrupted": bool(profile.get("interrupted")) or done < len(plan),
        "phases": profile.get("phases", {}),
        "startup": profile.get("startup", {}),
        "honest_full_marks": honest_full,
        "attacks_earned_zero": attacks_zero,
        "side_effect_on_host": Path(MARK).exists(),
        "rows": lines,
    }
    report.note(
        f"{done} of {len(plan)} submissions graded with --jobs {opts.jobs} ({opts.executor}, "
        f"{'cold: a new interpreter per sandbox' if opts.cold else 'warm: sandboxes forked from zygotes'}) "
        f"in {took:.1f} s wall, {profile.get('cpu_s', 0):.1f} s CPU of the grader and its "
        f"sandboxes ({60 * done / max(took, 1e-9):.1f} submissions a minute)"
    )
    report.note(
        f"honest students at full marks: {honest_full}; every attack 0 points: "
        f"{attacks_zero}"
        + (
            ""
            if course.MODE == "gpu"
            else f" (not counted in the simulator: {', '.join(sorted(GPU_SIZE_ONLY))}, "
            "honest at the simulator's sizes)"
        )
        + f"; the signature's command ran on the host: {Path(MARK).exists()}"
    )
    from ..exercises.tune_cards import rehearsal

    judged_as = rehearsal("this run's GPU")  # an instructor's rehearsal of another card
    if judged_as:
        report.note(judged_as)
    if profile.get("phases"):
        report.section(
            "Where the time went (seconds summed over the class; exclusive phases)",
            table(profile["phases"], took, done, opts.jobs),
        )
    if profile.get("startup"):
        steps = profile["startup"]
        report.section(
            "Before the first worker (the grader's start-up, seconds)",
            "\n".join(
                ["| step | seconds |", "|---|---:|"]
                + [f"| {k} | {v:.1f} |" for k, v in steps.items()]
                + [f"| **all steps** | {sum(steps.values()):.1f} |"]
            ),
        )
    table_rows = [
        "| student | lesson | status | points | attack | its points | the grader's reason |",
        "|---|---|---|---:|---|---:|---|",
    ]
    for line in lines:
        table_rows.append(
            f"| {line['student']} | {line['lesson']} | {line['status']} | "
            f"{line['total']}/{line['max']} | {line['attack']} | "
            f"{line.get('attacked_points', '')} | "
            f"{line.get('reason', '').replace('|', '/')[:160]} |"
        )
    report.section("Every submission", "\n".join(table_rows))
    if not rows:
        report.section("The grader's output", "```\n" + said + "\n```")


def parser():
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m course bench grading",
        description="grade a generated class (honest solution notebooks and attackers) "
        "and report time, CPU, the per-phase profile and every verdict",
    )
    ap.add_argument(
        "--students", type=int, default=STUDENTS, help="class size (attackers included)"
    )
    ap.add_argument("--lessons", default=",".join(LESSONS), help="comma-separated lessons")
    ap.add_argument("--no-attackers", dest="attackers", action="store_false")
    ap.add_argument("--jobs", type=int, default=JOBS)
    ap.add_argument("--executor", choices=("local", "dask"), default="local")
    ap.add_argument("--scheduler", help="a Dask scheduler's address (else a LocalCluster)")
    ap.add_argument(
        "--cold", action="store_true", help="a new interpreter per sandbox (the old start)"
    )
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="stop the grader after this")
    ap.add_argument("--label", default="", help="added to the report's name")
    ap.add_argument("--out", default=None, help="folder for the report (default assets/benchmarks)")
    return ap


def main(argv=None) -> int:
    """``python -m course bench grading [--students N] [--lessons A,B] [--jobs N] ...``"""
    from . import Report

    opts = parser().parse_args(argv)
    name = "grading" + (f"-{opts.label}" if opts.label else "")
    print(f"== {name}: {TITLE}", flush=True)
    report = Report(name, TITLE)
    run(report, opts)
    for p in report.save(opts.out):
        print(p)
    return 0
