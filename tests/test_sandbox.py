"""A grader no cell can reach: attacks on the sandbox, the batch and the trusted measurement.

One `python -m course grade` run (the real sandbox, the real measurer; simulator) of a
class in which some students attack: a forged tune figure, kernels the GPU compiler
rejects, a kernel that skips work at the measured size, /proc/<grader>/root, killing the
other workers, a process left running, litter in /tmp, a forged ceiling cache, and a
submission tree with symlinks, a FIFO, name collisions and a 50 MB cell.  Innocent
students beside them must keep their rows; nothing may stay running or on disk.
"""
import copy
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from course.grading import notebook as nbk

pytestmark = pytest.mark.xdist_group("grade-sandbox")   # one grading run, one worker

BASE = REPO / "tests" / "fixtures" / "submissions" / "correct" / "01_vector_add.ipynb"
ADD_PASS = "@cuda.jit\ndef add(n, x, y):\n    pass\n"
SLOW_TUNE = ("@cuda.jit\ndef add_fast(n, x, y):\n    threads = cuda.gridsize(1)\n"
             "    chunk = (n + threads - 1) // threads\n    start = cuda.grid(1) * chunk\n"
             "    for k in range(start, min(start + chunk, n)):\n        y[k] = x[k] + y[k]\n")
GOOD_TUNE = ("@cuda.jit\ndef add_fast(n, x, y):\n"
             "    for k in range(cuda.grid(1), n, cuda.gridsize(1)):\n        y[k] = x[k] + y[k]\n")
MARK = "course-sandbox-attack-7f3a"


def _grid_stride(body: str) -> str:
    return ("@cuda.jit\ndef add(n, x, y):\n    for i in range(cuda.grid(1), n, "
            f"cuda.gridsize(1)):\n{body}")


ATTACKS = {
    # the tune cell patches the measurement of its own process (issue: forged tune figure)
    "forge_tune": {"tune_vector_add": SLOW_TUNE + """
import course.exercises.tune as t
t.Tune.measure_on = lambda self, fn, case, args: {"used": 1, "moved": 1, "read_used": 1,
    "replays": 0, "atomics": 0, "ms": 1e-6, "median_ms": 1e-6, "max_ms": 1e-6}
t.Tune.judge_figures = lambda self, *a, **k: __import__("course.grading.report",
    fromlist=["x"]).CaseResult("tune target", "")
"""},
    # bodies the simulator runs and a GPU compiler rejects
    "dict_body": {"vector_add": _grid_stride("        d = {'x': x[i], 'y': y[i]}\n"
                                             "        y[i] = d['x'] + d['y']\n")},
    "list_body": {"vector_add": _grid_stride("        l = [x[i], y[i]]\n"
                                             "        y[i] = l[0] + l[1]\n")},
    "slice_body": {"vector_add": _grid_stride("        y[i:i+1] = x[i:i+1] + y[i:i+1]\n")},
    # correct at every case's size, idle at the measured one (n = 4096 in the simulator)
    "skip_measured": {"tune_vector_add": GOOD_TUNE.replace(
        "    for k", "    if n == 4096:\n        return\n    for k")},
    # /proc/<pid>/root of every process it can see: append to the hidden cases, rewrite
    # other students' notebooks
    "proc_root": {"vector_add": ADD_PASS + f"""
import os, glob
hits = []
for root in glob.glob('/proc/[0-9]*/root'):
    for target in glob.glob(root + os.environ.get('ATTACK_HIDDEN', '/x') + '/*.py') + \\
            glob.glob(root + os.environ.get('ATTACK_SUBS', '/x') + '/*/*.ipynb'):
        try:
            with open(target, 'a') as f:
                f.write('# {MARK}')
            hits.append(target)
        except OSError:
            pass
"""},
    # a process in its own session that kills every process it can see, then outlives the run
    "killer": {"vector_add": ADD_PASS + f"""
import subprocess, sys
subprocess.Popen([sys.executable, '-c', 'import os, signal, time\\n'
    'time.sleep(1.5)\\n'
    'for p in os.listdir("/proc"):\\n'
    '    if p.isdigit() and int(p) != os.getpid():\\n'
    '        try: os.kill(int(p), signal.SIGKILL)\\n'
    '        except OSError: pass\\n'
    'time.sleep(600)  # {MARK}'], start_new_session=True)
"""},
    # litter /tmp and the home folder's ceiling cache; fill the disk
    "litter": {"vector_add": ADD_PASS + f"""
import os, pathlib, pwd
home = pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir)
for path, text in ((pathlib.Path('/tmp/{MARK}'), 'x'),
                   (home / '.cache' / 'course' / 'ceilings.json', '{MARK}')):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError:
        pass
try:
    with open('big', 'wb') as f:
        for _ in range(1024):
            f.write(b'0' * (1 << 20))
except OSError:
    pass
"""},
    # a correct kernel with a 50 MB comment
    "huge_cell": {"vector_add": "# " + "x" * (50 << 20) + "\n" + _grid_stride(
        "        y[i] = x[i] + y[i]\n")},
}
INNOCENT = ["victim1", "victim2", "victim3"]


