"""What one student may take of the service: judge time in a sliding window, and storage.

The queue is fair (``Store.queued``: round-robin across students), so a student's slow
submissions delay another's by at most one judging.  These caps keep one student from
holding the judge, or the disk, for long anyway:

- **Judge time**: at most ``Settings.judge_s`` seconds of judging (``started`` to
  ``finished``, or to now while running) per student in any ``Settings.judge_window_s``
  (default 1,200 s an hour: four submissions that run to the 300 s limit).  Past it a new
  submission gets ``429`` with the minutes until enough of that time has left the window,
  and ``Retry-After`` in seconds.
- **Storage**: the sources and units kept for a student (every submission is kept) at most
  ``Settings.quota_bytes`` (default 20 MB); a submission that would pass it gets ``413``.

The instructor's token is exempt from both (as from the rate limits).
"""

from __future__ import annotations

import json
import math

from .limits import Refused

JUDGE_S = 1200.0  # seconds of judging per student ...
JUDGE_WINDOW_S = 3600.0  # ... in any window this long
QUOTA_BYTES = 20_000_000  # bytes of sources and units kept per student


def used(intervals, start: float, now: float) -> float:
    """Seconds of ``intervals`` ((started, finished or None = running)) inside
    ``[start, now]``."""
    return sum(max(0.0, min(now if f is None else f, now) - max(s, start)) for s, f in intervals)


def wait_s(intervals, budget: float, window: float, now: float) -> float:
    """Seconds until the judging inside the window is under ``budget`` (0 if it is now),
    counting running judgings as ending now."""
    if used(intervals, now - window, now) < budget:
        return 0.0
    lo, hi = 0.0, window  # used(...) falls as the window's start moves on
    for _ in range(40):
        mid = (lo + hi) / 2
        if used(intervals, now - window + mid, now) < budget:
            hi = mid
        else:
            lo = mid
    return hi


def check_judge_time(store, student: str, budget: float, window: float, now: float) -> None:
    """Refused (429) when the student has been judged ``budget`` s in the last ``window``."""
    wait = wait_s(store.judging(student, now - window), budget, window, now)
    if wait > 0:
        retry = math.ceil(wait) + 1
        raise Refused(
            429,
            f"your submissions have been judged for {budget:.0f} s in the "
            f"last {window / 60:.0f} minutes, the most one student may take; "
            f"try again in {math.ceil(retry / 60)} minute(s)",
            {"Retry-After": str(retry)},
        )


def size(source: str, unit) -> int:
    """Bytes a submission adds to the database (as ``Store.add`` writes it)."""
    return len(source.encode("utf-8", "surrogatepass")) + (
        0 if unit is None else len(json.dumps(unit).encode())
    )


def check_storage(store, student: str, adds: int, quota: int) -> None:
    """Refused (413) when keeping ``adds`` more bytes would pass the student's quota."""
    have = store.stored_bytes(student)
    if have + adds > quota:
        raise Refused(
            413,
            f"your submissions already take {have / 1e6:.3g} MB of the "
            f"leaderboard's storage and this one would add {adds / 1e6:.3g} "
            f"MB; the limit is {quota / 1e6:g} MB per student: ask your "
            "instructor to raise it",
        )
