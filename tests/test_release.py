"""``python -m course release``: student copies without solutions that still run."""

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from course.grading.classroom import notebook as nbk
from course.grading.classroom.release import leaks, release, strip_solutions, student_notebook

MINI = REPO / "tests" / "fixtures" / "notebooks" / "mini_lesson.ipynb"


def _nb(*sources, tags=None):
    return {
        "nbformat": 4,
        "nbformat_minor": 4,
        "metadata": {},
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"tags": tags or []},
                "source": s,
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "x"}],
                "execution_count": 3,
            }
            for s in sources
        ],
    }


def _run(*args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "course", *args],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def test_solution_becomes_stub_at_same_indentation():
    src = (
        "@cuda.jit\ndef add(n, x, y):\n    i = cuda.grid(1)\n    ### BEGIN SOLUTION\n"
        "    if i < n:\n        y[i] += x[i]\n    ### END SOLUTION\n"
    )
    out = strip_solutions(nbk.Cell(0, "code", src))
    assert out.splitlines()[2:] == ["    i = cuda.grid(1)", "    # YOUR CODE HERE", "    pass"]
    ast.parse(out)  # the student copy still runs


def test_release_clears_outputs_drops_instructor_cells_keeps_stable_ids():
    nb = _nb(
        "import course\n",
        "x = 1  ### BEGIN SOLUTION\n### END SOLUTION\n",
        "print('answers')\n",
        "### INSTRUCTOR ONLY\nprint(1)\n",
    )
    nb["cells"][2]["metadata"]["tags"] = ["instructor-only"]
    a, b = student_notebook(nb, "01_x"), student_notebook(nb, "01_x")
    assert len(a["cells"]) == 2
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in a["cells"])
    assert [c["id"] for c in a["cells"]] == [c["id"] for c in b["cells"]]
    assert len({c["id"] for c in a["cells"]}) == 2
    assert a["nbformat_minor"] >= 5 and a["metadata"]["course"]["lesson"] == "01_x"
    assert nb["cells"][0]["outputs"], "the instructor notebook must not be modified"


@pytest.mark.parametrize(
    "source, words",
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without a"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "before the"),
    ],
)
def test_unbalanced_markers_are_refused_naming_the_cell(tmp_path, source, words):
    src = tmp_path / "src"
    src.mkdir()
    (src / "02_bad.ipynb").write_text(json.dumps(_nb("import course\n", source)))
    r = _run("release", "--src", str(src), "--out", str(tmp_path / "out"))
    assert r.returncode == 1
    assert "02_bad.ipynb" in r.stderr and "cell 2" in r.stderr and words in r.stderr
    assert not (tmp_path / "out").exists(), "nothing is written when a notebook is refused"


def test_mini_release_marks_exercise_cells_and_has_no_solution(tmp_path):
    [copy] = release([MINI], tmp_path)
    cells = nbk.cells(nbk.load(copy))
    marked = {c.exercise_tag: c for c in cells if c.exercise_tag}
    assert set(marked) == {"vector_add", "matrix_add"}
    assert all(c.meta.get("deletable") is False for c in marked.values())
    assert "YOUR CODE HERE" in marked["vector_add"].source
    assert not any("instructor" in c.source.lower() for c in cells)
    for c in cells:
        if c.kind == "code":
            ast.parse(c.source)
    assert leaks([MINI], [tmp_path]) == []


def test_leak_scan_finds_a_copied_solution_body(tmp_path):
    [copy] = release([MINI], tmp_path)
    nb = json.loads(copy.read_text())
    body = (
        "@cuda.jit\ndef add2(n, x, y):\n    start = cuda.grid(1)   # same, commented\n"
        "\n    for i in range(start, n, cuda.gridsize(1)):\n"
        "        y[i] = x[n - 1 - i] + y[i]\n"
    )
    nb["cells"].append(
        {
            "cell_type": "code",
            "id": "leak",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": body,
        }
    )
    copy.write_text(json.dumps(nb))
    (tmp_path / "notes.md").write_text("### BEGIN SOLUTION\n")
    found = leaks([MINI], [tmp_path])
    assert any("id leak" in f and "solution of mini_lesson" in f for f in found), found
    assert any("notes.md" in f and "markers" in f for f in found), found