def _notebook(sources: dict, keep=()) -> dict:
    """Lesson 01 with ``sources`` in their exercise cells; the other exercise cells are
    dropped unless named in ``keep`` (they would only make the run longer)."""
    nb = json.loads(BASE.read_text())
    cells = []
    for raw, cell in zip(nb["cells"], nbk.cells(copy.deepcopy(nb))):
        tag = cell.exercise_tag
        if tag in sources:
            raw["source"] = sources[tag].splitlines(keepends=True)
        if tag is None or tag in sources or tag in keep:
            cells.append(raw)
    nb["cells"] = cells
    return nb


CORRECT = ("vector_add", "matrix_add")     # what the innocent students' rows are read for


def _pids_with(marker: str) -> list[str]:
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and marker in Path(f"/proc/{p}/cmdline").read_text(errors="ignore"):
                out.append(p)
        except OSError:
            pass
    return out


@pytest.fixture(scope="session")   # once per worker, even if xdist interleaves modules
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("sandbox")
    subs, hidden = root / "submissions", root / "hidden"
    shutil.copytree(REPO / "instructor" / "hidden", hidden)
    for student, sources in ATTACKS.items():
        (subs / student).mkdir(parents=True)
        (subs / student / "01_vector_add.ipynb").write_text(json.dumps(_notebook(sources)))
    for v in INNOCENT:
        (subs / v).mkdir(parents=True)
        (subs / v / "01_vector_add.ipynb").write_text(json.dumps(_notebook({}, CORRECT)))
    # the submission tree's own attacks
    tree = {"link_to_key": lambda p: p.symlink_to(REPO / "notebooks" / "01_vector_add.ipynb"),
            "link_to_zero": lambda p: p.symlink_to("/dev/zero"),
            "fifo": lambda p: os.mkfifo(p)}
    for student, make in tree.items():
        (subs / student).mkdir()
        make(subs / student / "01_vector_add.ipynb")
    for student in ("alice", "bob"):      # a browser's re-download name in both folders
        (subs / student).mkdir()
        (subs / student / "01_vector_add (1).ipynb").write_text(
            json.dumps(_notebook({}, CORRECT)))
    (subs / "mallory").mkdir()            # names another student in its file name
    (subs / "mallory" / "victim1_01_vector_add.ipynb").write_text(
        json.dumps(_notebook({"vector_add": ADD_PASS})))
    for student in ("carol", "carol."):
        (subs / student).mkdir()
        (subs / student / "01_vector_add.ipynb").write_text(json.dumps(_notebook({})))
    before = {p: p.read_bytes() for p in subs.rglob("*.ipynb") if p.is_file()
              and not p.is_symlink()}
    hidden_before = {p.name: p.read_text() for p in hidden.glob("*.py")}
    out, fb = root / "out" / "grades.csv", root / "feedback"
    tmp = root / "tmp"          # the run's own temp folder: what is left there is its own
    tmp.mkdir()
    env = dict(os.environ, COURSE_HIDDEN_DIR=str(hidden), ATTACK_HIDDEN=str(hidden),
               ATTACK_SUBS=str(subs), TMPDIR=str(tmp))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "course", "grade", str(subs), "--out", str(out),
                        "--feedback", str(fb), "--timeout", "90", "--case-time-limit", "10",
                        "--jobs", "2", "--seed", "4242"],
                       cwd=REPO, env=env, text=True, capture_output=True, timeout=900)
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    time.sleep(2)       # a process that tried to outlive the run has had its chance
    with open(out, newline="") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    return {"rows": rows, "stdout": r.stdout, "feedback": sorted(p.name for p in fb.iterdir()),
            "subs": subs, "before": before, "tmp": tmp, "hidden": hidden, "hidden_before": hidden_before,
            "took": took}


