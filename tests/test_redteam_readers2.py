"""The second red team of round five: what got through the readers, each now a test.

1. A submitted file that defines (or imports) a function under the name the reader once used
   for its stand-in decorator got that function *run* in the reader (it read the service's
   environment and database); the stand-in now has a name no statement can bind.
2. ``np.dtype`` on a long string, thousands of times, held a reader past its deadline; a
   dtype named by a string is at most 8 characters and a file makes at most 4,096 calls.
3. A notebook whose ``metadata.course.lesson`` was a list ended the whole class's ``grade``
   run (unhashable type); metadata of any type is only a hint, and a notebook the survey
   cannot read becomes that submission's problem, never the run's.
"""

import json
import subprocess
import sys
import time

import pytest
from conftest import REPO

from course.grading.classroom import intake
from course.leaderboard import fromfile

KERNEL = """
@cuda.jit
def add(n, x, y):
    i = cuda.grid(1)
    if i < n:
        y[i] = x[i] + y[i]
"""


@pytest.mark.parametrize(
    "planted",
    [
        "def _keeps_lines(f):\n    open(MARK, 'w').write('ran')\n    return f\n",
        "@cuda.jit\ndef _keeps_lines(f):\n    open(MARK, 'w').write('ran')\n",
        "from numpy import vectorize as _keeps_lines\n",
    ],
    ids=["def", "jitted-def", "import-as"],
)
def test_no_function_of_a_file_runs_as_the_readers_decorator(planted, tmp_path):
    mark = tmp_path / "ran"
    source = f"from numba import cuda\nMARK = {str(mark)!r}\n{planted}{KERNEL}"
    try:
        unit = fromfile.unit_of_file(source, "add")
    except fromfile.FileError:
        unit = None  # refused is fine; run is not, and no other exception either
    assert not mark.exists(), "the file's own function ran in the reader"
    if unit is not None:
        assert unit["name"] == "add" and "n, x, y" in unit["source"]


def test_a_dtype_named_by_a_long_string_is_refused_at_once():
    source = (
        "from numba import cuda\nfrom numpy import dtype as d\n"
        f"S = {'i1,' * 6000!r}\nT = ({', '.join(['d(S)'] * 60)},)\n{KERNEL}"
    )
    t0 = time.perf_counter()
    with pytest.raises(fromfile.FileError, match="longer than 8 characters"):
        fromfile.unit_of_file(source, "add")
    assert time.perf_counter() - t0 < 2.0


def test_a_file_makes_a_bounded_number_of_calls():
    rows = "\n".join(f"C{i} = (np.float32(1), np.float32(2))" for i in range(2100))
    source = f"from numba import cuda\nimport numpy as np\n{rows}\n{KERNEL}"
    with pytest.raises(fromfile.FileError, match="more than 4096"):
        fromfile.unit_of_file(source, "add")


def test_honest_calls_and_dtypes_still_pass():
    source = (
        "from numba import cuda\nimport numpy as np\nA = np.float32(0.5)\n"
        "D = np.dtype('float32')\nT = ((1, 0), (0, 1))\n" + KERNEL.replace("x[i] +", "x[i] * A +")
    )
    unit = fromfile.unit_of_file(source, "add")
    assert "A" in unit["globals"]


@pytest.mark.parametrize("lesson", [[], {}, 3, None, ["01_vector_add"]])
def test_lesson_metadata_of_any_type_is_only_a_hint(lesson, tmp_path):
    nb = {"metadata": {"course": {"lesson": lesson}}, "cells": []}
    plans = {"01_vector_add": type("Plan", (), {"exercises": {}})()}
    assert intake.find_lesson(nb, tmp_path / "x.ipynb", plans, None) is None


def test_a_notebook_with_odd_metadata_does_not_stop_the_class(tmp_path):
    folder = tmp_path / "class"
    (folder / "odd").mkdir(parents=True)
    nb = {"metadata": {"course": {"lesson": []}}, "nbformat": 4, "nbformat_minor": 5}
    nb["cells"] = []
    (folder / "odd" / "01_vector_add.ipynb").write_text(json.dumps(nb))
    out = tmp_path / "g.csv"
    r = subprocess.run(
        [sys.executable, "-m", "course", "grade", str(folder), "--out", str(out)]
        + ["--isolation", "none", "--timeout", "60"],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "odd" in out.read_text()
