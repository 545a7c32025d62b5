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

- **Reads**: a student has at most one submission being read at a time (a second one sent
  meanwhile gets ``429``), and every read *attempt* counts against the rate, those the reader
  refused or that ran out of time included (:class:`Reads`): one student cannot hold more
  than one reader, nor keep one busy past the rate.

The checks and the reservation of a read are one step of the event loop (no ``await``
between them, :func:`check_submission`), so submissions sent at the same moment cannot all
pass them.  The instructor's token is exempt from all of these (as from the rate limits).
"""

from __future__ import annotations

import json
import math
import time
from collections import deque

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


class Reads:
    """Per student: whether a read is in flight, and the times of read attempts that stored
    nothing (refused, timed out, past the quota) - the store counts the others.  Bounded:
    one entry per student of the roster, each holding at most the window's attempts."""

    def __init__(self) -> None:
        self._busy: set[str] = set()
        self._unstored: dict[str, deque[float]] = {}

    def unstored(self, student: str, since: float) -> int:
        times = self._unstored.get(student)
        while times and times[0] < since:
            times.popleft()
        return len(times) if times else 0

    def check(self, student: str) -> None:
        """Refused (429) while the student has a read in flight."""
        if student in self._busy:
            raise Refused(
                429,
                "one of your submissions is being read now; send the next when it has "
                "its answer (one at a time per student)",
                {"Retry-After": "10"},
            )

    def begin(self, student: str) -> None:
        """Reserve the student's one read (Refused, 429, while another is in flight)."""
        self.check(student)
        self._busy.add(student)

    def end(self, student: str, stored: bool, now: float) -> None:
        self._busy.discard(student)
        if not stored:
            self._unstored.setdefault(student, deque()).append(now)

    def end_after(self, read, student: str, stored: bool) -> None:
        """:meth:`end` now, or when ``read`` (an asyncio future) is done if it still runs
        (its client gone): the student's reader stays theirs until then."""
        if read is None or read.done():
            self.end(student, stored, time.time())
        else:
            read.add_done_callback(lambda f: f.cancelled() or f.exception() or None)
            read.add_done_callback(lambda f: self.end(student, False, time.time()))


def check_submission(store, reads: Reads, student: str, settings, least: int, now: float):
    """Every limit of a student's new submission (Refused, 429 or 413, else), then its read
    reserved (``reads.end`` releases it); synchronous, so atomic on the event loop."""
    reads.check(student)  # one read at a time, before any other limit
    since = now - settings.per_s
    if store.submitted_since(student, since) + reads.unstored(student, since) >= settings.rate:
        raise Refused(
            429,
            f"too many submissions: {settings.rate} per {settings.per_s:.0f} s (every one "
            "read counts, refused ones too); try again in a minute",
            {"Retry-After": str(int(settings.per_s))},
        )
    if store.waiting(student) >= settings.max_waiting:
        raise Refused(
            429,
            f"you already have {settings.max_waiting} submissions "
            "waiting; try again when one is done",
            {"Retry-After": "30"},
        )
    check_judge_time(store, student, settings.judge_s, settings.judge_window_s, now)
    check_storage(store, student, least, settings.quota_bytes)
    reads.begin(student)
