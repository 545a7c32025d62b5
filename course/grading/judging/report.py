"""What a check returns: :class:`CheckResult` (text and HTML views) of :class:`CaseResult`s;
and what grading one submission records, in order, for scoring and the leaderboard
(``session.Outcome.events``): :class:`Started`, :class:`CellError`, :class:`Judged` and
:class:`Tampering`.  These are records of the trusted side: the sandboxed worker's replies
are checked first (``wire.py``, ``session.Ran``) and only then become one of them; any text
in them is bounded when the record is made (``exercises/bounded.py``)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from ...exercises.bounded import clip
from ...exercises.outcome import CaseResult


@dataclass(frozen=True)
class Started:
    """A step went to the worker: a setup cell, or the cell of ``exercise``."""

    label: str  # "setup cell 3", "your vector_add cell (cell 7)"
    exercise: str | None


@dataclass(frozen=True)
class CellError:
    """A cell raised: the student's own error text (500 characters at most)."""

    label: str
    kind: str  # "setup" | "solution" | "code" (a leaderboard file)
    exercise: str | None
    message: str

    def __post_init__(self):  # the student's text, bounded where the record is made
        if isinstance(self.message, str):
            object.__setattr__(self, "message", clip(self.message))


@dataclass
class Judged:
    """One exercise judged: why it could not be checked (``error``), or its cases in the
    order they ran, a tune exercise's measured launch last (:attr:`timed`)."""

    name: str
    error: str = ""
    cases: list[CaseResult] = field(default_factory=list)

    def __post_init__(self):  # may quote the worker's text: bounded where it is made
        if isinstance(self.error, str):
            self.error = clip(self.error)

    @property
    def timed(self) -> CaseResult | None:
        """The measured launch's case (``CaseResult.timed``), None before it ran."""
        return next((c for c in self.cases if c.timed), None)

    def as_data(self) -> dict:
        """Plain data, as a graded row keeps it for the feedback and the exports."""
        return {"name": self.name, "error": self.error, "cases": case_events(self.cases)}


@dataclass(frozen=True)
class Tampering:
    """The worker broke the conversation (while ``exercise`` was being checked)."""

    exercise: str | None
    message: str

    def __post_init__(self):
        if isinstance(self.message, str):
            object.__setattr__(self, "message", clip(self.message))


def case_events(cases: list) -> list[dict]:
    """Case results as plain data: what a graded row, Gradescope and the leaderboard keep."""
    return [
        {
            "name": c.name,
            "launch": c.launch,
            "hidden": c.hidden,
            "passed": c.passed,
            "message": c.message,
            "figures": c.figures,
            "timed_out": c.timed_out,
            "timed": c.timed,
        }
        for c in cases
    ]


