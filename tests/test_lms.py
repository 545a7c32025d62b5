"""Grades into Canvas: the gradebook-import layout, and a roster that drops nobody."""

import csv

import pytest

from course.grading.classroom.batch import Graded
from course.grading.classroom.lms import LEADING, RosterError, read_roster, write_canvas


def _graded(student, vec, mat, extra=None):
    g = Graded(student, f"{student}/01_vector_add.ipynb", lesson="01_vector_add")
    g.points = {"vector_add": vec, "matrix_add": mat, **(extra or {})}
    g.max_points = {k: 1.0 for k in g.points}
    return g


def _roster(tmp_path, text):
    p = tmp_path / "roster.csv"
    p.write_text(text)
    return read_roster(p)


def test_canvas_layout_and_roster_mismatches(tmp_path):
    rows = [_graded("alice", 1, 1, {"mean_face": 0.5}), _graded("bob", 0, 1), _graded("zed", 1, 0)]
    roster = _roster(
        tmp_path,
        "submission,id,name,login,section\n"
        "alice,101,Alice A,alice@x.edu,A\nbob,102,Bob B,bob@x.edu,B\n"
        "carol,103,Carol C,carol@x.edu,A\n",
    )
    out = tmp_path / "canvas.csv"
    said = write_canvas(rows, out, roster, log=lambda m: None)
    table = list(csv.reader(out.open()))
    assert table[0][:5] == LEADING and table[1][0] == "Points Possible"
    assert table[0][5:] == ["01_vector_add (2)", "05_mean_face (1)"]
    assert table[1][5:] == ["2", "1"]
    by_id = {r[1]: r for r in table[2:]}
    assert by_id["101"][5:] == ["2", "0.5"] and by_id["101"][3] == "alice@x.edu"
    assert by_id["102"][5:] == ["1", ""]
    assert by_id["103"][5:] == ["", ""], "a roster student with no submission: no grade"
    assert any("carol" in m and "no submission" in m for m in said)
    assert any("zed" in m and "not on the roster" in m for m in said)
    unmatched = list(csv.reader((tmp_path / "canvas.unmatched.csv").open()))
    assert unmatched[1][:3] == ["zed", "zed/01_vector_add.ipynb", "1"]


@pytest.mark.parametrize(
    "text, words",
    [
        ("name,id\nx,1\n", "columns `submission` and `id`"),
        ("submission,id\nx,1\nx,2\n", "listed twice"),
        ("submission,id\nx,\n", "empty"),
    ],
)
def test_bad_rosters_are_explained(tmp_path, text, words):
    with pytest.raises(RosterError, match=words):
        _roster(tmp_path, text)
