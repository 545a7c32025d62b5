"""What a red team got through the grader's own process (issue #38, grader side): text a
submission controls is bounded where a message is made, no CSV cell is a spreadsheet
formula, finding a notebook's cells is bounded work, and the unit's decorator rule is one
rule on both sides (honest aliases pass, kernels with default arguments are told why)."""

import ast
import csv
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO
from numba import cuda

import course
from course.exercises import get
from course.exercises.bounded import MAX_MESSAGE, clip, listed, shown
from course.exercises.outcome import CaseResult
from course.grading.classroom import csvsafe, feedback, steps
from course.grading.classroom import notebook as nbk
from course.grading.classroom.batch import Graded, grade_one, load_plans
from course.grading.classroom.executors import CsvStream
from course.grading.classroom.graded import write_csv
from course.grading.classroom.lms import write_canvas
from course.grading.source import unit as U

KEYS = {"blocks": 1, "threads": 1, "idle": 1, "grid2d_threads": 1, "grid2d_idle": 1}


# --- 1. bounded text ------------------------------------------------------------------------


def test_an_answer_of_22000_made_up_keys_is_named_by_its_first_few():
    answer = {f"k{i:06d}_" + "x" * 30: 1 for i in range(22000)}
    t0 = time.process_time()
    results = get("predict_launch").judge_answer(answer, KEYS)
    assert time.process_time() - t0 < 1.0
    for r in results:
        assert not r.passed and len(r.message) < 600, len(r.message)
        assert "and 21,997 more are no question's key" in r.message, r.message
    near = get("predict_launch").judge_answer({"blcks": 3}, KEYS)[0].message
    assert "unknown key 'blcks': rename it 'blocks'" in near  # a misspelling still named


@pytest.mark.parametrize(
    "value",
    ["x" * (1 << 20), 10**5000, ["y" * 1000] * 1000, {"k" * 500: "v" * 500}],
    ids=["long_str", "huge_int", "long_list", "long_dict"],
)
def test_a_huge_answer_value_is_quoted_short_and_judging_never_raises(value):
    for r in get("predict_launch").judge_answer({"blocks": value}, KEYS)[:1]:
        assert not r.passed and len(r.message) < 300, r.message


def test_every_case_message_and_unit_error_is_bounded_where_it_is_made():
    res = CaseResult("c", "")
    res.fail("m" * (5 << 20))
    assert len(res.message) < MAX_MESSAGE + 100 and res.message.endswith("characters cut)")
    assert len(str(U.UnitError("`" + "n" * 100_000 + "` uses"))) < MAX_MESSAGE + 100
    from course.grading.judging.report import CellError, Judged, Tampering

    big = "w" * (5 << 20)  # what a worker may send back as an error text
    assert len(Judged("vector_add", f"`add` was not defined: {big}").error) < MAX_MESSAGE + 100
    assert len(CellError("cell 3", "solution", "vector_add", big).message) < MAX_MESSAGE + 100
    assert len(Tampering(None, big).message) < MAX_MESSAGE + 100
    assert listed(range(10**6)) == "0, 1, 2 and 999,997 more"
    assert clip("short") == "short" and len(shown("s" * 10**6)) <= 80


def _row(**kw) -> Graded:
    g = Graded(kw.pop("student", "alice"), kw.pop("submission", "01_vector_add.ipynb"))
    g.lesson, g.mode = "01_vector_add", "sim"
    g.points, g.max_points = {"vector_add": 0.0}, {"vector_add": 1.0}
    for k, v in kw.items():
        setattr(g, k, v)
    return g


def test_the_reasons_field_is_capped_and_says_so(tmp_path):
    reasons = [f"vector_add: reason {i}: " + "r" * 1000 for i in range(200)]
    field = csvsafe.reasons_field(reasons)
    assert len(field) <= csvsafe.MAX_REASONS
    assert field.startswith(reasons[0]) and "reasons cut at 8,192 characters" in field
    assert csvsafe.reasons_field(["a", "b"]) == "a | b"  # short reasons as they were
    out = tmp_path / "grades.csv"
    write_csv([_row(reasons=reasons + ["x" * (5 << 20)])], out, ["vector_add"])
    assert out.stat().st_size < 10_000
    (row,) = list(csv.DictReader(out.open(newline="")))  # Python's csv reads it back
    assert row["reasons"] == csvsafe.reasons_field(reasons + ["x" * (5 << 20)])


def test_feedback_lines_are_bounded():
    g = _row(reasons=["vector_add: " + "r" * (5 << 20)], notes=["n" * (5 << 20)])
    g.results = {
        "vector_add": {
            "cases": [
                {
                    "name": "c",
                    "launch": "",
                    "hidden": False,
                    "passed": False,
                    "message": "m" * 10**6,
                }
            ]
        }
    }
    md = feedback.markdown(g)
    assert len(md) < 4 * MAX_MESSAGE + 2000, len(md)
    assert len(feedback.to_html(md)) < 10 * MAX_MESSAGE + 4000