def sandboxed(run):
    if "worker sandbox: NONE" in run["stdout"]:
        pytest.skip("this system allows no sandbox: " + run["stdout"].splitlines()[0])


def test_a_forged_tune_figure_earns_nothing(run):
    row = run["rows"]["forge_tune"]
    assert row["tune_vector_add"] == "0", row
    assert "measured 0.125, target >= 0.95" in row["reasons"], row["reasons"]


@pytest.mark.parametrize("student", ["dict_body", "list_body", "slice_body"])
def test_kernels_a_gpu_rejects_fail_at_the_gate(run, student):
    row = run["rows"][student]
    assert row["vector_add"] == "0", row
    assert "does not compile for a GPU" in row["reasons"], row["reasons"]


def test_skipping_work_at_the_measured_size_gets_no_figure(run):
    row = run["rows"]["skip_measured"]
    assert row["tune_vector_add"] == "0", row
    assert "no figure: the measured launch" in row["reasons"], row["reasons"]


def test_proc_root_reaches_neither_hidden_cases_nor_other_notebooks(run):
    sandboxed(run)
    assert run["rows"]["proc_root"]["vector_add"] == "0"
    for p, data in run["before"].items():
        assert p.read_bytes() == data, f"{p} was changed during grading"
    for name, text in run["hidden_before"].items():
        assert (run["hidden"] / name).read_text() == text, f"hidden {name} was changed"


def test_the_killer_hurts_nobody_and_does_not_outlive_the_run(run):
    sandboxed(run)
    for v in INNOCENT:
        row = run["rows"][v]
        assert row["status"] == "graded" and row["vector_add"] == "1" and \
            row["matrix_add"] == "1", row
    assert not _pids_with(MARK), "a student's process outlived the grading run"


def test_nothing_is_left_on_disk(run):
    sandboxed(run)
    assert not Path(f"/tmp/{MARK}").exists()
    cache = Path.home() / ".cache" / "course" / "ceilings.json"
    assert not cache.exists() or MARK not in cache.read_text()
    assert [p.name for p in run["tmp"].iterdir()] in ([], ["course-gpu-0.lock"])


def test_a_huge_cell_is_named_not_crashed(run):
    row = run["rows"]["huge_cell"]
    assert row["vector_add"] == "0" and "cell too large (50.0 MB; limit 1 MB)" in \
        row["reasons"], row


@pytest.mark.parametrize("student, why", [("link_to_key", "is a link, not a file"),
                                          ("link_to_zero", "is a link, not a file"),
                                          ("fifo", "not a regular file")])
def test_links_and_pipes_are_rows_not_points(run, student, why):
    row = run["rows"][student]
    assert row["total"] == "0" and row["status"] == "invalid" and why in row["reasons"], row


def test_rows_are_keyed_by_the_students_folder(run):
    rows = run["rows"]
    assert rows["alice"]["vector_add"] == "1" and rows["bob"]["vector_add"] == "1"
    assert rows["mallory"]["vector_add"] == "0"
    assert rows["victim1"]["vector_add"] == "1", "mallory's file replaced victim1's score"
    assert {"carol", "carol."} <= set(rows)
    assert {"carol.md", "carol-2.md"} <= set(run["feedback"])
    assert "belongs to another student" in run["stdout"]


def test_every_submission_has_a_row(run):
    expected = set(ATTACKS) | set(INNOCENT) | {"link_to_key", "link_to_zero", "fifo", "alice",
                                               "bob", "mallory", "carol", "carol."}
    assert set(run["rows"]) == expected
