"""Grades into a learning-management system: Canvas's gradebook CSV, matched by a roster.

``python -m course grade SUBMISSIONS --format canvas --roster roster.csv --out canvas.csv``
writes Canvas's gradebook-import layout - its leading columns ``Student, ID, SIS User ID,
SIS Login ID, Section``, a ``Points Possible`` row, then one column per lesson - and keeps
the per-exercise CSV beside it (``canvas.exercises.csv``).

The roster is a CSV with the columns ``submission`` (the name the grader gives a submission:
its folder or file prefix), ``id`` (Canvas's user id), and optionally ``name``, ``sis_id``,
``login`` (e-mail) and ``section``.  Nobody is dropped: a roster student with no submission
gets an empty cell (no grade) and is listed; a submission not on the roster is listed and
written to ``canvas.unmatched.csv`` with its scores, for the instructor to match by hand.
"""

from __future__ import annotations

import csv
from pathlib import Path

from . import csvsafe

LEADING = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


class RosterError(Exception):
    """A roster that cannot be used (the message says which row or column)."""


def read_roster(path: Path) -> dict:
    """submission name -> roster row (dict with id, name, sis_id, login, section)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise RosterError(f"cannot read the roster {path}: {exc}") from None
    if not rows or not {"submission", "id"} <= set(rows[0]):
        raise RosterError(
            f"{path}: the roster needs the columns `submission` and `id` "
            f"(found: {', '.join(rows[0]) if rows else 'no rows'})"
        )
    out = {}
    for n, r in enumerate(rows, start=2):
        key = (r.get("submission") or "").strip()
        if not key or not (r.get("id") or "").strip():
            raise RosterError(f"{path} row {n}: empty `submission` or `id`")
        if key in out:
            raise RosterError(f"{path} row {n}: submission {key!r} is listed twice")
        out[key] = {
            k: (r.get(k) or "").strip() for k in ("id", "name", "sis_id", "login", "section")
        }
    return out


def lesson_scores(g) -> dict:
    """lesson -> (points, possible) of one graded student (exercise points added up)."""
    from ...exercises import all_exercises

    lesson_of = {name: e.lesson for name, e in all_exercises().items()}
    out: dict[str, tuple[float, float]] = {}
    for name, possible in g.max_points.items():
        lesson = lesson_of.get(name, "other")
        got, tot = out.get(lesson, (0.0, 0.0))
        out[lesson] = (got + g.points.get(name, 0.0), tot + possible)
    return out


def write_canvas(rows, path: Path, roster: dict | None, log=print) -> list[str]:
    """Write Canvas's gradebook CSV; returns the messages about unmatched students."""
    scores = {g.student: lesson_scores(g) for g in rows}
    lessons = sorted({lesson for s in scores.values() for lesson in s})
    possible = {l: max(s[l][1] for s in scores.values() if l in s) for l in lessons}
    roster = (
        roster if roster is not None else {g.student: {"id": "", "name": g.student} for g in rows}
    )
    messages = []
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csvsafe.writer(f)
        w.writerow(LEADING + [f"{l} ({possible[l]:g})" for l in lessons])
        w.writerow(["Points Possible", "", "", "", ""] + [f"{possible[l]:g}" for l in lessons])
        for key, who in roster.items():
            s = scores.get(key)
            if s is None:
                messages.append(
                    f"{key} ({who.get('name') or who['id']}) is on the roster but "
                    "has no submission: left without a grade"
                )
            w.writerow(
                [
                    who.get("name") or key,
                    who["id"],
                    who.get("sis_id", ""),
                    who.get("login", ""),
                    who.get("section", ""),
                ]
                + [f"{s[l][0]:g}" if s and l in s else "" for l in lessons]
            )
    unmatched = [g for g in rows if g.student not in roster]
    if unmatched:
        other = path.with_name(path.stem + ".unmatched.csv")
        with open(other, "w", newline="", encoding="utf-8") as f:
            w = csvsafe.writer(f)
            w.writerow(["submission", "file"] + lessons)
            for g in unmatched:
                s = scores[g.student]
                w.writerow(
                    [g.student, g.submission] + [f"{s[l][0]:g}" if l in s else "" for l in lessons]
                )
                messages.append(
                    f"{g.student} ({g.submission}) is not on the roster: its scores "
                    f"are in {other.name}, not in the Canvas file"
                )
    for m in messages:
        log(f"  roster: {m}")
    return messages