# --- 2. no CSV cell is a formula ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ['=HYPERLINK("http://ev.il","x")', "+1+cmd", "-2+3", "@SUM(1+1)", "\tx", "\r1", "\uff1d1+1"],
)
def test_a_formula_cell_is_written_as_text(text):
    assert csvsafe.cell(text) == "'" + text


@pytest.mark.parametrize("text", ["alice", "-1", "+2.5", "-0.25", "1e5", "", "a=b", "6"])
def test_plain_cells_and_numbers_are_left_alone(text):
    assert csvsafe.cell(text) == text


@pytest.mark.parametrize("sep", [",", ";", "\t", "|"], ids=["comma", "semicolon", "tab", "pipe"])
def test_a_formula_after_any_separator_is_written_as_text(tmp_path, sep):
    """Round 3: ``x;=2+5*7`` is one unquoted cell to us and two cells, one a formula, to a
    spreadsheet that splits at ``;``.  Each separator a spreadsheet may use, read back with
    that separator, leaves no cell that is a formula; numbers after it stay numbers."""
    name = f'x{sep}=2+5*7{sep} @SUM(1+1){sep}"+cmd"{sep}\uff1d1{sep}-1{sep}+2.5{sep}_01.ipynb'
    out = tmp_path / "g.csv"
    with out.open("w", newline="", encoding="utf-8") as f:
        csvsafe.writer(f).writerow(["bob", name, "-1", "a=b"])
    for split in (",", ";", "\t", "|"):  # the file as each spreadsheet would cut it
        for line in out.read_text(encoding="utf-8").splitlines():
            for c in line.split(split):
                c = c.strip(' "')
                assert not c.startswith(csvsafe.FORMULA_START) or csvsafe.NUMBER.fullmatch(c), (
                    split,
                    c,
                )
    cells = [c.strip(' "') for c in csvsafe.cell(name).split(sep)]
    assert cells[1:] == ["'=2+5*7", "'@SUM(1+1)", "'+cmd", "'\uff1d1", "-1", "+2.5", "_01.ipynb"]
    assert csvsafe.cell(f"x{sep}-1") == f"x{sep}-1"  # a number after it is left alone
    assert csvsafe.cell(f"x{sep}-1+2") == f"x{sep}'-1+2"
    assert csvsafe.cell("\r=1") == "'\r'=1"  # a line break is a separator too


FORMULA = '=HYPERLINK("http://ev.il","x")_01_vector_add.ipynb'


def _no_formula(path: Path) -> list:
    rows = list(csv.reader(path.open(newline="", encoding="utf-8")))
    bad = [c for r in rows for c in r if c.startswith(csvsafe.FORMULA_START)]
    assert not bad, bad
    return rows


def test_every_csv_the_grader_writes_has_no_formula(tmp_path):
    g = _row(student="@SUM(1+1)", submission=FORMULA, reasons=[f"{FORMULA} is not valid JSON"])
    write_csv([g], tmp_path / "grades.csv", ["vector_add"])
    rows = _no_formula(tmp_path / "grades.csv")
    assert rows[1][1] == "'" + FORMULA and rows[1][0] == "'@SUM(1+1)"
    stream = CsvStream(tmp_path / "stream.csv", ["vector_add"])
    stream.add(g)
    _no_formula(tmp_path / "stream.csv")
    write_canvas([g], tmp_path / "canvas.csv", {"bob": {"id": "1", "name": "-bob"}}, log=str)
    _no_formula(tmp_path / "canvas.csv")
    _no_formula(tmp_path / "canvas.unmatched.csv")


def test_no_module_of_the_grader_makes_its_own_csv_writer():
    """The mechanism, not the cases: every CSV writer of course/grading is csvsafe's."""
    found = []
    for p in sorted((REPO / "course" / "grading").rglob("*.py")):
        if p.name == "csvsafe.py":
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Attribute) and n.attr in ("writer", "DictWriter"):
                if isinstance(n.value, ast.Name) and n.value.id == "csv":
                    found.append(f"{p.name}:{n.lineno}")
    assert not found, found


# --- 3. finding a notebook's cells is bounded work -----------------------------------------


@pytest.fixture(scope="module")
def plan():
    return load_plans(REPO / "notebooks")["01_vector_add"]


def _lost_markers(filler: str, n: int) -> dict:
    """The lesson's own notebook with its markers and ids lost, behind ``n`` filler cells."""
    nb = json.loads((REPO / "notebooks" / "01_vector_add.ipynb").read_text())
    for c in nb["cells"]:
        c.get("metadata", {}).pop("course", None)
        c["id"] = "z" + str(c.get("id", ""))
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    nb["cells"] = [dict(cell, id=f"f{i}", source=filler) for i in range(n)] + nb["cells"]
    return nb


def test_each_cell_is_parsed_at_most_once_and_only_when_it_holds_the_name(plan, monkeypatch):
    parsed = []
    real = nbk.defined_functions
    monkeypatch.setattr(nbk, "defined_functions", lambda s: parsed.append(len(s)) or real(s))
    g = Graded("a", "x")
    got = steps.make_steps(plan, _lost_markers("x = 1\n" * 2000, 30), g)
    assert {s["exercise"] for s in got if s["exercise"]} == set(plan.exercises)
    assert len(parsed) <= len([c for c in nbk.cells(_lost_markers("", 0)) if c.kind == "code"])
    assert 12000 not in parsed  # the filler holds none of the names: never parsed


