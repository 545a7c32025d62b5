"""A course entry is a row of kind "course", not a student with a special name."""

import json
import sqlite3

from course.leaderboard import queue
from course.leaderboard.store import Store


def test_a_course_entry_is_judged_as_one_and_a_student_named_like_one_is_not(tmp_path):
    store = Store(tmp_path / "lb.db")
    entry = store.add(
        "course:matmul_v4",
        "tune_matmul",
        "matmul_v4",
        "# course",
        {"course_kernel": "matmul_v4"},
        kind="course",
    )
    # a student whose roster name looks like an entry, sending the entry's unit shape
    forged = store.add(
        "course:matmul_v4", "tune_matmul", "f", "src", {"course_kernel": "matmul_v4"}
    )
    assert queue._payload(store.get(entry)) == {"course_kernel": "matmul_v4"}
    assert queue._payload(store.get(forged))["source"] == "src"
    for sid, ms in ((entry, 1.0), (forged, 2.0)):
        store.claim(sid)
        store.finish(sid, "done", {"passed": True, "mean_ms": ms})
    assert {r["kind"] for r in store.ranked("tune_matmul")} == {"course", "student"}


def test_an_old_database_gets_kinds_from_its_course_names(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE submissions (id INTEGER PRIMARY KEY AUTOINCREMENT,
      student TEXT NOT NULL, board TEXT NOT NULL, function TEXT NOT NULL, source TEXT NOT NULL,
      unit TEXT, status TEXT NOT NULL DEFAULT 'queued', passed INTEGER, message TEXT,
      mean_ms REAL, std_ms REAL, best_ms REAL, median_ms REAL, runs INTEGER, figures TEXT,
      cases TEXT, device TEXT, versions TEXT, mode TEXT, created REAL NOT NULL,
      started REAL, finished REAL)""")
    rows = [
        ("course:v4", json.dumps({"course_kernel": "v4"})),
        ("ann", None),
        ("course:fake", json.dumps({"source": "x"})),
    ]
    for student, unit in rows:
        db.execute(
            "INSERT INTO submissions (student, board, function, source, unit, created) "
            "VALUES (?, 'tune_matmul', 'f', 's', ?, 0)",
            (student, unit),
        )
    db.commit()
    db.close()
    store = Store(path)
    assert [store.get(i)["kind"] for i in (1, 2, 3)] == ["course", "student", "student"]


def test_the_export_names_each_rows_kind(tmp_path):
    import io

    store = Store(tmp_path / "lb.db")
    store.add("course:v4", "tune_matmul", "v4", "#", {"course_kernel": "v4"}, kind="course")
    out = io.StringIO()
    store.export_csv(out)
    header, row = out.getvalue().splitlines()[:2]
    assert header.split(",")[2] == "kind" and row.split(",")[2] == "course"
