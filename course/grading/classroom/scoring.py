"""Points and reasons for one graded submission, from the events the grader recorded.

``batch.grade_one`` calls :func:`score` once the session ended: each exercise's verdict
(``report.Judged``, or its absence: a missing cell, a crash before the check, a timeout,
tampering) becomes points and one readable reason per lost point.

The rule (``grade --help``, instructor/README.md "Scoring", and every feedback line):
a *write* or *predict* exercise earns its points in proportion to the cases (answers) it
passes; a *debug* or *tune* exercise earns them only when every case passes - its given
kernel passes most cases as given, so partial credit would pay for the bug left in (or for
the slow kernel as handed out).  ``--all-or-nothing`` applies the second rule to all.
"""

from __future__ import annotations

from ..judging.report import CellError, Judged, Started, Tampering
from . import notebook as nbk


def score(g, plan: nbk.Plan, out, settings) -> None:
    """Points and reasons from what the session recorded (``session.Outcome``)."""
    started = [e for e in out.events if isinstance(e, Started)]
    tampered = next((e for e in out.events if isinstance(e, Tampering)), None)
    status, last, judged = out.status, out.last, {}
    g.mode = out.mode or g.mode
    for e in out.events:
        if isinstance(e, CellError):
            g.notes.append(
                e.message
                if e.kind == "solution" and e.exercise
                else f"{e.message} (grading went on)"
            )
        elif isinstance(e, Judged):
            judged[e.name] = e
            g.results[e.name] = e.as_data()  # plain data: feedback and exports
        elif isinstance(e, Tampering):
            g.notes.append(
                f"for the instructor: the student's process wrote to the grader's "
                f"pipe out of turn or broke the protocol ({e.message}); no "
                "points were given for what was not checked"
            )
    for name in plan.exercises:
        if name not in g.max_points or name in g.not_found:
            continue
        g.whole[name] = all_or_nothing(name, settings.all_or_nothing)
        e = judged.get(name)
        if e is None:
            if tampered is not None:
                g.reasons.append(
                    f"{name}: 0 points: tampered"
                    + (
                        f" - the grading conversation was broken while this exercise was being "
                        f"checked ({tampered.message})"
                        if tampered.exercise == name
                        else " - grading stopped when the conversation with the student's process "
                        "was broken" + (f" during {tampered.exercise}" if tampered.exercise else "")
                    )
                )
            elif status == "timeout":
                g.reasons.append(
                    f"{name}: not graded: the notebook did not finish within "
                    f"{settings.timeout:g} s"
                    + (
                        f"; it was running {started[-1].label} (an endless loop "
                        "there, or in a kernel that cell launches?)"
                        if started
                        else " (an endless loop?)"
                    )
                )
            elif status == "crashed":
                g.reasons.append(
                    f"{name}: not graded: the grader process died ({last})"
                    + (f" while running {started[-1].label}" if started else "")
                )
            else:
                g.reasons.append(f"{name}: not graded")
            continue
        cases = e.cases
        if e.error or not cases:
            g.reasons.append(f"{name}: 0 points: {e.error or 'no cases ran'}")
            continue
        ok = sum(c.passed for c in cases)
        full = g.max_points[name]
        if ok == len(cases):
            g.points[name] = full
            continue
        earned = 0.0 if g.whole[name] else round(full * ok / len(cases), 2)
        g.points[name] = earned
        first = next(c for c in cases if not c.passed)
        g.reasons.append(
            f"{name} (-{round(full - earned, 2):g}): {len(cases) - ok} of "
            f"{len(cases)} cases failed; first: {first.name}"
            f"{' (hidden)' if first.hidden else ''}: {first.message}"
        )


def all_or_nothing(name: str, every: bool = False) -> bool:
    """True when exercise ``name`` scores only if every case passes (debug, tune, or
    ``every``: ``--all-or-nothing``); False: in proportion to the cases passed."""
    return every or kind_of(name) in ("debug", "tune")


def rule(name: str, whole: bool) -> str:
    """The scoring rule of exercise ``name`` in words, for its feedback line."""
    kind = kind_of(name)
    if not whole:
        return "points in proportion to the cases passed"
    if kind in ("debug", "tune"):
        return f"a {kind} exercise scores only when every case passes"
    return "graded all or nothing (--all-or-nothing): it scores only when every case passes"


def kind_of(name: str) -> str:
    """The exercise's kind (write, predict, debug, tune); write for an unknown name."""
    from ...exercises import get

    try:
        return get(name).kind
    except KeyError:
        return "write"
