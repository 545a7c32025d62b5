"""Gradescope: the autograder zip, run_autograder in a Gradescope-shaped folder, results.json."""

import json
import os
import subprocess
import sys
import zipfile

import jsonschema
import pytest
from conftest import REPO

from course.grading.classroom import gradescope
from course.grading.classroom.batch import Graded

SUBMISSIONS = REPO / "tests" / "fixtures" / "submissions"
HIDDEN = REPO / "instructor" / "hidden"


def test_schema_accepts_the_documented_example_and_rejects_broken_ones():
    ok = {
        "score": 44.0,
        "execution_time": 136,
        "output": "x",
        "visibility": "after_due_date",
        "stdout_visibility": "visible",
        "extra_data": {},
        "tests": [
            {
                "score": 2.0,
                "max_score": 2.0,
                "status": "passed",
                "name": "Your name",
                "number": "1.1",
                "output": "Giant multiline string",
                "tags": ["a"],
                "visibility": "visible",
                "extra_data": {},
            }
        ],
    }
    jsonschema.validate(ok, gradescope.SCHEMA)
    for bad in (
        {"tests": [{"name": "t", "max_score": 1}]},  # no score
        {"score": "10"},  # not a number
        {"score": 1, "tests": [], "visibility": "sometimes"},
        {"score": 1, "tests": [{"score": 1, "max_score": 1, "name": "t", "status": "ok"}]},
        {"output": "no score at all"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, gradescope.SCHEMA)


def test_results_of_a_graded_row_validate_and_mark_hidden_cases():
    g = Graded(
        "alice",
        "01_vector_add.ipynb",
        "01_vector_add",
        "sim",
        seed=3,
        points={"vector_add": 0.5, "matrix_add": 1.0},
        max_points={"vector_add": 1.0, "matrix_add": 1.0},
    )
    g.results["vector_add"] = {
        "cases": [
            {
                "name": "n = 1",
                "launch": "[1, 32]",
                "passed": True,
                "hidden": False,
                "message": "ok",
            },
            {
                "name": "n = 1000",
                "launch": "[4, 256]",
                "passed": False,
                "hidden": True,
                "message": "y wrong at 999",
            },
        ]
    }
    g.reasons.append("vector_add (-0.5): 1 of 2 cases failed; first: n = 1000 (hidden): y wrong")
    r = gradescope.results(g, 12.34)
    jsonschema.validate(r, gradescope.SCHEMA)
    assert r["score"] == 1.5 and [t["score"] for t in r["tests"]] == [0.5, 1.0]
    va = r["tests"][0]
    assert va["name"] == "vector_add (write)" and va["status"] == "failed"
    assert "(hidden case)" in va["output"] and "hidden-cases" in va["tags"]
    assert r["tests"][1]["status"] == "passed"
    assert "leaderboard" not in r  # no tune exercise timed


def test_the_leaderboard_field_holds_each_timed_tune_exercise():
    g = Graded(
        "bob",
        "01_vector_add.ipynb",
        "01_vector_add",
        "gpu",
        seed=3,
        points={"tune_vector_add": 1.0, "vector_add": 1.0},
        max_points={"tune_vector_add": 1.0, "vector_add": 1.0},
    )
    ok = {"name": "n = 1", "launch": "[1, 32]", "passed": True, "hidden": False, "message": ""}
    timed = {
        "name": "tune target (GPU)",
        "launch": "",
        "passed": True,
        "hidden": False,
        "message": "",
        "figures": {"ms": 0.29, "mean_ms": 0.2912, "std_ms": 0.001},
        "timed": True,
    }
    g.results["tune_vector_add"] = {"cases": [ok, timed]}
    g.results["vector_add"] = {"cases": [ok]}
    r = gradescope.results(g, 1.0)
    jsonschema.validate(r, gradescope.SCHEMA)
    assert r["leaderboard"] == [{"name": "tune_vector_add (ms)", "value": 0.2912, "order": "asc"}]
    g.results["tune_vector_add"]["cases"][0] = dict(ok, passed=False)  # a wrong kernel
    assert "leaderboard" not in gradescope.results(g, 1.0)


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves modules
def bundle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gs")
    out = tmp / "autograder.zip"
    r = subprocess.run(
        [sys.executable, "-m", "course", "gradescope", "--out", str(out), "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.mark.e2e  # the Gradescope bundle built and run
def test_bundle_has_the_two_scripts_at_its_root_the_wheel_and_the_hidden_cases(bundle):
    z = zipfile.ZipFile(bundle)
    names = z.namelist()
    assert "setup.sh" in names and "run_autograder" in names
    for script in ("setup.sh", "run_autograder"):
        assert (z.getinfo(script).external_attr >> 16) & 0o111, f"{script} is not executable"
        assert z.read(script).startswith(b"#!/usr/bin/env bash")
    assert any(n.startswith("course-") and n.endswith(".whl") for n in names)
    assert sorted(n for n in names if n.startswith("hidden/")) == sorted(
        f"hidden/{p.name}" for p in HIDDEN.glob("*.py")
    )
    assert subprocess.run(["bash", "-n", "-c", z.read("run_autograder").decode()]).returncode == 0
    assert subprocess.run(["bash", "-n", "-c", z.read("setup.sh").decode()]).returncode == 0


def _autograder(tmp_path, bundle, notebook):
    """/autograder as Gradescope lays it out: source/ (the unzipped bundle), submission/,
    results/; run_autograder copied to the root."""
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    zipfile.ZipFile(bundle).extractall(root / "source")
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    os.chmod(root / "run_autograder", 0o755)
    (root / "submission").mkdir()
    if notebook:
        (root / "submission" / "01_vector_add.ipynb").write_bytes(notebook.read_bytes())
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), COURSE_PYTHON=sys.executable)
    r = subprocess.run(
        [str(root / "run_autograder")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads((root / "results" / "results.json").read_text())


@pytest.mark.e2e  # the Gradescope bundle built and run
@pytest.mark.slow
def test_run_autograder_grades_one_submission_into_results_json(tmp_path, bundle):
    res = _autograder(tmp_path, bundle, SUBMISSIONS / "correct" / "01_vector_add.ipynb")
    jsonschema.validate(res, gradescope.SCHEMA)
    by = {t["name"].split()[0]: t for t in res["tests"]}
    assert by["vector_add"]["score"] == 1.0 and by["vector_add"]["status"] == "passed"
    assert by["matrix_add"]["score"] == 1.0
    assert by["predict_launch"]["score"] == 1.0 and by["predict_launch"]["status"] == "passed"
    assert "(hidden case)" in by["vector_add"]["output"]  # the bundle's hidden cases ran
    assert res["score"] == sum(t["score"] for t in res["tests"])
    text = json.dumps(res)
    for p in HIDDEN.glob("*.py"):  # no hidden-case code, only names and messages
        body = [l.strip() for l in p.read_text().splitlines() if len(l.strip()) > 30]
        assert not [l for l in body if l in text], p.name


@pytest.mark.e2e  # the Gradescope bundle built and run
def test_run_autograder_without_a_notebook_still_writes_results(tmp_path, bundle):
    res = _autograder(tmp_path, bundle, None)
    jsonschema.validate(res, gradescope.SCHEMA)
    assert res["score"] == 0 and "No notebook" in res["output"]