@dataclass
class CheckResult:
    """Result of ``course.check``: ``.passed`` plus a readable report."""

    exercise: str
    passed: bool
    mode: str
    seed: int
    spec: Any = None  # the exercise (``exercises.Exercise``)
    cases: list = field(default_factory=list)
    error: str = ""
    elapsed_s: float = 0.0
    hidden_run: bool = False
    interrupted: bool = False  # Stop (Ctrl-C) during the check: ``cases`` are those done

    # -- numbers ---------------------------------------------------------------------------
    @property
    def public(self) -> list:
        return [c for c in self.cases if not c.hidden]

    @property
    def hidden(self) -> list:
        return [c for c in self.cases if c.hidden]

    @property
    def failures(self) -> list:
        return [c for c in self.cases if not c.passed]

    def _hidden_note(self) -> str:
        spec = self.spec
        if spec is None or self.hidden_run:
            return ""
        from ..hidden import has_hidden_cases

        if has_hidden_cases(spec):
            return "More cases run when your work is graded."
        return ""

    @property
    def ran(self) -> bool:
        """True when at least one case ran (then the seed replays its inputs)."""
        return bool(self.cases)

    def _headline(self) -> str:
        mode = "GPU" if self.mode == "gpu" else "simulator"
        if self.interrupted:
            total = len(self.spec.cases()) if self.spec is not None else 0
            done = f" after {len(self.cases)} of {total} cases" if total else ""
            gpu = (
                " A kernel still running keeps the GPU busy until it ends: if the next "
                "check hangs, restart the notebook kernel."
                if self.mode == "gpu"
                else ""
            )
            return (
                f"{self.exercise}: interrupted{done} ({mode}, {self.elapsed_s:.1f} s) - "
                "no further case ran; the notebook's kernel is still usable: run the check "
                f"again when ready.{gpu}"
            )
        if self.error:
            return f"{self.exercise}: not checked - {self.error}"
        pub = self.public
        ok_pub = sum(c.passed for c in pub)
        line = f"{self.exercise}: {ok_pub}/{len(pub)} public cases passed"
        if self.hidden:
            line += f", {sum(c.passed for c in self.hidden)}/{len(self.hidden)} hidden"
        return f"{line} ({mode}, {self.elapsed_s:.1f} s)"

    def _tolerance_lines(self) -> list[str]:
        spec = self.spec
        if spec is None or not self.cases:
            return []
        try:
            names = list(spec.outputs(spec.cases()[0])) + list(spec.inout)
            tols = {str(spec.tolerance(spec.cases()[0], n)) for n in names}
        except Exception:  # noqa: BLE001 - the report must always render
            return []
        return [f"tolerance: {t}" for t in sorted(tols)]

    # -- views -----------------------------------------------------------------------------
    def __bool__(self) -> bool:
        return self.passed

    def _seed_shown(self) -> bool:
        """A replay seed only for a kernel check whose cases ran."""
        return self.ran and getattr(self.spec, "kind", "write") != "predict"

    def __repr__(self) -> str:
        mark = "PASS" if self.passed else "INTERRUPTED" if self.interrupted else "FAIL"
        lines = [f"[{mark}] {self._headline()}"]
        for c in self.cases:
            tag = "ok  " if c.passed else "FAIL"
            hid = " (hidden)" if c.hidden else ""
            lines.append(f"  {tag} {c.name}{hid}" + (f"  launch {c.launch}" if c.launch else ""))
            if c.message:
                lines.append(f"       -> {c.message}")
        lines += [f"  {t}" for t in self._tolerance_lines()]
        note = self._hidden_note()
        if note:
            lines.append(f"  {note}")
        if not self.passed and self.spec is not None and not self.error and not self.interrupted:
            lines.append(f"  expected: {self.spec.signature} - {self.spec.goal}")
        if self._seed_shown():
            lines.append(
                f"  seed {self.seed} (course.check(..., seed={self.seed}) replays these inputs)"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        color = "#1a7f37" if self.passed else "#b42318"
        bg = "#eefbf1" if self.passed else "#fff1f0"
        mark = "&#10004;" if self.passed else "&#10008;"
        rows = []
        for c in self.cases:
            status = (
                "<span style='color:#1a7f37'>pass</span>"
                if c.passed
                else "<span style='color:#b42318'><b>fail</b></span>"
            )
            rows.append(
                f"<tr><td>{html.escape(c.name)}{' <i>(hidden)</i>' if c.hidden else ''}</td>"
                f"<td><code>{html.escape(c.launch)}</code></td><td>{status}</td>"
                f"<td>{html.escape(c.message)}</td></tr>"
            )
        table = (
            (
                "<style>.course-check td, .course-check th {text-align:left !important;"
                "vertical-align:top}</style>"
                "<table style='border-collapse:collapse;font-size:90%'><tr><th>case"
                "</th><th>launch</th><th>result</th>"
                "<th>details</th></tr>" + "".join(rows) + "</table>"
            )
            if rows
            else ""
        )
        extra = [html.escape(t) for t in self._tolerance_lines()]
        note = self._hidden_note()
        if note:
            extra.append(f"<b>{html.escape(note)}</b>")
        if not self.passed and self.spec is not None and not self.error and not self.interrupted:
            extra.append(
                f"expected: <code>{html.escape(self.spec.signature)}</code> - "
                f"{html.escape(self.spec.goal)}"
            )
        if self._seed_shown():
            extra.append(f"seed {self.seed} (pass <code>seed={self.seed}</code> to replay)")
        if self.interrupted:
            color, bg, mark = "#9a6700", "#fff8e5", "&#9632;"
        return (
            f"<div class='course-check' data-passed='{str(self.passed).lower()}' "
            f"data-interrupted='{str(self.interrupted).lower()}' "
            f"style='border:2px solid {color};background:{bg};padding:6px 10px;"
            f"border-radius:6px'><div style='color:{color};font-weight:bold'>{mark} "
            f"{html.escape(self._headline())}</div>{table}"
            f"<div style='font-size:85%;color:#444'>{'<br>'.join(extra)}</div></div>"
        )
