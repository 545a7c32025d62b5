"""Grades cannot be forged: every attack a student cell can make on the grader, tried.

Each fake student below submits lesson 01 with a `vector_add` kernel whose body is `pass`
(worth 0) and a cell that tries to win the point anyway.  The verdict is computed in the
grader's own process (course/grading/judging/session.py), so every attack must leave vector_add at 0
and the row must say what happened.
"""

import copy
import csv
import json
import subprocess
import sys

import pytest
from conftest import REPO

from course.grading.classroom import notebook as nbk

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("grade-attacks")]  # one run, one worker

BASE = REPO / "tests" / "fixtures" / "submissions" / "correct" / "01_vector_add.ipynb"
ADD_PASS = "@cuda.jit\ndef add(n, x, y):\n    pass\n"
MATRIX_OK = """@cuda.jit
def matrix_add(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = A[row, col] + B[col, row]
"""
PIPES = "import os, sys\nR, W = int(sys.argv[-2]), int(sys.argv[-1])\n"
FORGED_EVENT = json.dumps(
    {
        "event": "exercise",
        "name": "vector_add",
        "error": None,
        "cases": [
            {"name": "n = 1", "passed": True, "hidden": False, "launch": "[1, 32]", "message": ""}
        ],
    }
)
WELL_FORMED = "from course.grading.wall.wire import Channel\nforge = Channel(R, W)\n"

ATTACKS = {
    # the attack: a later cell writes a forged "exercise passed" event
    "forged_event": (
        ADD_PASS,
        MATRIX_OK + PIPES + f"os.write(W, {FORGED_EVENT!r}.encode() + b'\\n')\n",
    ),
    # well-framed forged replies: an extra "ran" and a fake launch result out of turn
    "forged_replies": (
        ADD_PASS,
        MATRIX_OK
        + PIPES
        + WELL_FORMED
        + "forge.send({'op': 'ran', 'step': 99, 'error': None, 'have': 'kernel'})\n",
    ),
    # monkeypatch the checker, the result class and the registry inside the worker
    "monkeypatch": (
        ADD_PASS
        + """
import course, course.exercises, course.grading.judging.check as c, course.grading.judging.judge as j
from course.grading.judging.report import CheckResult
j.judge = lambda *a, **k: None
j.compare = lambda *a, **k: None
c.check = course.check = lambda *a, **k: CheckResult("vector_add", True, "sim", 0)
CheckResult.passed = True
""",
        MATRIX_OK,
    ),
    "monkeypatch_registry": (
        ADD_PASS
        + """
import course.exercises
course.exercises.get = lambda name: None
course.exercises.all_exercises = lambda: {}
""",
        MATRIX_OK,
    ),
    # a thread that answers the grader's launch requests itself, with untouched buffers,
    # and one that keeps writing after the check
    "steal_requests": (
        ADD_PASS
        + PIPES
        + WELL_FORMED
        + """
import threading
def serve():
    while True:
        req, arrays = forge.recv()
        forge.send({'op': 'launched', 'step': req.get('step'), 'error': None,
                    'timed_out': False}, arrays)
threading.Thread(target=serve, daemon=True).start()
""",
        MATRIX_OK,
    ),
    "late_thread": (
        ADD_PASS,
        MATRIX_OK
        + PIPES
        + """
import threading, time
def later():
    time.sleep(0.3)
    for _ in range(50):
        os.write(W, b'{"event": "exercise", "name": "vector_add", "cases": []}\\n')
        time.sleep(0.05)
threading.Thread(target=later, daemon=True).start()
""",
    ),
    # cut the run right after a forged write
    "exit_after_forgery": (
        ADD_PASS,
        MATRIX_OK
        + PIPES
        + WELL_FORMED
        + "forge.send({'op': 'ran', 'step': 2, 'error': None, 'have': 'kernel'})\n"
        "os._exit(0)\n",
    ),
    "kill_after_forgery": (
        ADD_PASS,
        MATRIX_OK + PIPES + f"os.write(W, {FORGED_EVENT!r}.encode())\n"
        "import signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    ),
    # overwrite the grades and the feedback from inside the worker
    "write_outputs": (
        ADD_PASS
        + """
import os, pathlib
argv = open(f"/proc/{os.getppid()}/cmdline").read().split("\\0")
out = pathlib.Path(argv[argv.index("--out") + 1])
fb = pathlib.Path(argv[argv.index("--feedback") + 1])
errors = []
for path, text in ((out, "student,vector_add\\nwrite_outputs,FORGED\\n"),
                   (fb / "write_outputs.md", "FORGED"), (fb / "zz_forged.md", "FORGED")):
    try:
        path.write_text(text)
    except OSError as exc:
        errors.append(type(exc).__name__)
""",
        MATRIX_OK,
    ),
    # fix the kernel after its check ran: the verdict was taken when the cell ran
    "redefine_later": (
        ADD_PASS,
        MATRIX_OK + "\n@cuda.jit\ndef add(n, x, y):\n"
        "    for k in range(cuda.grid(1), n, cuda.gridsize(1)):\n"
        "        y[k] = y[k] + x[k]\n",
    ),
    # read the hidden cases and the grading seed
    "read_secrets": (
        ADD_PASS
        + """
import os, pathlib, course
hidden = pathlib.Path(course.__file__).resolve().parents[1] / "instructor" / "hidden" / "vector_add.py"
try:
    found = "HIDDEN-READABLE " + hidden.read_text()[:40]
except OSError as exc:
    found = f"HIDDEN-UNREADABLE {type(exc).__name__}"
seen = " ".join(os.sys.argv) + " ".join(f"{k}={v}" for k, v in os.environ.items())
raise RuntimeError(found + (" SEED-SEEN" if "424242" in seen else " SEED-UNSEEN"))
""",
        MATRIX_OK,
    ),
}


def _submission(add_src: str, matrix_src: str) -> dict:
    nb = json.loads(BASE.read_text())
    for raw, cell in zip(nb["cells"], nbk.cells(copy.deepcopy(nb))):
        src = {"vector_add": add_src, "matrix_add": matrix_src}.get(cell.exercise_tag)
        if src is not None:
            raw["source"] = src.splitlines(keepends=True)
    return nb


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves modules
def attacked(tmp_path_factory):
    root = tmp_path_factory.mktemp("attacks")
    subs = root / "submissions"
    for student, (add_src, matrix_src) in ATTACKS.items():
        (subs / student).mkdir(parents=True)
        (subs / student / "01_vector_add.ipynb").write_text(
            json.dumps(_submission(add_src, matrix_src))
        )
    out, fb = root / "out" / "grades.csv", root / "feedback"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "grade",
            str(subs),
            "--out",
            str(out),
            "--feedback",
            str(fb),
            "--timeout",
            "60",
            "--case-time-limit",
            "5",
            "--jobs",
            "2",
            "--seed",
            "424242",
        ],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out, newline="") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    return rows, {p.name: p.read_text() for p in fb.iterdir()}, r.stdout


