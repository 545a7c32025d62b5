"""A predict exercise's answers beside what the experiment found (the notebook cell right
after a predict check).

In a student's copy the check only records the answers for grading (there is no answer key
in the package); the lesson's next cell runs the experiment the question is about - a
launch in the simulator that counts, say - and shows it with :func:`compare`::

    answers.compare(answer_launch, {"grid2d_threads": int(counts[0]), ...})

Each row: the question's key, the student's answer, what the experiment found, and whether
they agree.  It judges nothing for grading (the grader does, with the instructor's key).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass


def _same(got, seen, rtol: float) -> bool:
    if isinstance(seen, str):
        return isinstance(got, str) and got.strip().lower() == seen.lower()
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return math.isfinite(got) and abs(got - seen) <= rtol * abs(seen)


@dataclass
class Comparison:
    """Rows of (key, your answer, the experiment's, same?)."""

    rows: list
    title: str = ""

    @property
    def agree(self) -> int:
        return sum(1 for r in self.rows if r[3])

    def _headline(self) -> str:
        return (
            f"{self.title + ': ' if self.title else ''}{self.agree} of {len(self.rows)} "
            "of your answers agree with the experiment"
        )

    def __repr__(self) -> str:
        lines = [self._headline()]
        for key, got, seen, same in self.rows:
            mark = "same   " if same else "differs"
            lines.append(f"  {mark} {key}: you said {got!r}, the experiment found {seen!r}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td><code>{html.escape(str(k))}</code></td><td>{html.escape(repr(g))}</td>"
            f"<td>{html.escape(repr(s))}</td><td style='color:"
            f"{'#1a7f37' if same else '#b42318'}'><b>{'same' if same else 'differs'}</b>"
            "</td></tr>"
            for k, g, s, same in self.rows
        )
        return (
            f"<div class='course-compare' data-agree='{self.agree}' data-rows="
            f"'{len(self.rows)}'><b>{html.escape(self._headline())}</b><table><tr><th>"
            "question</th><th>your answer</th><th>the experiment</th><th></th></tr>"
            f"{body}</table></div>"
        )


def compare(answer, seen: dict, title: str = "", rtol: float = 0.0) -> Comparison:
    """The student's ``answer`` (a dict) beside ``seen`` (what the experiment found), key by
    key in ``seen``'s order; a missing or non-numeric answer differs."""
    answer = answer if isinstance(answer, dict) else {}
    rows = [(k, answer.get(k), v, _same(answer.get(k), v, rtol)) for k, v in seen.items()]
    return Comparison(rows, title)
