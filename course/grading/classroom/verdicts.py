"""Whose fault it is: one vocabulary for the grader's CSV and the leaderboard's status.

- ``rejected``: something the submission sent is malformed or refused - a kernel unit, a
  file, a signature, a notebook, a reply from its sandbox.  The submission's fault, said in
  one course sentence (the exception's own message: every reader of submission data raises
  one of :func:`faults` with a sentence, never anything else).
- ``error``: the course failed (a bug, a broken spec, a database that is down).  Never the
  submission's fault, said so, and logged with its traceback for the instructor
  (:func:`course_failure`, the ``course.grading`` logger: stderr unless configured).

The grader's other statuses (``graded``, ``timeout``, ``crashed``, ``tampered``) and the
leaderboard's (``queued`` ... ``done``) say more about the same two sides.
"""

from __future__ import annotations

import logging

from ...exercises.bounded import clip

REJECTED = "rejected"
ERROR = "error"
log = logging.getLogger("course.grading")


def faults() -> tuple[type[BaseException], ...]:
    """The exceptions a reader of submission data raises when the data is at fault."""
    from ..source.allowed import NotAllowed
    from ..source.decorator import UnitError
    from ..source.signature import SignatureError
    from ..wall.wire import WireError
    from .notebook import MarkerError, NotebookError
    from .steps import TooMuchToRead

    return (
        UnitError,
        SignatureError,
        NotAllowed,
        NotebookError,
        MarkerError,
        TooMuchToRead,
        WireError,
    )


def is_fault(exc: BaseException) -> bool:
    """Whether ``exc`` says the submission sent something malformed (``rejected``)."""
    return isinstance(exc, faults())


def rejected_sentence(exc: BaseException) -> str:
    """The course sentence for a submission's fault."""
    return f"your submission was refused: {clip(str(exc), 400)}"


def course_failure(where: str, exc: BaseException) -> str:
    """Log the course's own failure (with its traceback) and return the sentence a
    student or the CSV shows: not their fault, the instructor has the details."""
    log.error("%s failed: %s: %s", where, type(exc).__name__, clip(str(exc), 300), exc_info=exc)
    return (
        f"{where} failed ({type(exc).__name__}: {clip(str(exc), 300)}); this is the course's "
        "fault, not your submission's: the instructor's log has the details"
    )


def classify(where: str, exc: BaseException) -> tuple[str, str]:
    """(status, sentence) of an exception a grading stage raised: ``rejected`` with the
    reader's sentence for the submission's fault, else ``error``, logged."""
    if is_fault(exc):
        return REJECTED, rejected_sentence(exc)
    return ERROR, course_failure(where, exc)
