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
        if not exercise and line["total"] != line["max"]:  # an honest student short of full
            line["reason"] = r.get("reasons", "")[:300]
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
    ``report``: wall and CPU time, the profile's phases, every student's verdict.  With
    ``--gpus 1,2`` the same class is graded once per GPU count on Dask (``--jobs`` workers
    a GPU) and the report compares the rates."""
    from ..platform.resources import ROOT

    opts = opts or parser().parse_args([])
    lessons = tuple(opts.lessons.split(","))
    counts = [int(g) for g in opts.gpus.split(",")] if opts.gpus else [None]
    with tempfile.TemporaryDirectory(prefix="course-bench-grading-") as tmp:
        tmp = Path(tmp)
        plan = make_class(tmp / "class", ROOT / "notebooks", opts.students, lessons, opts.attackers)
        runs = []
        for gpus in counts:
            jobs = opts.jobs * (gpus or 1)
            extra = ["--executor", opts.executor] + (["--cold"] if opts.cold else [])
            extra += ["--scheduler", opts.scheduler] if opts.scheduler else []
            extra += ["--gpus", str(gpus)] if gpus else []
            Path(MARK).unlink(missing_ok=True)
            print(
                f"grading {len(plan)} students ({', '.join(lessons)}), --jobs {jobs}, "
                f"{opts.executor}{', cold' if opts.cold else ''}"
                + (f", {gpus} GPU(s)" if gpus else ""),
                flush=True,
            )
            out = tmp / f"run-{len(runs)}"
            took, rows, said, profile = grade(tmp / "class", out, jobs, opts.timeout, tuple(extra))
            report.files[".log" if len(counts) == 1 else f".gpus{gpus}.log"] = (
                out / "grade.log"
            ).read_bytes()
            runs.append(_judged(plan, rows, took, profile, opts, jobs, gpus, said))
    for r in runs:
        _report_run(report, r, opts, len(runs) > 1)
    report.data["grading"] = runs[-1]
    if len(runs) > 1:
        report.data["grading_by_gpus"] = runs
        import course

        report.section(
            "The same class on more GPUs (Dask, --jobs workers a GPU, each GPU on its share "
            "of the cores)",
            gpu_table(runs)
            + (
                ""
                if course.MODE == "gpu"
                else "\n\nThe simulator has no GPU: every run's workers shared all the cores."
            ),
        )


def _judged(plan, rows, took, profile, opts, jobs, gpus, said) -> dict:
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
    done = len(rows)
    startup = sum(profile.get("startup", {}).values())
    return {
        "students": len(plan),
        "graded": done,
        "lessons": tuple(opts.lessons.split(",")),
        "jobs": jobs,
        "gpus": gpus,
        "executor": opts.executor,
        "warm": not opts.cold,
        "seconds": took,
        "per_minute": round(60 * done / took, 2) if took else 0.0,
        "startup_s": round(startup, 2),
        "per_minute_after_startup": round(60 * done / max(took - startup, 1e-9), 2),
        "cpu_s": profile.get("cpu_s"),
        "interrupted": bool(profile.get("interrupted")) or done < len(plan),
        "phases": profile.get("phases", {}),
        "startup": profile.get("startup", {}),
        "honest_full_marks": honest_full,
        "attacks_earned_zero": all(line.get("attacked_points") in ("0", "0.0") for line in judged),
        "side_effect_on_host": Path(MARK).exists(),
        "rows": lines,
        "said": said if not rows else "",
    }


def gpu_table(runs: list[dict]) -> str:
    """One line per GPU count: wall, start-up, both rates and each against the rate of the
    run on the fewest GPUs (whatever order they ran in)."""
    first = min(runs, key=lambda r: r["gpus"] or 0)
    x = f"x {first['gpus']} GPU(s)"
    out = [
        f"| GPUs | workers | graded | wall s | start-up s | per minute | {x} | "
        f"per minute after start-up | {x} |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        a = r["per_minute"] / max(first["per_minute"], 1e-9)
        b = r["per_minute_after_startup"] / max(first["per_minute_after_startup"], 1e-9)
        out.append(
            f"| {r['gpus']} | {r['jobs']} | {r['graded']}/{r['students']} | "
            f"{r['seconds']:.1f} | {r['startup_s']:.1f} | {r['per_minute']:.1f} | {a:.2f}x | "
            f"{r['per_minute_after_startup']:.1f} | {b:.2f}x |"
        )
    return "\n".join(out)


def _report_run(report, r: dict, opts, several: bool) -> None:
    from ..grading.phases import table

    on = f" on {r['gpus']} GPU(s)" if r["gpus"] else ""
    report.note(
        f"{r['graded']} of {r['students']} submissions graded{on} with --jobs {r['jobs']} "
        f"({r['executor']}, "
        f"{'cold: a new interpreter per sandbox' if opts.cold else 'warm: sandboxes forked from zygotes'}) "
        f"in {r['seconds']:.1f} s wall, {r['cpu_s'] or 0:.1f} s CPU of the grader and its "
        f"sandboxes ({r['per_minute']:.1f} submissions a minute; "
        f"{r['per_minute_after_startup']:.1f} after its {r['startup_s']:.1f} s of start-up)"
    )
    import course

    report.note(
        f"honest students at full marks: {r['honest_full_marks']}; every attack 0 points: "
        f"{r['attacks_earned_zero']}"
        + (
            ""
            if course.MODE == "gpu"
            else f" (not counted in the simulator: {', '.join(sorted(GPU_SIZE_ONLY))}, "
            "honest at the simulator's sizes)"
        )
        + f"; the signature's command ran on the host: {r['side_effect_on_host']}"
    )
    from ..exercises.tune_cards import rehearsal

    judged_as = rehearsal("this run's GPU")  # an instructor's rehearsal of another card
    if judged_as and not several:
        report.note(judged_as)
    if r["phases"]:
        report.section(
            f"Where the time went{on} (seconds summed over the class; exclusive phases)",
            table(r["phases"], r["seconds"], r["graded"], r["jobs"]),
        )
    if r["startup"]:
        steps = r["startup"]
        report.section(
            f"Before the first submission{on} (the grader's start-up, seconds)",
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
    for line in r["rows"]:
        table_rows.append(
            f"| {line['student']} | {line['lesson']} | {line['status']} | "
            f"{line['total']}/{line['max']} | {line['attack']} | "
            f"{line.get('attacked_points', '')} | "
            f"{line.get('reason', '').replace('|', '/')[:160]} |"
        )
    report.section(f"Every submission{on}", "\n".join(table_rows))
    if r["said"]:
        report.section("The grader's output", "```\n" + r["said"] + "\n```")


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
        "--gpus",
        help="with --executor dask: grade the class once per GPU count given, e.g. 1,2 "
        "(--jobs workers a GPU, each GPU on its share of the cores), and compare the rates",
    )
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

    ap = parser()
    opts = ap.parse_args(argv)
    if opts.gpus and (
        opts.executor != "dask"
        or opts.scheduler
        or not all(g.strip().isdigit() and int(g) > 0 for g in opts.gpus.split(","))
    ):
        ap.error("--gpus takes counts such as 1,2, with --executor dask and no --scheduler")
    if opts.gpus:
        import course

        from ..platform import runtime

        have = runtime.gpu_count()
        if course.MODE == "gpu" and max(int(g) for g in opts.gpus.split(",")) > have:
            ap.error(f"--gpus {opts.gpus}: this machine has {have} GPU(s)")
    name = "grading" + (f"-{opts.label}" if opts.label else "")
    print(f"== {name}: {TITLE}", flush=True)
    report = Report(name, TITLE)
    run(report, opts)
    for p in report.save(opts.out):
        print(p)
    return 0
