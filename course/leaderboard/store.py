"""The leaderboard's storage: one SQLite file in WAL mode, every submission kept.

Tables: ``tokens`` (a student's name and the SHA-256 of their token; the token itself is
written once, to the instructor's CSV, and never stored) and ``submissions`` (who, board,
the source and kernel unit sent, status, verdict, every timing figure, the device and the
versions it ran with, and when it was queued, started and finished).  A submission is
written before the HTTP answer says 202, so a crash after that loses nothing: at start-up,
work that was ``testing`` or ``timing`` when the service stopped goes back to ``queued`` -
unless it had been started ``MAX_ATTEMPTS`` (2) times already (``attempts`` counts claims):
a submission whose judging stopped the service twice ends ``error`` with ``BROKE_TWICE`` and
is never queued again.  Every start counts, a restart on purpose too (a stop could come
from the work itself, where the sandbox cannot keep it from signalling the service).  A
database from before ``attempts`` gets the column at open.

The queue is fair (:meth:`Store.queued`): the next submission judged is the oldest one of
the student served least recently, so one student's queue never holds the others' back by
more than one judging.  The file (and its ``-wal``/``-shm``) is made mode 0600 - it holds
every student's sources and the tokens' hashes - and an existing one is narrowed to 0600;
the folder around it is left as it is.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
from pathlib import Path

from .ranking import Ranking, row

SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY, student TEXT NOT NULL UNIQUE, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  student TEXT NOT NULL, board TEXT NOT NULL, function TEXT NOT NULL,
  source TEXT NOT NULL, unit TEXT, kind TEXT NOT NULL DEFAULT 'student',
  status TEXT NOT NULL DEFAULT 'queued',
  passed INTEGER, message TEXT, mean_ms REAL, std_ms REAL, best_ms REAL, median_ms REAL,
  runs INTEGER, figures TEXT, cases TEXT, device TEXT, versions TEXT, mode TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  created REAL NOT NULL, started REAL, finished REAL);
CREATE INDEX IF NOT EXISTS by_board ON submissions (board, status);
CREATE INDEX IF NOT EXISTS by_student ON submissions (student, created);
"""
STATUSES = ("queued", "testing", "timing", "done", "rejected", "error")
RESULT_FIELDS = (
    "passed",
    "message",
    "mean_ms",
    "std_ms",
    "best_ms",
    "median_ms",
    "runs",
    "figures",
    "cases",
    "device",
    "versions",
    "mode",
)
KINDS = ("student", "course")

MAX_ATTEMPTS = 2
BROKE_TWICE = "judging this submission stopped the service twice; it is not queued again"
COURSE_PREFIX = "course:"  # the student name of the course's own entries: course:NAME


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same_token(given: str, known: str | None) -> bool:
    """Is ``given`` the token ``known``?  Compared as bytes in constant time, so any text
    (a header's non-ASCII bytes too) is an answer, never an error."""
    if not given or not known:
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), known.encode("utf-8", "surrogateescape")
    )


