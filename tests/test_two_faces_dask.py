"""Class grading on Dask: a worker grades with the grader's hidden cases or not at all.

A wheel holds no hidden case, so a worker started without the instructor's folder used to
grade the public cases only, silently.  Now every worker's hidden files are compared with
the grader's before any task runs; a worker with none, or other ones, stops the run with a
sentence and a non-zero exit, nothing graded.  One small LocalCluster (one worker process)
serves every case here; its environment is changed between them with ``client.run``.
"""

import csv
import os
import subprocess
import sys

import pytest
from conftest import REPO

from course.grading.classroom import executors, intake

pytest.importorskip("distributed")
HIDDEN = REPO / "instructor" / "hidden"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from distributed import Client, LocalCluster

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COURSE_INSTRUCTOR_DIR", "COURSE_HIDDEN_DIR")
    }
    c = LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, env=env
    )
    client = Client(c)
    yield c, client
    client.close()
    c.close()


def _worker_env(client, **env):
    def set_env(env):
        import os as _os

        for k in ("COURSE_INSTRUCTOR_DIR", "COURSE_HIDDEN_DIR"):
            _os.environ.pop(k, None)
        _os.environ.update(env)

    client.run(set_env, env)


def _files(tmp_path):
    p = tmp_path / "subs" / "alice" / "01_vector_add.ipynb"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("{}")
    return [intake.read(p, "alice/01_vector_add.ipynb", "alice")]


def _task(item, marks):
    from pathlib import Path as _P

    (_P(marks) / item["folder"]).write_text("graded")
    return {"student": item["folder"], "status": "graded"}


def _run(cluster, tmp_path):
    c, _ = cluster
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    rows = []
    got = executors.run_dask(
        _files(tmp_path),
        _task,
        (str(marks),),
        rows.append,
        lambda f, why: {"student": f.folder, "status": "error"},
        scheduler=c.scheduler_address,
        log=lambda *a: None,
    )
    return got, rows, marks


def test_a_worker_without_hidden_cases_refuses_and_grades_nothing(cluster, tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_INSTRUCTOR_DIR", raising=False)
    monkeypatch.delenv("COURSE_HIDDEN_DIR", raising=False)
    _worker_env(cluster[1], COURSE_HIDDEN_DIR=str(tmp_path / "not-there"))
    with pytest.raises(SystemExit) as e:
        _run(cluster, tmp_path)
    said = str(e.value)
    assert said.startswith("grade: the Dask worker on ") and "has no hidden cases" in said
    assert "would grade the public cases only" in said and "nothing was graded" in said
    assert "COURSE_INSTRUCTOR_DIR" in said and str(HIDDEN) in said  # what to set
    assert not list((tmp_path / "marks").iterdir()), "a task ran"


def test_a_worker_with_other_hidden_cases_refuses(cluster, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    for f in HIDDEN.glob("*.py"):
        (other / f.name).write_bytes(f.read_bytes())
    (other / "_seed.py").write_text("SEED = 5\n")  # only the private seed differs
    monkeypatch.delenv("COURSE_INSTRUCTOR_DIR", raising=False)
    monkeypatch.setenv("COURSE_HIDDEN_DIR", str(other))
    _worker_env(cluster[1], COURSE_HIDDEN_DIR=str(HIDDEN))
    with pytest.raises(SystemExit) as e:
        _run(cluster, tmp_path)
    assert "has other hidden cases than this grader" in str(e.value), e.value
    assert "nothing was graded" in str(e.value)
    assert not list((tmp_path / "marks").iterdir())


def test_a_worker_with_the_graders_hidden_cases_grades(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_HIDDEN_DIR", str(HIDDEN))
    _worker_env(cluster[1], COURSE_INSTRUCTOR_DIR=str(REPO))  # the same files
    got, rows, marks = _run(cluster, tmp_path)
    assert [r["status"] for r in got] == ["graded"] and rows == got
    assert (marks / "alice").read_text() == "graded"


def test_a_worker_that_joins_late_is_checked_by_each_task(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_HIDDEN_DIR", str(tmp_path / "none"))
    mine = executors.hidden_digest()
    assert mine["digest"] is None and mine["files"] == 0
    monkeypatch.setenv("COURSE_HIDDEN_DIR", str(HIDDEN))
    theirs = executors.hidden_digest()
    assert theirs["files"] == len(list(HIDDEN.glob("*.py"))) and theirs["digest"]
    with pytest.raises(executors.HiddenCasesDiffer, match="has hidden cases"):
        executors.checked(mine, lambda item: "ran", {})
    assert executors.checked(theirs, lambda item: "ran", {}) == "ran"


def test_grade_with_dask_workers_lacking_the_cases_exits_non_zero(cluster, tmp_path):
    """The command a class runs, against workers started without COURSE_INSTRUCTOR_DIR."""
    c, client = cluster
    _worker_env(client, COURSE_HIDDEN_DIR=str(tmp_path / "not-there"))
    files = _files(tmp_path)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COURSE_INSTRUCTOR_DIR", "COURSE_HIDDEN_DIR")
    }
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "grade",
            str(files[0].path),
            "--executor",
            "dask",
            "--scheduler",
            c.scheduler_address,
            "--out",
            str(tmp_path / "g.csv"),
        ],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert r.returncode != 0, r.stdout + r.stderr
    assert "has no hidden cases" in r.stderr and "nothing was graded" in r.stderr, r.stderr
    rows = (
        list(csv.DictReader(open(tmp_path / "g.csv", newline="")))
        if (tmp_path / "g.csv").exists()
        else []
    )
    assert rows == [], rows
