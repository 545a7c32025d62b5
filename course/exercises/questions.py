"""A *predict* exercise's questions and how an answer is judged (the lessons' questions:
``predict.py``).

The student answers in a dict, one entry per question; :meth:`Predict.judge_answer` gives
one case per question against the instructor's key, and never the key's value.  Every piece
of the answer a message quotes (an unknown key, a wrong value) is bounded
(``bounded.py``): an answer of 22,000 made-up keys is named by its first few.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from . import Exercise
from .bounded import listed, shown
from .outcome import CaseResult

MAX_NEAR = 64  # unknown keys looked at for a misspelling of a question's key
MAX_NEAR_LEN = 64  # characters of a key that can still be a misspelling


@dataclass
class Question:
    """One number or choice to predict, and how to work it out (never its value)."""

    key: str  # the answer dict's key
    prompt: str  # what is asked (shown in the report)
    explain: str  # the method (shown on a wrong answer)
    rtol: float = 0.0  # relative tolerance for floats (0: exact)
    choices: tuple = ()  # for multiple choice: the allowed strings


NO_KEY = (
    "answered, but there is no answer key here to judge it with: the grader scores it "
    "with your instructor's key"
)  # the grader's verdict without a key (a failure: it never passes unjudged)
ANSWERED = "answered: recorded for grading (this copy has no answer key)"


class Predict(Exercise):
    """Base class: subclasses list their :class:`Question`s."""

    def questions(self) -> list[Question]:
        raise NotImplementedError

    def cases(self):
        return []

    def judge_answer(self, answer, key: dict | None) -> list[CaseResult]:
        """One CaseResult per question against ``key`` (the instructor's answers, which the
        grader passes: ``course.grading.hidden.answers_for``; None in a student's copy);
        never raises."""
        qs = self.questions()
        if not isinstance(answer, dict):
            res = CaseResult("your answer", "")
            res.fail(
                f"expected a dict with the keys {', '.join(repr(q.key) for q in qs)}; "
                f"got a {shown(type(answer).__name__)}"
            )
            return [res]
        notes = unanswered([q.key for q in qs], answer)
        return [
            judge(q, answer.get(q.key, None), key, notes.get(q.key, "no answer yet")) for q in qs
        ]

    def record_answer(self, answer) -> list[CaseResult]:
        """A copy with no key (a student's): one case per question, passed when it has an
        answer the grader can judge (a number, or one of the choices: message
        :data:`ANSWERED`), failed when it has none or one that cannot be judged.  Nothing
        here says whether an answer is right: the grader does, with the key."""
        cases = self.judge_answer(answer, None)
        for c in cases:
            if c.message == NO_KEY:
                c.passed, c.message = True, ANSWERED
        return cases

    experiment = ""  # where the notebook runs the experiment, right after the check


def unanswered(keys: list, answer: dict) -> dict:
    """What to say for each question with no answer when the answer has keys that are no
    question's: the unknown key that looks like it (a misspelling), or the unknown keys
    that look like none (the first few, and how many more)."""
    unknown = [k for k in answer if k not in keys]
    missing = [k for k in keys if answer.get(k) is None]
    if not unknown:
        return {}
    near_ones = {  # only the first few short keys can be a misspelling: bounded work
        str(k): k for k in unknown[:MAX_NEAR] if len(str(k)) <= MAX_NEAR_LEN
    }
    notes, matched = {}, set()
    for k in missing:
        near = difflib.get_close_matches(
            k, [u for u in near_ones if u not in matched], n=1, cutoff=0.6
        )
        if near:
            matched.add(near[0])
            notes[k] = (
                f"no answer under {k!r}, but your answer has the unknown key "
                f"{shown(near_ones[near[0]])}: rename it {k!r}"
            )
    rest = [u for i, u in enumerate(unknown) if not (i < MAX_NEAR and str(u) in matched)]
    for k in missing:
        if k not in notes and rest:
            notes[k] = (
                f"no answer under {k!r}; your answer's key{'s' * (len(rest) > 1)} "
                f"{listed(rest)} {'are' if len(rest) > 1 else 'is'} no question's key "
                f"(the keys: {', '.join(repr(q) for q in keys)})"
            )
    return notes


def judge(q: Question, got, key: dict | None, unanswered: str = "no answer yet") -> CaseResult:
    """One question's case: ``got`` (the student's answer) against ``key``."""
    res = CaseResult(f"{q.key}: {q.prompt}", "")
    if got is None or got is ...:
        res.fail(unanswered)
    elif q.choices:
        if not isinstance(got, str) or got.strip().lower() not in q.choices:
            res.fail(f"answer one of {', '.join(repr(c) for c in q.choices)}; got {shown(got)}")
        elif key is None:
            res.fail(NO_KEY)
        elif got.strip().lower() != key[q.key]:
            res.fail(f"got {shown(got)}, which is not it: {q.explain}")
    elif isinstance(got, bool) or not isinstance(got, (int, float)) or not _finite(got):
        res.fail(f"answer a finite number; got {shown(got)}")
    elif key is None:
        res.fail(NO_KEY)
    elif abs(got - key[q.key]) > q.rtol * abs(key[q.key]):
        tol = f" (within {q.rtol:.0%})" if q.rtol else ""
        res.fail(f"got {shown(got)}, which is not it{tol}: {q.explain}")
    return res


def _finite(x) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False
