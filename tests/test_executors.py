"""Grading on a Dask cluster: same rows as local grading, lost workers retried once, no row lost."""

import csv
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO

from course.grading.classroom import executors, intake
from course.grading.classroom.batch import Graded

pytest.importorskip("distributed")
SUBMISSIONS = REPO / "tests" / "fixtures" / "submissions"


def _grade(tmp: Path, executor: str, students: list[str]) -> dict:
    out = tmp / f"{executor}.csv"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "grade",
            *[str(SUBMISSIONS / s) for s in students],
            "--out",
            str(out),
            "--executor",
            executor,
            "--jobs",
            "2",
            "--seed",
            "11",
            "--timeout",
            "60",
            "--case-time-limit",
            "5",
        ],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out, newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}, r.stdout


@pytest.mark.slow
@pytest.mark.e2e  # a Dask LocalCluster grading the fixtures through the command line
def test_dask_grades_like_the_local_executor(tmp_path):
    students = ["correct", "out_of_bounds", "crash"]
    local, _ = _grade(tmp_path, "local", students)
    dask, said = _grade(tmp_path, "dask", students)
    assert "LocalCluster of 2 worker processes" in said and "[3/3]" in said
    assert sorted(dask) == sorted(students)
    for s in students:
        for col in ("lesson", "status", "vector_add", "matrix_add", "total", "max"):
            assert dask[s][col] == local[s][col], (s, col, dask[s], local[s])
    assert local["correct"]["vector_add"] == "1" and local["crash"]["status"] == "crashed"


def test_lost_workers_are_retried_once_and_no_row_is_lost(tmp_path):
    """Tasks that take their worker process down: once (os._exit, or SIGKILL from outside
    while running) -> graded on the second try; always -> an error row after two tries."""
    marks = tmp_path / "marks"
    marks.mkdir()

    def task(item, marks):
        import os as _os
        import time as _time
        from pathlib import Path as _P

        name = item["folder"]
        first = not (_P(marks) / name).exists()
        (_P(marks) / name).write_text(str(_os.getpid()))
        if name == "always_dies" or (name == "dies_once" and first):
            _os._exit(1)
        if name == "killed_once" and first:
            _time.sleep(60)  # the test kills this worker meanwhile
        return {"student": name, "status": "graded", "pid": _os.getpid()}

    files = []
    for name in ["ok_a", "dies_once", "killed_once", "always_dies", "ok_b"]:
        p = tmp_path / "subs" / name / "01_vector_add.ipynb"
        p.parent.mkdir(parents=True)
        p.write_text("{}")
        files.append(intake.read(p, f"{name}/{p.name}", name))

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not (marks / "killed_once").exists():
            time.sleep(0.1)
        time.sleep(0.5)
        os.kill(int((marks / "killed_once").read_text()), signal.SIGKILL)

    threading.Thread(target=killer, daemon=True).start()
    rows, said = [], []
    got = executors.run_dask(
        files,
        task,
        (str(marks),),
        rows.append,
        lambda f, why: {"student": f.folder, "status": "error", "why": why},
        workers=2,
        log=said.append,
    )
    assert len(got) == len(files) == len(rows)
    by = {r["student"]: r for r in rows}
    assert sorted(by) == sorted(f.folder for f in files)
    assert by["ok_a"]["status"] == by["ok_b"]["status"] == "graded"
    assert by["dies_once"]["status"] == "graded" and by["killed_once"]["status"] == "graded"
    assert by["always_dies"]["status"] == "error" and "2 times" in by["always_dies"]["why"]
    retried = [s.split("/")[0].strip() for s in said if "trying once more" in s]
    assert retried.count("always_dies") == 1, said  # two tries, then its error row
    assert {"dies_once", "killed_once"} <= set(retried), said
    # a worker holds one task at a time, so no innocent submission shares a death
    assert "ok_a" not in retried and "ok_b" not in retried, said


def test_rows_stream_into_the_csv_as_they_finish(tmp_path):
    out = tmp_path / "grades.csv"
    s = executors.CsvStream(out, ["vector_add"])
    assert out.read_text().splitlines() == [",".join(executors.header(["vector_add"]))]
    g = Graded(
        "alice",
        "01_vector_add.ipynb",
        "01_vector_add",
        "sim",
        points={"vector_add": 1.0},
        max_points={"vector_add": 1.0},
    )
    s.add(g)
    rows = list(csv.DictReader(open(out, newline="")))
    assert [r["student"] for r in rows] == ["alice"] and rows[0]["vector_add"] == "1"
    s.add(Graded("bob", "01_vector_add.ipynb", status="crashed"))
    assert [r["student"] for r in csv.DictReader(open(out, newline=""))] == ["alice", "bob"]


def test_payload_carries_what_was_read_once(tmp_path):
    p = tmp_path / "alice" / "01_vector_add.ipynb"
    p.parent.mkdir()
    p.write_bytes(b"{}")
    (sub,) = intake.collect([tmp_path])
    sub.student, sub.lesson = "alice", "01_vector_add"
    item = executors.payload(sub)
    assert (item["rel"], item["folder"], item["student"], item["data"]) == (
        "alice/01_vector_add.ipynb",
        "alice",
        "alice",
        b"{}",
    )
    p.write_bytes(b"changed later")  # the payload is what was read, not the path
    assert executors.payload(sub)["data"] == b"{}"
    (gone,) = intake.collect([tmp_path / "nope.ipynb"])
    assert gone.data is None and "cannot read" in executors.payload(gone)["problem"]
