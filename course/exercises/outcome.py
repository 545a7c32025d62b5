"""The outcome of one case of a check: what exercises produce and grading collects.

It lives with the exercises (a tune exercise's target and a predict exercise's questions
make them too); ``course/grading/judging/report.py`` shows a list of them as a check's report.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bounded import clip

TIMED = "tune target"  # the name of a tune exercise's measured-launch case


@dataclass
class CaseResult:
    """The outcome of one case: its name, launch, and the first problem found (if any)."""

    name: str
    launch: str
    passed: bool = True
    message: str = ""
    timed_out: bool = False
    hidden: bool = False
    figures: dict | None = None  # a measured launch's raw figures (times, counts)
    timed: bool = False  # a tune exercise's measured launch, not a test case

    def fail(self, message: str, timed_out: bool = False) -> None:
        """Mark the case failed; the message is bounded here (``bounded.MAX_MESSAGE``)."""
        self.passed, self.message, self.timed_out = False, clip(message), timed_out


def split_timed(cases: list[dict]) -> tuple[list[dict], dict | None]:
    """(the test cases, the measured launch's case or None) of case results as plain data
    (``grading.report.case_events``): what Gradescope's and the class leaderboard read."""
    tests = [c for c in cases if not c.get("timed")]
    timed = next((c for c in cases if c.get("timed")), None)
    return tests, timed
