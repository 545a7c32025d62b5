"""A predict check in a student's copy (no answer key): the answers are recorded for
grading, neither passed nor failed; progress says "answered"; where the check points to an
experiment, that experiment is the notebook's cell right after the check, and it sets the
answers beside what it finds."""

import importlib
import json

import pytest
from conftest import REPO

import course
from course.exercises import all_exercises
from course.grading import hidden
from course.show import answers

progress = importlib.import_module("course.grading.judging.progress")
RIGHT = {"blocks": 3907, "threads": 1000192, "idle": 192, "grid2d_threads": 72, "grid2d_idle": 17}
PREDICT = sorted(n for n, e in all_exercises().items() if e.kind == "predict")


@pytest.fixture
def student_copy(tmp_path, monkeypatch):
    """No instructor folder (a student's install); progress in a file of its own."""
    monkeypatch.setenv("COURSE_HIDDEN_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(tmp_path / "progress.json"))
    monkeypatch.setattr(hidden, "_LOADED", {})
    return tmp_path


def test_a_right_answer_is_recorded_not_failed(student_copy):
    r = course.check("predict_launch", RIGHT)
    text, page = repr(r), r._repr_html_()
    assert r.answered and not r.passed, text
    assert text.startswith("[ANSWERED]") and "FAIL" not in text and "<b>fail</b>" not in page
    assert "recorded for grading" in text and "0/5" not in text, text
    assert "data-answered='true'" in page
    row = {r[1]: r[2] for r in course.progress().rows()}
    assert row["predict_launch"] == "answered"
    assert "1 answered for grading" in repr(course.progress())


def test_a_wrong_answer_is_recorded_too_and_a_malformed_one_fails(student_copy):
    wrong = dict(RIGHT, grid2d_idle=16)
    assert course.check("predict_launch", wrong).answered  # only the key can tell
    bad = dict(RIGHT, threads="many")
    del bad["idle"]
    r = course.check("predict_launch", bad)
    assert not r.answered and repr(r).startswith("[INCOMPLETE]"), repr(r)
    said = {c.name.split(":")[0]: c for c in r.cases}
    assert not said["threads"].passed and "finite number" in said["threads"].message
    assert not said["idle"].passed and said["blocks"].passed
    assert {r[1]: r[2] for r in course.progress().rows()}["predict_launch"] == "failed"
    assert not course.check("predict_launch", [1, 2]).answered


def test_the_grader_still_scores_with_its_key():
    """The checkout has the instructor's keys: a right answer passes, a wrong one fails."""
    assert course.check("predict_launch", RIGHT, record=False).passed
    r = course.check("predict_launch", dict(RIGHT, idle=191), record=False)
    assert not r.passed and not getattr(r, "answered", False)
    assert [c.passed for c in r.cases] == [True, True, False, True, True]


def _cells(lesson):
    nb = json.loads((REPO / "notebooks" / f"{lesson}.ipynb").read_text())
    return ["".join(c["source"]) for c in nb["cells"]]


@pytest.mark.parametrize("name", PREDICT)
def test_an_experiment_the_check_names_is_the_next_cell(name):
    spec = all_exercises()[name]
    cells = _cells(spec.lesson)
    at = [i for i, s in enumerate(cells) if f'course.check("{name}"' in s]
    assert len(at) == 1, name
    after = cells[at[0] + 1]
    var = spec.signature.split(" =")[0]  # answer_launch = {...}
    if spec.experiment:
        assert "answers.compare(" in after and var in after, (name, after[:200])
    else:
        assert "answers.compare(" not in after


def test_compare_says_which_answers_agree():
    c = answers.compare({"a": 1, "b": 2.0, "c": "x"}, {"a": 1, "b": 3.0, "c": "x", "d": 4})
    assert [r[3] for r in c.rows] == [True, False, True, False] and c.agree == 2
    assert "2 of 4" in repr(c) and "data-agree='2'" in c._repr_html_()
    assert answers.compare({"b": 2.0}, {"b": 2.02}, rtol=0.02).agree == 1
    assert answers.compare({"a": True}, {"a": 1}).agree == 0  # a bool is no count
    assert answers.compare(None, {"a": 1}).agree == 0


def test_the_launch_experiment_counts_what_the_key_says():
    """Lesson 01's experiment kernel counts the 2-D launch's threads and idle threads."""
    import numpy as np
    from numba import cuda

    from course.kernels.vector_add import count_threads

    counts = cuda.to_device(np.zeros(2, np.int64))
    count_threads[(3, 2), (4, 3)](11, 5, counts)
    assert list(counts.copy_to_host()) == [RIGHT["grid2d_threads"], RIGHT["grid2d_idle"]]
