"""``python -m course grade``: every kind of broken submission still gets a row and feedback.

The fixtures (tests/fixtures/submissions/<student>/01_vector_add.ipynb) are student copies of
notebooks/01_vector_add.ipynb with the exercise cells rewritten; make_submissions.py beside
them rebuilds them.
"""

import csv
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from course.grading import hidden
from course.grading.classroom import notebook as nbk
from course.grading.classroom.intake import student_name

SUBMISSIONS = REPO / "tests" / "fixtures" / "submissions"
HIDDEN = REPO / "instructor" / "hidden"
pytestmark = [
    pytest.mark.e2e,  # the class graded through the command line
    pytest.mark.xdist_group("grade-fixtures"),  # one grading run, one worker
    pytest.mark.skipif(
        not (REPO / "notebooks" / "01_vector_add.ipynb").exists(),
        reason="needs notebooks/01_vector_add.ipynb",
    ),
]
TIMEOUT_S = 30  # per submission; the endless-loop fixtures run into it


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves modules
def graded(tmp_path_factory):
    out = tmp_path_factory.mktemp("grades")
    t0 = time.perf_counter()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "grade",
            str(SUBMISSIONS),
            "--out",
            str(out / "grades.csv"),
            "--feedback",
            str(out / "feedback"),
            "--timeout",
            str(TIMEOUT_S),
            "--case-time-limit",
            "2",
            "--jobs",
            "2",
            "--seed",
            "7",
        ],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=600,
    )
    print(f"graded the fixtures in {time.perf_counter() - t0:.0f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out / "grades.csv", newline="") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    feedback = {p.stem: p.read_text() for p in (out / "feedback").glob("*.md")}
    return rows, feedback, out


def test_one_row_and_feedback_per_student(graded):
    rows, feedback, out = graded
    students = sorted(p.name for p in SUBMISSIONS.iterdir() if p.is_dir())
    assert sorted(rows) == students
    assert sorted(feedback) == students
    assert sorted(p.stem for p in (out / "feedback").glob("*.html")) == students
    with open(out / "grades.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header == [
        "student",
        "submission",
        "lesson",
        "mode",
        "status",
        "vector_add",
        "matrix_add",
        *PRACTICE,
        "total",
        "max",
        "reasons",
    ]


# lesson 01's practice exercises: the fixtures hold them as released (the given bug, the
# empty answer), so every student but "correct" loses these points, each with a reason
PRACTICE = ["predict_launch", "debug_grid_stride", "debug_matrix_layout", "tune_vector_add"]


# student -> (vector_add, matrix_add, status, words the reasons must contain)
EXPECTED = {
    "correct": ("1", "1", "graded", []),
    "empty": ("0", "0", "graded", ["never written"]),
    "wrong_result": ("0", "1", "graded", ["vector_add (-1)", "elements wrong"]),
    "crash": ("1", "0", "crashed", ["SIGSEGV", "your matrix_add cell"]),
    "raises": (
        "0",
        "0",
        "graded",
        ["ModuleNotFoundError", "a_module_that_does_not_exist", "IndexError"],
    ),
    "infinite_loop": (
        "0",
        "0",
        "timeout",
        [
            "time limit",
            f"within {TIMEOUT_S} s",
            "your matrix_add cell",
            "or in a kernel that cell launches?",
        ],
    ),
    "out_of_bounds": (None, "0", "graded", ["bounds check"]),
    "syntax_error": ("0", "1", "graded", ["syntax error on line 5", "expected ':'"]),
    "missing_cell": ("0", "1", "graded", ["vector_add: exercise cell not found"]),
    "duplicated_cell": ("1", "1", "graded", []),
    "marker_lost": ("1", "1", "graded", []),
    "corrupted_json": ("0", "0", "rejected", ["not valid JSON"]),
}


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_row(graded, student):
    rows, _, _ = graded
    row = rows[student]
    vec, mat, status, words = EXPECTED[student]
    if vec is not None:
        assert row["vector_add"] == vec, row
    assert row["matrix_add"] == mat, row
    assert row["status"] == status, row
    assert row["max"] == "6" and row["lesson"] == "01_vector_add"
    assert float(row["total"]) == pytest.approx(
        sum(float(row[e]) for e in ["vector_add", "matrix_add", *PRACTICE])
    )
    practice = "1" if student == "correct" else "0"  # correct: full marks, 6 of 6
    assert all(row[e] == practice for e in PRACTICE), row  # debug, tune: all or nothing
    for w in words:
        assert w in row["reasons"], (w, row["reasons"])
    if row["total"] != row["max"]:
        assert row["reasons"], "every lost point has a reason"
    if status != "rejected":
        assert row["mode"] in ("sim", "gpu")


def test_out_of_bounds_gets_partial_credit_at_most(graded):
    rows, _, _ = graded
    assert 0 <= float(rows["out_of_bounds"]["vector_add"]) < 0.5


@pytest.mark.parametrize(
    "student, words",
    [
        ("duplicated_cell", ["2 cells found by marker", "graded the last one"]),
        ("marker_lost", ["found by function name `add`"]),
        (
            "correct",
            [
                "12 of 12 cases passed: 1/1 \u2014 points in proportion to the cases passed",
                "(hidden)",
                "Score: 6 / 6",
            ],
        ),
        (
            "empty",
            [
                "cases passed: 0/1 \u2014 a debug exercise scores only when every case passes",
                "a tune exercise scores only when every case passes",
            ],
        ),
        ("crash", ["Grading status: **crashed**", "SIGSEGV"]),
        ("corrupted_json", ["not valid JSON", "Score: 0 / 6"]),
    ],
)
def test_feedback_says_what_happened(graded, student, words):
    _, feedback, _ = graded
    for w in words:
        assert w in feedback[student], (w, feedback[student])


# the README's and the instructor README's example CSV rows: who they are among the fixtures
README_STUDENTS = {
    "alice": "correct",
    "bob": "wrong_result",
    "carol": "crash",
    "dave": "corrupted_json",
}


def test_the_readme_example_rows_are_what_grade_writes(graded):
    """Every ```csv block of both READMEs: the header grade writes, and each row the row of
    its fixture (same points, status, total, max; the same exercises named in the reasons)."""
    import re

    rows, _, out = graded
    with open(out / "grades.csv", newline="") as f:
        header = next(csv.reader(f))
    blocks = [
        b
        for doc in ("README.md", "instructor/README.md")
        for b in re.findall(r"```csv\n(.*?)```", (REPO / doc).read_text(), re.S)
    ]
    assert len(blocks) == 2, "one example in each README"
    for block in blocks:
        lines = [l.strip() for l in block.strip().splitlines()]
        readme = list(csv.DictReader(lines))
        assert next(csv.reader(lines[:1])) == header
        assert "alice" in {r["student"] for r in readme}, "the correct student is shown"
        for r in readme:
            real = rows[README_STUDENTS[r["student"]]]
            for col in header[1:-1]:
                assert r[col] == real[col], (r["student"], col, r[col], real[col])
            heads = lambda text: [p.split(":")[0] for p in text.split(" | ") if p]  # noqa: E731
            assert heads(r["reasons"]) == heads(real["reasons"]), (r["student"], real)
    alice = rows["correct"]
    assert alice["total"] == alice["max"] == "6" and not alice["reasons"], alice


def test_feedback_never_shows_hidden_case_code(graded):
    _, feedback, out = graded
    code_lines = {
        l.strip()
        for p in HIDDEN.glob("*.py")
        for l in p.read_text().splitlines()
        if len(l.strip()) > 12
        and not l.strip().startswith(('"""', "#"))
        and not l.strip().startswith("Case(")
    }
    for p in (out / "feedback").iterdir():
        text = p.read_text()
        assert "instructor/hidden" not in text and "def cases" not in text
        assert not [l for l in code_lines if l in text], p.name


def test_fixtures_cover_every_failure_mode_of_the_issue():
    wanted = {
        "correct",
        "empty",
        "wrong_result",
        "crash",
        "infinite_loop",
        "out_of_bounds",
        "syntax_error",
        "missing_cell",
        "duplicated_cell",
        "corrupted_json",
    }
    assert wanted <= {p.name for p in SUBMISSIONS.iterdir()}


def test_student_names():
    lessons = ["01_vector_add"]
    assert student_name(Path("x/alice/01_vector_add.ipynb"), lessons) == "alice"
    assert student_name(Path("bob_01_vector_add.ipynb"), lessons) == "bob"
    assert student_name(Path("carol.ipynb"), lessons) == "carol"


def test_plan_of_lesson_01_runs_only_setup_and_exercise_cells():
    plan = nbk.plan(REPO / "notebooks" / "01_vector_add.ipynb")
    assert {"vector_add", "matrix_add"} <= set(plan.exercises)
    assert plan.exercises["vector_add"].function == "add"
    for cell in plan.setup:
        assert "course.check" not in cell.source and "benchmark" not in cell.source
    assert plan.setup[0].source.lstrip().startswith("import course")


# -- hidden cases: every hidden file passes the reference solution and rejects a mutant ------
# exercise -> (lesson test module, its reference solution, one of its mutants that the hidden
# cases are meant to catch).  Only the hidden cases run here (the public ones are the lesson
# test's business), which keeps all twelve exercises at about 30 s in the simulator.

HIDDEN_CHECKS = {
    "vector_add": ("test_vector_add", "solution_add", "hard_coded_block_dim"),
    "matrix_add": ("test_vector_add", "solution_matrix_add", "swapped_indices"),
    "reduce_sequential": ("test_reduction", "solution_sequential", "hard_coded_block_size"),
    "reduce_first_add": ("test_reduction", "lesson.reduce4", "first_add_hard_coded_block_size"),
    "reduce_grid_stride": (
        "test_reduction",
        "solution_grid_stride",
        "grid_stride_hard_coded_block_size",
    ),
    "window_average_shared": ("test_window", "solution", "hardcoded_block_size"),
    "matmul_tiled": ("test_matmul", "solution", "k_loop_drops_partial_tile"),
    "mean_face": ("test_faces", "mean_solution", "mean_hardcoded_block_size"),
    "covariance_tiled": ("test_faces", "cov_solution", "cov_divide_by_wrong_count"),
    "online_softmax": ("test_attention", "softmax_rows", "softmax_missing_rescale"),
    "flash_attention_forward": ("test_attention", "flash_attn", "_mutant:missing_rescale"),
    "histogram_shared": ("test_histogram", "solution_histogram", "tail_rows_dropped"),
}


def _kernel(module, ref):
    """``attr``, ``attr.attr`` or ``factory:arg`` from a lesson test module."""
    import importlib

    obj = importlib.import_module(module)
    if ":" in ref:
        factory, arg = ref.split(":")
        return getattr(obj, factory)(arg)
    for part in ref.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_hidden_file_is_announced_and_tested():
    from course.exercises import all_exercises
    from course.grading.hidden import ANNOUNCED

    every = {p.stem for p in HIDDEN.glob("*.py")}
    assert every <= set(all_exercises()), every - set(all_exercises())
    keys = {n for n in every if all_exercises()[n].kind == "predict"}  # answer keys
    assert keys == {n for n, e in all_exercises().items() if e.kind == "predict"}, (
        "every predict exercise needs its answer key beside the hidden cases"
    )
    files = every - keys
    assert files <= ANNOUNCED, f"hidden cases students are not told about: {files - ANNOUNCED}"
    # the exercises added with the kinds are run with their hidden cases, against their
    # solution and three mutants each, by test_practice.py
    from test_practice import NEW

    assert set(HIDDEN_CHECKS) == files - set(NEW), files - set(NEW) - set(HIDDEN_CHECKS)


def _hidden_only(monkeypatch, name):
    from course import exercises

    monkeypatch.delenv("COURSE_HIDDEN_DIR", raising=False)  # this repository's files
    monkeypatch.delenv("COURSE_INSTRUCTOR_DIR", raising=False)
    spec = exercises.get(name)
    monkeypatch.setattr(spec, "cases", lambda: [])
    return spec


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # a mutant divides by m - 1
@pytest.mark.parametrize("name", sorted(HIDDEN_CHECKS))
def test_hidden_cases_pass_the_solution_and_reject_a_mutant(name, monkeypatch):
    import course

    module, solution, mutant = HIDDEN_CHECKS[name]
    spec = _hidden_only(monkeypatch, name)
    n_hidden = len(hidden.cases_for(spec))
    assert n_hidden >= 3, f"{name}: only {n_hidden} hidden cases"

    good = course.check(name, _kernel(module, solution), hidden=True, record=False)
    assert len(good.hidden) == n_hidden and not good.public
    assert good.passed, repr(good)

    bad = course.check(name, _kernel(module, mutant), hidden=True, record=False)
    assert not bad.passed and any(not c.passed for c in bad.hidden), (
        f"{name}: the hidden cases let {mutant} through"
    )


# -- the instructor's command fails loudly: a sentence and exit 2, nothing graded -----------


def _grade(*args, cwd=REPO, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "course", "grade", *map(str, args)],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def test_grade_on_a_missing_folder_says_so_and_exits_2(tmp_path):
    r = _grade(tmp_path / "no-such-folder", "--out", tmp_path / "g.csv")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no such file or folder" in r.stderr and "no-such-folder" in r.stderr
    assert not (tmp_path / "g.csv").exists()


def test_a_timeout_no_longer_than_a_case_is_pointed_out(tmp_path):
    r = _grade(
        SUBMISSIONS / "empty",
        "--out",
        tmp_path / "g.csv",
        "--timeout",
        "4",
        "--case-time-limit",
        "5",
        "--isolation",
        "none",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--timeout 4 s is not longer than one case's time limit (5 s" in r.stdout


def test_an_unknown_lesson_says_did_you_mean_and_never_pass_lesson(tmp_path):
    r = _grade(SUBMISSIONS / "correct", "--lesson", "01_vectoradd", "--out", tmp_path / "g.csv")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown lesson '01_vectoradd' given with --lesson" in r.stderr
    assert "did you mean 01_vector_add?" in r.stderr
    assert "pass --lesson" not in r.stderr and not (tmp_path / "g.csv").exists()


def test_the_lesson_hint_of_a_row_knows_whether_lesson_was_given():
    from types import SimpleNamespace

    from course.grading.classroom.batch import grade_one
    from course.grading.classroom.intake import Submission

    sub = Submission(Path("x.ipynb"), "x.ipynb", "", data=b"{}")
    for lesson, words in ((None, "name it with --lesson"), ("02_x", "--lesson 02_x is not")):
        g = grade_one(sub, {"01_vector_add": None}, SimpleNamespace(lesson=lesson, seed=1))
        assert words in g.reasons[-1] and "pass --lesson" not in g.reasons[-1], g.reasons


def test_student_copies_are_refused_as_the_instructor_notebooks(tmp_path):
    from course.grading.classroom.distribute import copy_notebooks

    copy_notebooks(tmp_path / "copy")
    r = _grade(
        SUBMISSIONS / "correct", "--instructor", tmp_path / "copy", "--out", tmp_path / "g.csv"
    )
    assert r.returncode == 2 and "is a student copy" in r.stderr, r.stdout + r.stderr
    r = _grade(
        SUBMISSIONS / "correct", "--instructor", tmp_path / "nothing", "--out", tmp_path / "g.csv"
    )
    assert r.returncode == 2 and "--instructor" in r.stderr and "no such folder" in r.stderr


def test_grade_help_states_the_scoring_rule():
    r = subprocess.run(
        [sys.executable, "-m", "course", "grade", "--help"],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=120,
    )
    text = " ".join(r.stdout.split())
    assert "in proportion to the cases" in text and "debug or tune exercise" in text
    assert "only when every case passes" in text and "--instructor DIR" in text


# -- a private instructor folder: its hidden cases and its seed are the ones used -----------

PRIVATE_CASE = """from course.exercises import Case

POINTS = 1


def cases(exercise):
    return [Case("PRIVATE n = 77, 2 blocks of 16", {"n": 77}, (2,), (16,))]
"""


def test_grading_with_instructor_dir_uses_its_private_hidden_cases(tmp_path):
    private = tmp_path / "private"
    (private / "notebooks").mkdir(parents=True)
    (private / "instructor" / "hidden").mkdir(parents=True)
    (private / "notebooks" / "01_vector_add.ipynb").write_bytes(
        (REPO / "notebooks" / "01_vector_add.ipynb").read_bytes()
    )
    for f in HIDDEN.glob("*.py"):  # the lesson's files, one of them changed
        if f.stem in PRACTICE or f.stem == "matrix_add":
            (private / "instructor" / "hidden" / f.name).write_bytes(f.read_bytes())
    (private / "instructor" / "hidden" / "vector_add.py").write_text(PRIVATE_CASE)
    (private / "instructor" / "hidden" / "_seed.py").write_text("SEED = 982451653\n")
    out = tmp_path / "out"
    r = _grade(
        SUBMISSIONS / "correct",
        "--instructor",
        private,
        "--out",
        out / "g.csv",
        "--feedback",
        out / "fb",
        "--seed",
        "7",
        "--timeout",
        "120",
        cwd=tmp_path,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    text = (out / "fb" / "correct.md").read_text()
    assert "PRIVATE n = 77" in text  # the private case ran...
    assert "7 of 7 cases passed: 1/1" in text  # ...instead of the public five
    with open(out / "g.csv", newline="") as f:
        assert next(csv.DictReader(f))["vector_add"] == "1"


def test_the_private_seed_moves_every_hidden_input(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("COURSE_HIDDEN_DIR", str(tmp_path))
    hidden._LOADED.clear()
    plain = hidden.case_rng(7, 3).random(4)
    (tmp_path / "_seed.py").write_text("SEED = 123456789\n")
    hidden._LOADED.clear()
    salted = hidden.case_rng(7, 3).random(4)
    hidden._LOADED.clear()
    assert hidden.private_seed() == 123456789
    assert not np.allclose(plain, salted)
    assert np.array_equal(salted, hidden.case_rng(7, 3).random(4))  # and replayable
    hidden._LOADED.clear()
