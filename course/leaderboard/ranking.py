"""The leaderboard's ranking and export: reads over ``store.Store``'s submissions (a mixin
of it), and how a row leaves the database (JSON columns decoded, times as ISO 8601)."""

from __future__ import annotations

import json
import sqlite3
import time

from course.grading.classroom import csvsafe

EXPORT = (
    "id",
    "student",
    "kind",
    "board",
    "function",
    "status",
    "passed",
    "mean_ms",
    "std_ms",
    "best_ms",
    "median_ms",
    "runs",
    "device",
    "mode",
    "created",
    "finished",
    "message",
)


class Ranking:
    """Each student's best per board, a submission's rank, the board's best over time, and
    the CSV export - all from ``_q`` (the store's query)."""

    def _q(self, sql: str, args=()) -> list[sqlite3.Row]:
        raise NotImplementedError  # the store's

    def ranked(self, board: str) -> list[dict]:
        """Each student's (and course entry's) fastest passing, timed submission, fastest
        first, ranked 1..n."""
        rows = self._q(
            """SELECT s.* FROM submissions s JOIN (
            SELECT student, kind, MIN(mean_ms) AS m FROM submissions
            WHERE board = ? AND status = 'done' AND passed = 1 AND mean_ms IS NOT NULL
            GROUP BY student, kind) b ON s.student = b.student AND s.kind = b.kind
            AND s.mean_ms = b.m
            WHERE s.board = ? AND s.status = 'done' AND s.passed = 1
            ORDER BY s.mean_ms, s.finished""",
            (board, board),
        )
        out: list = []
        seen: set = set()
        for r in rows:
            if (r["student"], r["kind"]) in seen:  # two with the same time: the first
                continue
            seen.add((r["student"], r["kind"]))
            out.append(dict(row(r), rank=len(out) + 1))
        return out

    def rank_of(self, sub: dict) -> int | None:
        """Where this submission's time places its student among the others' best."""
        if sub.get("status") != "done" or not sub.get("passed") or sub.get("mean_ms") is None:
            return None
        faster = self._q(
            """SELECT COUNT(*) AS n FROM (SELECT student, MIN(mean_ms) AS m
            FROM submissions WHERE board = ? AND status = 'done' AND passed = 1 AND
            mean_ms IS NOT NULL AND NOT (student = ? AND kind = ?) GROUP BY student, kind)
            WHERE m < ?""",
            (sub["board"], sub["student"], sub.get("kind", "student"), sub["mean_ms"]),
        )[0]["n"]
        return faster + 1

    def best_over_time(self, board: str) -> list[tuple[float, float]]:
        """(time, the board's best mean so far) at each improvement: the term's curve."""
        best, out = None, []
        for r in self._q(
            "SELECT finished, mean_ms FROM submissions WHERE board = ? AND "
            "status = 'done' AND passed = 1 AND mean_ms IS NOT NULL ORDER BY "
            "finished",
            (board,),
        ):
            if best is None or r["mean_ms"] < best:
                best = r["mean_ms"]
                out.append((r["finished"], best))
        return out

    def export_csv(self, out) -> int:
        w = csvsafe.writer(out)  # a student's message may start like a formula
        w.writerow(EXPORT)
        n = 0
        for r in self._q(f"SELECT {', '.join(EXPORT)} FROM submissions ORDER BY id"):
            w.writerow([iso(r[k]) if k in ("created", "finished") else r[k] for k in EXPORT])
            n += 1
        return n


def iso(t: float | None) -> str:
    """A time as ISO 8601 in UTC to the second (2026-11-26T14:30:05Z); "" for none."""
    return "" if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def row(r: sqlite3.Row) -> dict:
    """A database row as a dict: JSON columns decoded, ``passed`` a bool."""
    d = dict(r)
    for k in ("figures", "cases", "versions", "unit"):
        if d.get(k):
            d[k] = json.loads(d[k])
    if d.get("passed") is not None:
        d["passed"] = bool(d["passed"])
    return d
