"""The grader's own memory does not grow with the class (issue 38, "bounded judges").

A submission is read at start-up only to find its lesson and key, then dropped, and read
again (the same bytes, checked by digest) when its job starts; what one parse may cost is
bounded by a scan of the bytes before json.loads.  Before this, a 63 MB valid notebook of
``"junk": [{},{},...]`` cost the grader 1.8 GB and stayed in memory for the whole run:
this test's class took 2.17 GB peak and 28 s; now about 180 MB and 7 s.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from course.grading.classroom import intake
from course.grading.classroom import notebook as nbk
from course.grading.classroom.prepare import read_submission

CORRECT = REPO / "tests" / "fixtures" / "submissions" / "correct" / "01_vector_add.ipynb"
PEAK_MB = 300  # the grader's own peak RSS for the class below (measured: ~190 MB)
BIGS = 8  # valid 15 MB notebooks: held all at once, they alone would pass PEAK_MB

# Runs the grader in this child and reports its own peak RSS (not its workers'): VmHWM,
# since getrusage's ru_maxrss keeps the parent's peak across fork and exec.
RUN = """
import sys
from course.__main__ import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print("PEAK_KB", hwm, file=sys.stderr)
sys.exit(rc)
"""


def _junk(mb: int) -> str:
    """The red team's notebook: a real one plus ``"junk": [{},{},...]`` of ``mb`` MB."""
    s = CORRECT.read_text(encoding="utf-8").rstrip().rstrip("}")
    return s + ', "junk": [' + ",".join(["{}"] * ((mb << 20) // 3)) + "]}"


def _big(mb: int) -> str:
    """A valid notebook of ``mb`` MB of text (one markdown cell): cheap to parse, large."""
    cell = {"cell_type": "markdown", "metadata": {}, "source": "x" * (mb << 20)}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memory")
    subs = tmp / "subs"
    notebooks = {"alice": CORRECT.read_text(encoding="utf-8"), "mallory": _junk(63)}
    notebooks["trudy"] = _junk(12)  # under the size limit: the structure scan refuses it
    notebooks |= {f"big{i}": _big(15) for i in range(BIGS)}
    for who, text in notebooks.items():
        (subs / who).mkdir(parents=True)
        (subs / who / "01_vector_add.ipynb").write_text(text, encoding="utf-8")
    out = tmp / "out" / "g.csv"
    r = subprocess.run(
        [sys.executable, "-c", RUN, "grade", str(subs), "--lesson", "01"]
        + ["--isolation", "none", "--timeout", "120", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    peak = int(r.stderr.rsplit("PEAK_KB", 1)[1].split()[0]) / 1024
    return peak, {row["student"]: row for row in csv.DictReader(open(out, newline=""))}


def test_the_graders_peak_memory_does_not_grow_with_junk_or_class(graded):
    peak, _ = graded
    assert peak < PEAK_MB, f"the grader peaked at {peak:.0f} MB (bound {PEAK_MB} MB)"


def test_junk_notebooks_are_invalid_with_a_sentence_and_the_others_graded(graded):
    _, rows = graded
    assert rows["mallory"]["status"] == "rejected"
    assert "notebook too large (17+ MB; limit 16 MB)" in rows["mallory"]["reasons"]
    assert rows["trudy"]["status"] == "rejected"
    assert "JSON brackets, commas and colons (limit 500,000" in rows["trudy"]["reasons"]
    for i in range(BIGS):  # read and parsed when their job ran: no exercise cell in them
        row = rows[f"big{i}"]
        assert row["status"] == "graded" and "exercise cell not found" in row["reasons"], row
    alice = rows["alice"]
    assert alice["lesson"] == "01_vector_add" and alice["status"] != "rejected", alice
    assert "limit" not in alice["reasons"], alice


def test_the_structure_scan_refuses_before_parsing_and_passes_the_lessons():
    raw = ("[" + ",".join(["{}"] * nbk.MAX_STRUCTURE) + "]").encode()
    with pytest.raises(nbk.NotebookError, match="JSON brackets, commas and colons"):
        nbk.loads(raw, "x.ipynb")
    for p in sorted((REPO / "notebooks").glob("*.ipynb")):  # every lesson parses
        raw = p.read_bytes()
        assert nbk.structure(raw) < nbk.MAX_STRUCTURE // 50, p.name
        assert nbk.loads(raw, p.name)["cells"]
    assert nbk.structure(b'{"a": [1, {}]}') == 5


def test_a_submission_is_dropped_after_startup_and_read_again_unchanged(tmp_path):
    p = tmp_path / "alice" / "01_vector_add.ipynb"
    p.parent.mkdir()
    p.write_bytes(CORRECT.read_bytes())
    plans = {"01_vector_add": None}
    seen = []

    def survey(sub):
        read_submission(sub, plans, None)
        seen.append(sub.notebook is not None)
        intake.forget(sub)

    (sub,) = intake.collect([tmp_path], survey)
    assert seen == [True] and sub.lesson == "01_vector_add"
    assert sub.data is None and sub.notebook is None and sub.size == p.stat().st_size
    read_submission(sub, plans, None)  # the job starts: the same bytes again
    assert sub.data == CORRECT.read_bytes() and sub.notebook and not sub.problem
    intake.forget(sub)
    p.write_bytes(CORRECT.read_bytes().replace(b"vector", b"VECTOR"))  # swapped since
    read_submission(sub, plans, None)
    assert sub.notebook is None and "changed while the class was being graded" in sub.problem
    p.unlink()  # and a file gone since start-up is a problem, never a crash
    sub2 = intake.Submission(Path(p), "alice/x", "alice", size=3, digest="abc")
    intake.reload(sub2)
    assert sub2.data is None and "cannot read" in sub2.problem
