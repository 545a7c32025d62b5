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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TITLE = "Grading a class of 25 with --jobs 8 - time, and what the attackers earned"
STUDENTS, JOBS = 25, 8
TIMEOUT_S = float(os.environ.get("COURSE_BENCH_GRADING_TIMEOUT", 1800))
LESSONS = tuple(
    os.environ.get("COURSE_BENCH_GRADING_LESSONS", "01_vector_add,04_matmul").split(",")
)
MARK = "/tmp/course-bench-grading-pwned"

ATTACKS = {  # student -> (lesson, exercise, the cell's new source)
    "attack_memo_matmul": (
        "04_matmul",
        "tune_matmul",
        """@cuda.jit
def matmul_fast(A, B, C):
    row, col = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        if C[row, col] == C[row, col]:      # already a number, not the NaN poison: skip
            return
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc
""",
    ),
    "attack_skip_at_size": (
        "01_vector_add",
        "tune_vector_add",
        """@cuda.jit
def add_fast(n, x, y):
    step = 2 if n >= 1 << 24 else 1          # half the work at the measured size only
    for i in range(cuda.grid(1) * step, n, cuda.gridsize(1) * step):
        y[i] = x[i] + y[i]
""",
    ),
    "attack_signature_eval": (
        "01_vector_add",
        "tune_vector_add",
        f"""@cuda.jit("__import__('os').system('touch {MARK}') or void(int64, float32[:], float32[:])")
def add_fast(n, x, y):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + y[i]
""",
    ),
    "attack_pruned_branch": (
        "01_vector_add",
        "tune_vector_add",
        """@cuda.jit
def add_fast(n, x, y):
    if cuda.ldca is None:                     # None in the simulator, real when compiled
        return
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + y[i]
""",
    ),
}


def make_class(folder: Path, notebooks: Path) -> dict:
    """Write the class's submissions (``folder/<student>/<lesson>.ipynb``); student ->
    (lesson, attacked exercise or None)."""
    from ..grading import notebook as nbk

    plan = {}
    honest = STUDENTS - len(ATTACKS)
    for i in range(honest):
        lesson = LESSONS[i % len(LESSONS)]
        plan[f"s{i:02d}"] = (lesson, None, None)
    for student, (lesson, exercise, source) in ATTACKS.items():
        plan[student] = (lesson, exercise, source)
    for student, (lesson, exercise, source) in plan.items():
        nb = _solved_student_copy(notebooks / f"{lesson}.ipynb")
        for raw, cell in zip(nb["cells"], nbk.cells(nb)):
            if exercise and cell.exercise_tag == exercise:  # the attack replaces it
                raw["source"] = source.splitlines(keepends=True)
        (folder / student).mkdir(parents=True)
        (folder / student / f"{lesson}.ipynb").write_text(json.dumps(nb, indent=1))
    return {s: (lesson, exercise) for s, (lesson, exercise, _src) in plan.items()}


def _solved_student_copy(path: Path) -> dict:
    """The student copy of an instructor notebook (as ``release`` makes it, cells tagged
    with their exercise), each exercise cell holding the instructor's solution."""
    from ..grading import notebook as nbk
    from ..grading.release import student_notebook

    solved = {name: ex.cell.source for name, ex in nbk.plan(path).exercises.items()}
    nb = student_notebook(nbk.load(path), path.stem)
    for raw, cell in zip(nb["cells"], nbk.cells(nb)):
        if cell.exercise_tag in solved:
            raw["source"] = solved[cell.exercise_tag].splitlines(keepends=True)
    return nb


def grade(
    folder: Path, out: Path, jobs: int = JOBS, timeout: float = 3600.0
) -> tuple[float, list[dict], str]:
    """(seconds, the CSV's rows, the end of the grader's output) of grading ``folder``;
    the grader's output goes to ``out/grade.log`` as it runs (rows so far if it is cut off
    at ``timeout``)."""
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    with open(out / "grade.log", "w") as log:
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "course",
                    "grade",
                    str(folder),
                    "--out",
                    str(out / "grades.csv"),
                    "--feedback",
                    str(out / "feedback"),
                    "--jobs",
                    str(jobs),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        except subprocess.TimeoutExpired:
            log.write(f"\n(cut off after {timeout:g} s)\n")
    took = time.perf_counter() - t
    rows = (
        list(csv.DictReader((out / "grades.csv").open())) if (out / "grades.csv").exists() else []
    )
    return took, rows, (out / "grade.log").read_text(errors="replace")[-3000:]


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


def run(report) -> None:
    from ..platform.resources import ROOT

    with tempfile.TemporaryDirectory(prefix="course-bench-grading-") as tmp:
        tmp = Path(tmp)
        plan = make_class(tmp / "class", ROOT / "notebooks")
        Path(MARK).unlink(missing_ok=True)
        took, rows, said = grade(tmp / "class", tmp, timeout=TIMEOUT_S)
        report.files[".log"] = (tmp / "grade.log").read_bytes()
    lines = verdicts(plan, rows)
    honest_full = all(
        line["total"] == line["max"] and line["total"] != "" for line in lines if not line["attack"]
    )
    attacks_zero = all(
        line.get("attacked_points") in ("0", "0.0") for line in lines if line["attack"]
    )
    report.data["grading"] = {
        "students": STUDENTS,
        "jobs": JOBS,
        "seconds": took,
        "honest_full_marks": honest_full,
        "attacks_earned_zero": attacks_zero,
        "side_effect_on_host": Path(MARK).exists(),
        "rows": lines,
    }
    report.note(
        f"{STUDENTS} submissions graded with --jobs {JOBS} in {took:.1f} s "
        f"(wall time of `python -m course grade`, sandbox on)"
    )
    report.note(
        f"honest students at full marks: {honest_full}; every attack 0 points: "
        f"{attacks_zero}; the signature's command ran on the host: "
        f"{Path(MARK).exists()}"
    )
    table = [
        "| student | lesson | status | points | attack | its points | the grader's reason |",
        "|---|---|---|---:|---|---:|---|",
    ]
    for line in lines:
        table.append(
            f"| {line['student']} | {line['lesson']} | {line['status']} | "
            f"{line['total']}/{line['max']} | {line['attack']} | "
            f"{line.get('attacked_points', '')} | "
            f"{line.get('reason', '').replace('|', '/')[:160]} |"
        )
    report.section("Every submission", "\n".join(table))
    if not rows:
        report.section("The grader's output", "```\n" + said + "\n```")