@pytest.mark.parametrize("student", sorted(ATTACKS))
def test_no_forged_points(attacked, student):
    rows, feedback, _ = attacked
    row = rows[student]
    assert row["vector_add"] == "0", row
    assert "FORGED" not in row["vector_add"] and "FORGED" not in feedback[f"{student}.md"]
    assert row["reasons"].startswith("vector_add"), "the lost point has a reason"


@pytest.mark.parametrize(
    "student, statuses, words",
    [
        ("forged_event", {"tampered"}, ["matrix_add: 0 points: tampered"]),
        ("forged_replies", {"tampered"}, ["tampered", "something else wrote to the grader's pipe"]),
        # its writes land while a later exercise is graded (the worker no longer launches, so
        # the conversation is shorter): that exercise and the rest get 0
        ("late_thread", {"tampered"}, ["0 points: tampered"]),
        ("monkeypatch", {"graded"}, ["came back unchanged"]),
        # the patched registry breaks the student's own process: nothing is graded
        ("monkeypatch_registry", {"crashed"}, ["vector_add: not graded: the grader process died"]),
        # two readers on one pipe: the conversation breaks one way or the other
        ("steal_requests", {"crashed", "tampered", "graded", "timeout"}, ["vector_add"]),
        ("exit_after_forgery", {"tampered"}, ["matrix_add: 0 points: tampered"]),
        ("kill_after_forgery", {"tampered"}, ["matrix_add: 0 points: tampered"]),
        ("redefine_later", {"graded"}, ["came back unchanged"]),
    ],
)
def test_the_row_says_why(attacked, student, statuses, words):
    rows, _, _ = attacked
    row = rows[student]
    assert row["status"] in statuses, row
    for w in words:
        assert w in row["reasons"], (w, row["reasons"])


def test_a_later_redefinition_does_not_change_the_verdict(attacked):
    rows, _, _ = attacked
    assert rows["redefine_later"]["matrix_add"] == "1"


def test_outputs_written_by_the_worker_do_not_survive(attacked):
    rows, feedback, _ = attacked
    assert rows["write_outputs"]["vector_add"] == "0"
    assert "zz_forged.md" not in feedback or feedback["zz_forged.md"] != "FORGED"


def test_tampering_is_reported_to_the_instructor(attacked):
    _, feedback, _ = attacked
    assert "for the instructor" in feedback["forged_replies.md"]


def test_secrets_stay_out_of_the_worker(attacked):
    _, feedback, stdout = attacked
    text = feedback["read_secrets.md"]
    assert "SEED-UNSEEN" in text, text
    if "isolation: none" in stdout:
        pytest.skip("this system allows no private mount namespace: " + stdout.splitlines()[0])
    assert "HIDDEN-UNREADABLE" in text, text


def test_outputs_are_rewritten_even_without_isolation(tmp_path):
    """Without a mount namespace the worker can write the CSV; the grader writes it last."""
    (tmp_path / "s" / "write_outputs").mkdir(parents=True)
    (tmp_path / "s" / "write_outputs" / "01_vector_add.ipynb").write_text(
        json.dumps(_submission(*ATTACKS["write_outputs"]))
    )
    out, fb = tmp_path / "grades.csv", tmp_path / "fb"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "grade",
            str(tmp_path / "s"),
            "--out",
            str(out),
            "--feedback",
            str(fb),
            "--isolation",
            "none",
            "--seed",
            "3",
            "--timeout",
            "60",
        ],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "FORGED" not in text and "write_outputs,01_vector_add.ipynb" in text
    assert (fb / "write_outputs.md").read_text() != "FORGED"


def test_wire_rejects_what_is_not_a_message():
    import os

    from course.grading.wall.wire import Channel, WireError

    for junk in (
        b'{"event": "exercise"}\n',
        (5).to_bytes(8, "little") + b"[1,2]",
        (2).to_bytes(8, "little") + b"{}" + (3).to_bytes(8, "little") + b"abc",
    ):
        r, w = os.pipe()
        os.write(w, junk.replace(b"{}", b'{"arrays": ["y"]}', 1) if b"abc" in junk else junk)
        os.close(w)
        with pytest.raises(WireError) as err:
            Channel(r, os.pipe()[1], deadline=__import__("time").monotonic() + 2).recv()
        assert not err.value.timed_out
        os.close(r)