@pytest.mark.notebook
def test_release_check_on_mini_lesson(tmp_path):
    r = _run("release", "--src", str(MINI.parent), "--out", str(tmp_path), "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "instructor mini_lesson.ipynb: 2 checks, 0 errors" in r.stdout


# The real notebooks.  Each takes ~10-30 s in the simulator (run twice: instructor and
# student copy).  COURSE_RELEASE_CHECK="01_vector_add 02_reduction" or "all" widens it.
REAL = os.environ.get("COURSE_RELEASE_CHECK", "01_vector_add")
REAL_NOTEBOOKS = (
    sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb")) if REAL == "all" else REAL.split()
)


@pytest.mark.notebook
@pytest.mark.slow
def test_release_check_on_real_notebooks(tmp_path):
    present = [n for n in REAL_NOTEBOOKS if (REPO / "notebooks" / f"{n}.ipynb").exists()]
    if not present:
        pytest.skip(f"none of {REAL_NOTEBOOKS} exists yet")
    t0 = time.perf_counter()
    r = _run("release", "--out", str(tmp_path), "--check", "--notebooks", *present)
    print(f"release --check {' '.join(present)}: {time.perf_counter() - t0:.0f} s")
    assert r.returncode == 0, r.stdout + r.stderr


def _valid_nbgrader(meta: dict) -> list[str]:
    """nbgrader's documented cell-metadata schema (version 3), checked key by key."""
    problems = []
    for key, kind in (
        ("schema_version", int),
        ("grade", bool),
        ("solution", bool),
        ("locked", bool),
        ("task", bool),
    ):
        if not isinstance(meta.get(key), kind):
            problems.append(f"{key} must be {kind.__name__}")
    if meta.get("schema_version") != 3:
        problems.append("schema_version must be 3")
    if (meta.get("grade") or meta.get("solution") or meta.get("locked")) and not (
        isinstance(meta.get("grade_id"), str) and meta["grade_id"]
    ):
        problems.append("grade_id required")
    if meta.get("grade") and not isinstance(meta.get("points"), (int, float)):
        problems.append("points required on a graded cell")
    if meta.get("solution") and meta.get("locked"):
        problems.append("an answer cell cannot be locked")
    return problems


def test_release_carries_nbgrader_metadata(tmp_path):
    src = REPO / "notebooks" / "01_vector_add.ipynb"
    nb = student_notebook(json.loads(src.read_text()), src.stem)
    metas = [c["metadata"]["nbgrader"] for c in nb["cells"] if "nbgrader" in c["metadata"]]
    answers = [m for m in metas if m["solution"]]
    tests = [m for m in metas if m["grade"]]
    assert len(answers) == len(tests) == 6
    ids = [m["grade_id"] for m in metas]
    assert len(ids) == len(set(ids)), "grade ids are unique"
    for m in metas:
        assert not _valid_nbgrader(m), (m, _valid_nbgrader(m))
    assert _valid_nbgrader(
        {
            "schema_version": 3,
            "grade": True,
            "solution": False,
            "locked": True,
            "task": False,
            "grade_id": "x",
        }
    )  # no points


# -- the student distribution: python -m course notebooks, --restore, and the package ------


def test_notebooks_by_default_are_student_copies_without_solutions(tmp_path):
    r = _run("notebooks", "--to", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    copies = sorted((tmp_path / "notebooks").glob("*.ipynb"))
    assert len(copies) == len(list((REPO / "notebooks").glob("*.ipynb")))
    for c in copies:
        text = c.read_text()
        assert nbk.BEGIN not in text and nbk.END not in text, c.name
        assert json.loads(text)["metadata"]["course"]["copy"] == "student"
    assert leaks(sorted((REPO / "notebooks").glob("*.ipynb")), [tmp_path / "notebooks"]) == []
    # the way to open them names this environment's own jupyter (a venv's is not on PATH)
    assert f"open them with: {Path(sys.executable).with_name('jupyter')} lab " in r.stdout
    assert r.stdout.rstrip().endswith("--allow-root") == (os.geteuid() == 0)


def test_the_open_command_adds_allow_root_only_for_root(monkeypatch, tmp_path):
    from course.grading.classroom import distribute

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert distribute.open_command(tmp_path).endswith(f" lab {tmp_path}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert distribute.open_command(tmp_path).endswith(f" lab {tmp_path} --allow-root")


def test_restore_brings_back_one_lesson_and_keeps_the_broken_one(tmp_path):
    from course.grading.classroom.distribute import copy_notebooks, restore

    copy_notebooks(tmp_path)
    mine = tmp_path / "notebooks" / "01_vector_add.ipynb"
    other = tmp_path / "notebooks" / "02_reduction.ipynb"
    fresh = mine.read_text()
    mine.write_text("{ broken")
    other.write_text(other.read_text().replace("# YOUR CODE HERE", "# my own work"))
    when = time.mktime((2026, 11, 26, 14, 30, 0, 0, 0, -1))
    target, kept = restore(tmp_path, "01", now=when)
    assert target == mine and mine.read_text() == fresh
    assert kept.name == "01_vector_add.broken-2026-11-26T1430.ipynb"
    assert kept.read_text() == "{ broken"
    assert "# my own work" in other.read_text(), "the other lessons are untouched"
    mine.write_text("{ broken again")
    _, kept2 = restore(tmp_path, "vector_add", now=when)  # same minute: both kept
    assert kept2.name == "01_vector_add.broken-2026-11-26T1430-2.ipynb" and kept.exists()


def test_restore_of_an_unknown_lesson_says_did_you_mean(tmp_path):
    r = _run("notebooks", "--to", str(tmp_path), "--restore", "01_vectr_add", timeout=300)
    assert r.returncode == 2
    assert (
        "unknown lesson '01_vectr_add' given with --restore (did you mean 01_vector_add?)"
        in r.stderr
    ), r.stderr
    r = _run("notebooks", "--to", str(tmp_path), "--restore", "01", "--force", timeout=300)
    assert r.returncode == 2 and "--restore" in r.stderr


def test_no_exercise_answer_is_in_the_package():
    """release --check's package scan: an error (not a note) and, for this course, empty."""
    from course.grading.classroom.release import package_leaks

    assert package_leaks(sorted((REPO / "notebooks").glob("*.ipynb"))) == []


def test_an_exercise_whose_answer_the_package_holds_is_an_error(tmp_path):
    from course.grading.classroom.release import package_leaks

    lecture = (
        "@cuda.jit\ndef add(n, x, y):\n    ### BEGIN SOLUTION\n"
        "    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
        "    stride = cuda.blockDim.x * cuda.gridDim.x\n"
        "    for i in range(index, n, stride):\n        y[i] = x[i] + y[i]\n"
        "    ### END SOLUTION\n"
    )
    (tmp_path / "01_old.ipynb").write_text(json.dumps(_nb("import course\n", lecture)))
    found = package_leaks([tmp_path / "01_old.ipynb"])
    assert found and "vector_add.py" in found[0] and "change the exercise" in found[0], found


def test_release_refuses_student_copies_as_its_sources(tmp_path):
    from course.grading.classroom.distribute import copy_notebooks

    copy_notebooks(tmp_path / "copy")
    r = _run(
        "release",
        "--src",
        str(tmp_path / "copy" / "notebooks"),
        "--out",
        str(tmp_path / "out"),
        "--notebooks",
        "01_vector_add",
        timeout=300,
    )
    assert r.returncode == 1 and "is a student copy" in r.stderr, r.stderr


def test_student_copies_never_overwrite_the_instructor_notebooks():
    r = _run("notebooks", "--to", str(REPO), "--force", timeout=300)
    assert r.returncode == 2 and "course's own notebooks" in r.stderr, r.stderr
    assert nbk.BEGIN in (REPO / "notebooks" / "01_vector_add.ipynb").read_text()
