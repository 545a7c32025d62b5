"""One graded submission (:class:`Graded`: points, reasons, notes) and the grades CSV
written from them: one row per student (:func:`merge`), every cell through ``csvsafe``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import csvsafe


@dataclass
class Graded:
    """One submission's outcome: points per exercise and every reason for a lost point."""

    student: str
    submission: str
    lesson: str = ""
    mode: str = ""
    status: str = "graded"  # graded | rejected | timeout | crashed | tampered | error
    points: dict = field(default_factory=dict)  # exercise -> points earned
    max_points: dict = field(default_factory=dict)  # exercise -> points possible
    results: dict = field(default_factory=dict)  # exercise -> Judged.as_data()
    reasons: list = field(default_factory=list)  # for the CSV and the feedback
    notes: list = field(default_factory=list)  # informative, no points lost
    not_found: set = field(default_factory=set)  # exercises whose cell is missing
    whole: dict = field(default_factory=dict)  # exercise -> scored all or nothing
    seed: int = 0
    phases: dict = field(default_factory=dict)  # seconds per grading phase (``phases.py``)

    @property
    def total(self) -> float:
        return round(sum(self.points.values()), 2)

    @property
    def possible(self) -> float:
        return round(sum(self.max_points.values()), 2)


def merge(rows: list[Graded]) -> list[Graded]:
    """One row per student: several notebooks of one student are added up."""
    by = {}
    for g in rows:
        if g.student not in by:
            by[g.student] = g
            continue
        m = by[g.student]
        m.submission += f"; {g.submission}"
        m.lesson = "; ".join(x for x in (m.lesson, g.lesson) if x)
        m.mode = m.mode or g.mode
        m.status = m.status if g.status == "graded" else g.status
        for name in g.max_points:
            if name in m.max_points:
                m.notes.append(f"{name} was submitted twice; kept {g.submission}")
            m.points[name], m.max_points[name] = g.points[name], g.max_points[name]
        m.results.update(g.results)
        m.whole.update(g.whole)
        m.reasons += g.reasons
        m.notes += g.notes
    return list(by.values())


def write_csv(rows: list[Graded], path: Path, exercises: list[str]) -> None:
    """student, submission, lesson, mode, status, <exercise points>..., total, max, reasons."""
    from .executors import header, line

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csvsafe.writer(f)
        w.writerow(header(exercises))
        for g in rows:
            w.writerow(line(g, exercises))
    tmp.replace(path)  # written whole, after every worker has ended
