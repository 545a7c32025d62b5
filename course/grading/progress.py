"""Local record of which checks passed, in which mode, and when: ``course.progress()``.

Stored as JSON in ``$COURSE_PROGRESS_FILE`` or ``~/.numba-course/progress.json``; no server.
"""
from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path


def path() -> Path:
    """Where progress is stored."""
    return Path(os.environ.get("COURSE_PROGRESS_FILE",
                               Path.home() / ".numba-course" / "progress.json"))


def load() -> dict:
    """{exercise: {"passed", "mode", "when", "cases", "ever_passed"}} (empty if none)."""
    p = path()
    try:
        return json.loads(p.read_text()) if p.exists() else {}
    except (OSError, ValueError):
        return {}


def record(result) -> None:
    """Store the latest result of a check (never fails the check if the disk is read-only)."""
    data = load()
    prev = data.get(result.exercise, {})
    data[result.exercise] = {
        "passed": bool(result.passed),
        "mode": result.mode,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cases": f"{sum(c.passed for c in result.cases)}/{len(result.cases)}",
        "ever_passed": bool(result.passed) or prev.get("ever_passed", False),
    }
    try:
        p = path()
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(p)
    except OSError:
        pass


class Progress:
    """Every exercise of the course with its latest check (a table in a notebook)."""

    def __init__(self):
        from ..exercises import all_exercises

        self.data = load()
        self.exercises = all_exercises()

    def rows(self) -> list[tuple]:
        out = []
        for name, ex in sorted(self.exercises.items(), key=lambda kv: (kv[1].lesson, kv[0])):
            d = self.data.get(name)
            status = "not tried" if d is None else ("passed" if d["passed"] else "failed")
            out.append((ex.lesson, name, status, d and d["mode"], d and d["cases"],
                        d and d["when"]))
        return out

    @property
    def passed(self) -> int:
        return sum(1 for r in self.rows() if r[2] == "passed")

    def __repr__(self) -> str:
        lines = [f"Progress: {self.passed}/{len(self.exercises)} exercises passed ({path()})"]
        for lesson, name, status, mode, cases, when in self.rows():
            extra = f"  {mode}, {cases} cases, {when}" if mode else ""
            lines.append(f"  {lesson:<22} {name:<26} {status:<9}{extra}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colors = {"passed": "#1a7f37", "failed": "#b42318", "not tried": "#777"}
        body = "".join(
            f"<tr><td>{html.escape(lesson)}</td><td><code>{html.escape(name)}</code></td>"
            f"<td style='color:{colors[status]}'><b>{status}</b></td><td>{mode or ''}</td>"
            f"<td>{cases or ''}</td><td>{when or ''}</td></tr>"
            for lesson, name, status, mode, cases, when in self.rows())
        return (f"<div class='course-progress'><style>.course-progress td, .course-progress th "
                "{text-align:left !important}</style>"
                f"<b>Progress: {self.passed}/{len(self.exercises)} exercises passed</b>"
                "<table><tr><th>lesson</th><th>exercise</th><th>status</th><th>mode</th>"
                f"<th>cases</th><th>when</th></tr>{body}</table></div>")


def progress() -> Progress:
    """Which checks passed, in which mode, when."""
    return Progress()


def main(argv=None) -> int:
    """``python -m course progress``"""
    print(progress())
    return 0