class Store(Ranking):
    """Thread-safe access to one leaderboard database (one connection, one lock)."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private(self.path)
        self._lock = threading.Lock()
        self.allowed: set | None = None
        self._db = sqlite3.connect(
            str(self.path), check_same_thread=False, timeout=30, isolation_level=None
        )
        self._db.row_factory = sqlite3.Row
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            cols = {r["name"] for r in self._db.execute("PRAGMA table_info(submissions)")}
            for extra in ("-wal", "-shm"):  # made by WAL mode, same mode
                if Path(f"{self.path}{extra}").exists():
                    private(Path(f"{self.path}{extra}"))
            if "attempts" not in cols:  # a database from before attempts
                self._db.execute(
                    "ALTER TABLE submissions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0"
                )
            if "kind" not in cols:  # before kinds, a course entry was named course:NAME
                self._db.execute(
                    "ALTER TABLE submissions ADD COLUMN kind TEXT NOT NULL DEFAULT 'student'"
                )
                self._db.execute(
                    "UPDATE submissions SET kind = 'course' WHERE student LIKE ? AND unit LIKE ?",
                    (COURSE_PREFIX + "%", '{"course_kernel":%'),
                )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _q(self, sql: str, args=()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _x(self, sql: str, args=()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    # -- tokens ---------------------------------------------------------------------------
    def issue_tokens(self, students) -> tuple[list[tuple[str, str]], list[str]]:
        """(new (student, token) pairs, students who already had one).  Only hashes stay."""
        have = {r["student"] for r in self._q("SELECT student FROM tokens")}
        new, kept = [], []
        for s in students:
            if s in have:
                kept.append(s)
                continue
            token = secrets.token_urlsafe(24)
            self._x("INSERT INTO tokens VALUES (?, ?, ?)", (hash_token(token), s, time.time()))
            have.add(s)
            new.append((s, token))
        return new, kept

    def restrict_to(self, students: set) -> None:
        """Only these students' tokens open the service (a roster; dropped students out)."""
        self.allowed = set(students)

    def student_for(self, token: str) -> str | None:
        rows = self._q("SELECT student FROM tokens WHERE hash = ?", (hash_token(token),))
        student = rows[0]["student"] if rows else None
        if student is not None and self.allowed is not None and student not in self.allowed:
            return None
        return student

    # -- submissions ----------------------------------------------------------------------
    def add(
        self,
        student: str,
        board: str,
        function: str,
        source: str,
        unit: dict | None,
        kind: str = "student",
    ) -> int:
        """A queued submission; ``kind`` "course" for the course's own kernel, entered by
        the instructor (its ``student`` is the name shown, ``course:NAME``)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        cur = self._x(
            "INSERT INTO submissions (student, board, function, source, unit, "
            "kind, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                student,
                board,
                function,
                source,
                json.dumps(unit) if unit is not None else None,
                kind,
                time.time(),
            ),
        )
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    def submitted_since(self, student: str, since: float) -> int:
        return self._q(
            "SELECT COUNT(*) AS n FROM submissions WHERE student = ? AND created >= ?",
            (student, since),
        )[0]["n"]

    def waiting(self, student: str) -> int:
        return self._q(
            "SELECT COUNT(*) AS n FROM submissions WHERE student = ? AND status "
            "IN ('queued', 'testing', 'timing')",
            (student,),
        )[0]["n"]

    def requeue_unfinished(self) -> tuple[int, int]:
        """After a restart: work that was running goes back to the queue, unless it has
        been started MAX_ATTEMPTS times (then it ends ``error``, BROKE_TWICE);
        (queued again, given up)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                gave_up = self._db.execute(
                    "UPDATE submissions SET status = 'error', passed = NULL, message = ?, "
                    "finished = ? WHERE status IN ('testing', 'timing') AND attempts >= ?",
                    (BROKE_TWICE, time.time(), MAX_ATTEMPTS),
                ).rowcount
                again = self._db.execute(
                    "UPDATE submissions SET status = 'queued', started = NULL WHERE status "
                    "IN ('testing', 'timing')"
                ).rowcount
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return again, gave_up

    def queued(self, limit: int = 100) -> list[int]:
        """Queued ids in the order they are to be judged: round-robin across students -
        each student's oldest first, students served least recently (``started``) first,
        then the next of each, and so on."""
        return [
            r["id"]
            for r in self._q(
                """SELECT id FROM (
            SELECT id, student, ROW_NUMBER() OVER (PARTITION BY student ORDER BY id) AS k
            FROM submissions WHERE status = 'queued') q
            ORDER BY q.k, COALESCE((SELECT MAX(started) FROM submissions s
                                    WHERE s.student = q.student), 0), q.id
            LIMIT ?""",
                (limit,),
            )
        ]

    def judging(self, student: str, since: float) -> list[tuple[float, float | None]]:
        """(started, finished or None while running) of the student's judgings that
        overlap the time from ``since`` on."""
        return [
            (r["started"], r["finished"])
            for r in self._q(
                "SELECT started, finished FROM submissions WHERE student = ? AND started IS NOT "
                "NULL AND (finished IS NULL OR finished >= ?)",
                (student, since),
            )
        ]

    def stored_bytes(self, student: str) -> int:
        """Bytes of sources and units kept for the student (UTF-8)."""
        return self._q(
            "SELECT COALESCE(SUM(LENGTH(CAST(source AS BLOB)) + COALESCE(LENGTH("
            "CAST(unit AS BLOB)), 0)), 0) AS n FROM submissions WHERE student = ?",
            (student,),
        )[0]["n"]

    def claim(self, sid: int) -> dict | None:
        """Mark a queued submission as started (once: None if someone else took it)."""
        cur = self._x(
            "UPDATE submissions SET status = 'testing', started = ?, attempts = "
            "attempts + 1 WHERE id = ? AND status = 'queued'",
            (time.time(), sid),
        )
        return self.get(sid) if cur.rowcount == 1 else None

    def set_status(self, sid: int, status: str) -> None:
        assert status in STATUSES
        self._x(
            "UPDATE submissions SET status = ? WHERE id = ? AND status IN ('testing', 'timing')",
            (status, sid),
        )

    def finish(self, sid: int, status: str, result: dict) -> None:
        assert status in ("done", "rejected", "error")
        vals = [
            json.dumps(result.get(k)) if k in ("figures", "cases", "versions") else result.get(k)
            for k in RESULT_FIELDS
        ]
        vals[0] = None if result.get("passed") is None else int(bool(result["passed"]))
        sets = ", ".join(f"{k} = ?" for k in RESULT_FIELDS)
        self._x(
            f"UPDATE submissions SET status = ?, finished = ?, {sets} WHERE id = ?",
            (status, time.time(), *vals, sid),
        )

    def get(self, sid: int) -> dict | None:
        rows = self._q("SELECT * FROM submissions WHERE id = ?", (sid,))
        return row(rows[0]) if rows else None

    def history(self, student: str, board: str | None = None) -> list[dict]:
        sql, args = "SELECT * FROM submissions WHERE student = ?", [student]
        if board:
            sql, args = sql + " AND board = ?", args + [board]
        return [row(r) for r in self._q(sql + " ORDER BY id DESC", args)]

    def counts(self) -> dict:
        return {
            r["status"]: r["n"]
            for r in self._q("SELECT status, COUNT(*) AS n FROM submissions GROUP BY status")
        }


def private(path: Path) -> None:
    """Make ``path`` (a file) readable and writable by its owner only: created so if
    missing, narrowed if not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o600)
    except PermissionError:  # someone else's file, opened read-only: theirs to set
        return
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    except PermissionError:
        pass
    finally:
        os.close(fd)
