"""A lesson is named the same way by every command: ``01``, ``1``, ``vector_add``,
``01_vector_add`` (or its file name); an unknown name is one sentence with the nearest name
and a non-zero exit, before anything is written."""

import csv
import subprocess
import sys

import pytest
from conftest import REPO

from course.grading.classroom.lesson_names import UnknownLesson, lesson_named

STEMS = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
SAME = ["01", "1", "vector_add", "01_vector_add", "01_vector_add.ipynb", " 01 "]


@pytest.mark.parametrize("name", SAME)
def test_every_spelling_of_lesson_01_names_it(name):
    assert lesson_named(name, STEMS) == "01_vector_add"


def test_numbers_past_nine_and_unknown_names():
    assert lesson_named("12", STEMS) == "12_thrust_algorithms"
    assert lesson_named("0", STEMS) == "00_start_here"
    for bad, near in (
        ("01_vectr_add", "01_vector_add"),
        ("99", None),
        ("reduce", "02_reduction"),
        ("vectoradd", "01_vector_add"),
    ):
        with pytest.raises(UnknownLesson) as e:
            lesson_named(bad, STEMS, "--lesson")
        said = str(e.value)
        assert said.startswith(f"unknown lesson {bad!r} given with --lesson"), said
        assert (f"did you mean {near}?" in said) if near else "did you mean" not in said, said
        assert "01_vector_add" in said  # the lessons are listed


def test_release_and_restore_take_the_same_names(tmp_path):
    from course.grading.classroom.distribute import copy_notebooks, restore
    from course.grading.classroom.release import ReleaseError, find_sources

    src = REPO / "notebooks"
    assert [p.stem for p in find_sources(src, ["1", "vector_add", "02"])] == [
        "01_vector_add",
        "01_vector_add",
        "02_reduction",
    ]
    with pytest.raises(ReleaseError, match="did you mean 02_reduction"):
        find_sources(src, ["02_reductoin"])
    copy_notebooks(tmp_path)
    for name in ("1", "01_vector_add.ipynb", "vector_add"):
        target, kept = restore(tmp_path, name, now=0)
        assert target.name == "01_vector_add.ipynb" and kept is not None and kept.exists()
    with pytest.raises(UnknownLesson, match="given with --restore"):
        restore(tmp_path, "13")


def _grade(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "course", "grade", *map(str, args)],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=300,
    )


def test_grade_accepts_lesson_01_as_restore_does_and_refuses_unknown(tmp_path):
    """`grade --lesson 01` was refused while `notebooks --restore 01` was accepted.  The
    submission here is a half-saved file: its row needs no student process."""
    sub = tmp_path / "subs" / "alice" / "lab.ipynb"
    sub.parent.mkdir(parents=True)
    sub.write_text('{"cells": [')
    r = _grade(tmp_path / "subs", "--lesson", "01", "--out", tmp_path / "g.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = csv.DictReader(open(tmp_path / "g.csv", newline=""))
    assert row["lesson"] == "01_vector_add" and row["status"] == "rejected", row
    assert "vector_add" in row  # the lesson's columns, by its real name
    r = _grade(
        tmp_path / "subs", "--lesson", "1_vectr_add", "--out", tmp_path / "h.csv", cwd=tmp_path
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown lesson '1_vectr_add' given with --lesson" in r.stderr, r.stderr
    assert "did you mean 01_vector_add?" in r.stderr and "nothing was graded" in r.stderr
    assert not (tmp_path / "h.csv").exists()