def test_a_notebook_past_the_parse_budget_is_invalid_with_a_sentence(plan, monkeypatch):
    monkeypatch.setattr(steps, "MAX_PARSED_TOTAL", 50_000)
    nb = _lost_markers("add = 1\n" * 2500, 20)  # 20 KB cells that name `add`
    t0 = time.process_time()
    with pytest.raises(steps.TooMuchToRead):
        steps.make_steps(plan, nb, Graded("a", "x"))
    assert time.process_time() - t0 < 1.0
    sub = SimpleNamespace(
        student="heavy",
        name="01_vector_add.ipynb",
        path=Path("heavy/01_vector_add.ipynb"),
        data=json.dumps(nb).encode(),
        notebook=None,
        problem="",
        lesson="01_vector_add",
    )
    g = grade_one(sub, {"01_vector_add": plan}, SimpleNamespace(seed=1, lesson=None))
    assert g.status == "rejected" and g.total == 0
    assert "fresh copy of the lesson's notebook" in g.reasons[0], g.reasons


# --- 4. one decorator rule; kernels with default arguments ----------------------------------


def _define(src: str, name: str, extra=None):
    ns = {"cuda": cuda, **(extra or {})}
    U.run_cell(src, f"<cell {name}>", ns)
    return ns[name]


BODY = "def k(n, x, y):\n    for i in range(cuda.grid(1), n, cuda.gridsize(1)):\n        y[i] += x[i]\n"
ALIASES = {
    "assigned": "kjit = cuda.jit\n@kjit\n" + BODY,
    "imported": "from numba.cuda import jit as cjit\n"
    "@cjit(fastmath=True, lineinfo=True, max_registers=64)\n" + BODY,
    "numba_dotted": "import numba\n@numba.cuda.jit\n" + BODY,
    "module_alias": "from numba import cuda as cu\n@cu.jit('void(int64, float32[:], float32[:])')\n"
    + BODY,
}


@pytest.mark.parametrize("how", sorted(ALIASES))
def test_what_extract_accepts_rebuild_accepts(how):
    unit = U.extract(_define(ALIASES[how], "k"))
    assert U.rebuild(unit, lazy=True) is not None


def test_an_aliased_kernel_passes_its_check():
    src = "kjit = cuda.jit\n@kjit\ndef add_stride(n, x, y):\n" + BODY.split(":\n", 1)[1]
    r = course.check("debug_grid_stride", _define(src, "add_stride"), record=False, seed=2)
    assert r.passed, (r.error, [c.message for c in r.cases if not c.passed])


FORGED = {
    "builtin": "@print\n" + BODY,
    "carried_value": "@np.sum\n" + BODY,
    "call_with_code": "@cuda.jit(fastmath=print('ran'))\n" + BODY,
    "starstar": "@cuda.jit(**{'fastmath': True})\n" + BODY,
    "two": "@cuda.jit\n@cuda.jit\n" + BODY,
    "subscript": "@jits[0]\n" + BODY,
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_rebuild_refuses_a_decorator_extract_would_refuse(case, capsys):
    unit = {
        "name": "k",
        "source": FORGED[case],
        "options": {},
        "signature": None,
        "firstline": 1,
        "globals": {"cuda": ["module", "numba.cuda"], "np": ["module", "numpy"]},
    }
    with pytest.raises(U.UnitError, match="decorator|literals"):
        U.rebuild(unit)
    assert "ran" not in capsys.readouterr().out


def test_a_kernel_with_a_default_argument_is_told_to_pass_every_argument():
    src = "@cuda.jit\ndef k(n, x, y, st=[0]):\n    y[0] = x[0]\n"
    with pytest.raises(
        U.UnitError,
        match="cannot take default arguments .*: remove the default and pass every argument",
    ):
        U.extract(_define(src, "k"))
    forged = {
        "name": "k",
        "source": "def k(n, x, y, s=2):\n    y[0] = x[0]\n",
        "options": {},
        "signature": None,
        "firstline": 1,
        "globals": {},
    }
    with pytest.raises(U.UnitError, match="pass every argument"):
        U.rebuild(forged)
    device = "@cuda.jit(device=True)\ndef d(a, b=2.0):\n    return a * b\n"
    assert U.rebuild(U.extract(_define(device, "d"))) is not None  # numbers: fine
    with pytest.raises(U.UnitError, match="must be numbers"):
        U.extract(_define("@cuda.jit(device=True)\ndef d(a, b=[1]):\n    return a\n", "d"))


def test_numbas_signature_mismatch_gets_a_course_hint():
    from course.grading.messages import why_not

    exc = TypeError("Signature mismatch: 3 argument types given, but function takes 4 arguments")
    unit = {"source": "def k(a, b, c, d):\n    pass\n", "firstline": 1}
    assert "pass every argument" in why_not(exc, unit)
