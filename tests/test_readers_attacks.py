"""The red team's attacks on the trusted readers, each kept as a test (simulator): a DAG of
tuples, expressions nested past the stack, numbers at the edges of every dtype, honest
constants that numba compiles (judged for real: the rebuilt kernel gets them), whose fault a
malformed submission is (``rejected``, not ``error``), odd notebooks and replies, and a
student's raw HTML in the markdown feedback."""

import json
import logging
import os
import threading
import time

import numpy as np
import pytest
from conftest import REPO

from course.grading.classroom import feedback, verdicts
from course.grading.classroom import notebook as nbk
from course.grading.classroom.batch import Graded, load_plans
from course.grading.classroom.steps import TooMuchToRead, make_steps
from course.grading.source import unit as U
from course.grading.source import values
from course.grading.source.decorator import UnitError
from course.grading.wall.wire import Channel, WireError
from course.leaderboard import reading
from course.leaderboard.fromfile import FileError, unit_of_file
from course.leaderboard.limits import Refused

pytestmark = pytest.mark.timeout(180)
HEAD = "from numba import cuda\nimport numpy as np\n"
KERNEL = (
    "\n@cuda.jit\ndef add_fast(n, x, y):\n"
    "    for k in range(cuda.grid(1), n, cuda.gridsize(1)):\n"
    "        y[k] = USE\n"
)


def _file(constants: str, use: str = "x[k] + y[k]") -> str:
    return HEAD + constants + KERNEL.replace("USE", use)


def _dag(levels: int, width: int = 64) -> str:
    out = "A0 = (" + ", ".join(["1"] * width) + ")\n"
    for i in range(1, levels):
        out += f"A{i} = (" + ", ".join([f"A{i - 1}"] * width) + ")\n"
    return out


# ---------------------------------------------------------------------------------------
# bounded work


def test_a_dag_of_tuples_is_refused_after_its_budget_not_walked():
    """Four levels of 64 references (a 1 KB file; 64**4 numbers if walked: 20-85 s before)."""
    src = _file(_dag(4), "x[k] + A3[0][0][0][0]")
    t0 = time.monotonic()
    with pytest.raises(FileError, match="more than 4,096 numbers"):
        unit_of_file(src, "add_fast")
    assert time.monotonic() - t0 < 2
    shared = (1,) * 64
    for _ in range(4):  # the same DAG made in a notebook cell: extract's budget
        shared = (shared,) * 64
    t0 = time.monotonic()
    with pytest.raises(UnitError, match="more than 4,096 numbers"):
        values.describe("T", shared, "k", values.Budget())
    assert time.monotonic() - t0 < 1


@pytest.mark.parametrize("expr", ["-" * 1500 + "1", "+".join(["1"] * 1500)])
def test_an_expression_nested_past_the_stack_is_a_sentence(expr):
    with pytest.raises(FileError, match="nested too deeply"):
        unit_of_file(_file(f"X = {expr}\n"), "add_fast")


def test_a_unit_nested_or_counted_past_the_limits_is_refused():
    deep: list = [1]
    for _ in range(values.MAX_NESTING + 1):
        deep = ["tuple", [deep if isinstance(deep[0], str) else 1]]
    with pytest.raises(UnitError, match="deep"):
        values.value(deep, values.Budget())
    wide = ["tuple", [["tuple", list(range(64))]] * 65]
    with pytest.raises(UnitError, match="4,096"):
        values.value(wide, values.Budget())


# ---------------------------------------------------------------------------------------
# numbers at the edges


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dt", INT_DTYPES, ids=lambda t: t.__name__)
def test_integers_at_every_dtypes_edges(dt):
    info, name = np.iinfo(dt), np.dtype(dt).str
    for v in (info.min, info.max):
        got = values.value(["scalar", name, int(v)], values.Budget())
        assert type(got) is dt and got == v
        assert values.describe("C", got, "k", values.Budget()) == ["scalar", name, int(v)]
    for v in (int(info.min) - 1, int(info.max) + 1):
        with pytest.raises(UnitError):
            values.value(["scalar", name, v], values.Budget())


def test_plain_integers_are_64_bits_and_floats_keep_their_edges():
    b = values.Budget()
    for v in (2**64 - 1, -(2**63), 0):
        assert values.value(["const", v], b) == v
    for v in (2**64, -(2**63) - 1, 10**30):
        with pytest.raises(UnitError):
            values.value(["const", v], b)
        with pytest.raises(UnitError, match="past 64 bits"):
            values.describe("C", v, "k", b)
    for dt in (np.float16, np.float32, np.float64):
        fi = np.finfo(dt)
        for v in (fi.max, fi.min, fi.tiny, dt(np.inf), dt(np.nan)):
            d = json.loads(json.dumps(values.describe("C", dt(v), "k", b), allow_nan=False))
            got = values.value(d, b)
            assert type(got) is dt and (got == v or (np.isnan(got) and np.isnan(v)))
    for bad in (
        ["dtype", "<f16"],
        ["dtype", "O"],
        ["scalar", "<M8", 1],
        ["array", "<f8", [2], ["1", 2]],
    ):
        with pytest.raises(UnitError):
            values.value(bad, b)


# ---------------------------------------------------------------------------------------
# honest constants pass, and the judged kernel really gets them


HONEST = "T = ((1, 0), (0, 1))\nS = (np.float32(1.0), 0)\nD = np.dtype('f4')\nF = np.float32(1)\n"
USES = "x[k] * T[1][1] + y[k] * T[0][0] + T[0][1] + S[1] + F - S[0]"


def test_honest_constants_numba_compiles_are_taken_from_a_file():
    unit = unit_of_file(_file(HONEST, USES), "add_fast", ("D",))
    g = unit["globals"]
    assert g["T"] == ["tuple", [["tuple", [1, 0]], ["tuple", [0, 1]]]]
    assert g["S"] == ["tuple", [["scalar", "<f4", 1.0], 0]] and g["D"] == ["dtype", "<f4"]
    U.validate(unit)
    assert U.constants(unit)["T"] == ((1, 0), (0, 1))


@pytest.mark.parametrize(
    "table, status", [("((1, 0), (0, 1))", "done"), ("((1, 0), (0, 2))", "rejected")]
)
def test_the_judged_kernel_gets_nested_tuple_constants(table, status):
    """Judged for real (gate, measurer, cases; simulator): with the identity the sum is
    right; the same kernel with T[1][1] = 2 must fail its cases - so the rebuilt kernel
    in the measurer reads the values the file holds, not a default."""
    from course.leaderboard.runner import judge_submission

    unit = unit_of_file(_file(HONEST.replace("((1, 0), (0, 1))", table), USES), "add_fast")
    got = judge_submission("tune_vector_add", {"unit": unit}, timeout=120)
    assert got["status"] == status, got["message"]
    if status == "rejected":
        assert "tests:" in got["message"] and "failed" not in got["message"][:6]


# ---------------------------------------------------------------------------------------
# whose fault it is


def test_a_unit_with_a_number_past_64_bits_is_rejected_not_an_error():
    from course.leaderboard.runner import judge_submission

    unit = unit_of_file(_file("K = 2\n", "x[k] + y[k] + (K - K)"), "add_fast")
    unit["globals"]["K"] = ["scalar", "<i8", 10**30]
    got = judge_submission("tune_vector_add", {"unit": unit}, timeout=60)
    assert got["status"] == "rejected" and "not your" not in got["message"], got
    with pytest.raises(Refused) as exc:
        reading.read({"unit": unit, "function": "add_fast"})
    assert exc.value.status == 422 and "64-bit" in exc.value.message


def test_the_judges_own_failure_is_an_error_logged_and_a_units_is_rejected(monkeypatch, caplog):
    from course.grading.judging import session
    from course.leaderboard.runner import judge_submission

    unit = unit_of_file(_file(""), "add_fast")
    for raised, status in (
        (RuntimeError("a bug of ours"), "error"),
        (UnitError("bad"), "rejected"),
    ):

        def boom(*a, raised=raised, **k):
            raise raised

        monkeypatch.setattr(session, "judge_unit", boom)
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="course.grading"):
            got = judge_submission("tune_vector_add", {"unit": unit}, timeout=60)
        assert got["status"] == status, got
        logged = [r for r in caplog.records if "a bug of ours" in r.getMessage()]
        assert bool(logged) == (status == "error")
        assert ("course's fault" in got["message"]) == (status == "error")


def test_the_graders_csv_says_rejected_for_a_submissions_fault(monkeypatch):
    from types import SimpleNamespace

    from course.grading.classroom.batch import _grade_read
    from course.grading.judging import session
    from course.grading.phases import Phases

    plans = load_plans(REPO / "notebooks")
    nb = nbk.load(REPO / "notebooks" / "01_vector_add.ipynb")
    sub = SimpleNamespace(student="s", name="s.ipynb", notebook=nb, lesson="01_vector_add")
    sub.path = REPO / "s.ipynb"
    settings = SimpleNamespace(seed=1, lesson=None)
    for raised, status in ((UnitError("a malformed unit"), "rejected"), (KeyError("x"), "error")):

        def boom(*a, raised=raised, **k):
            raise raised

        monkeypatch.setattr(session, "grade_steps", boom)
        g = _grade_read(sub, plans, settings, Phases())
        assert g.status == status, g.reasons
    bad = SimpleNamespace(**{**vars(sub), "notebook": None, "problem": "not JSON"})
    assert _grade_read(bad, plans, settings, Phases()).status == "rejected"


def test_verdicts_classify_by_the_exception_not_its_words():
    assert verdicts.classify("x", UnitError("error"))[0] == "rejected"
    assert verdicts.classify("x", WireError("rejected"))[0] == "rejected"
    assert verdicts.classify("x", ValueError("rejected"))[0] == "error"


# ---------------------------------------------------------------------------------------
# notebooks, replies, feedback


def test_odd_notebooks_are_read_or_refused_and_many_small_cells_stay_bounded():
    plan = load_plans(REPO / "notebooks")["01_vector_add"]
    odd = {"cells": [5, {"cell_type": 3, "source": 7, "metadata": []}, {"source": [1, "x"]}]}
    steps = make_steps(plan, nbk.loads(json.dumps(odd).encode(), "odd"), Graded("s", "x"))
    assert isinstance(steps, list)
    for raw in (b'{"cells": "abc"}', b"[]", b"\xff\xfe", b'{"cells": [' + b"{}," * 6000 + b"{}]}"):
        with pytest.raises(nbk.NotebookError):
            nbk.loads(raw, "x.ipynb")
    many = {"cells": [{"cell_type": "code", "source": "def add(): pass\n" * 20}] * 4999}
    t0 = time.monotonic()
    with pytest.raises(TooMuchToRead):
        make_steps(plan, nbk.loads(json.dumps(many).encode(), "many"), Graded("s", "x"))
    assert time.monotonic() - t0 < 5


def test_a_reply_of_deep_json_is_refused_within_the_deadline():
    r, w = os.pipe()
    head = b"[" * 200_000

    def send():
        try:
            os.write(w, len(head).to_bytes(8, "little") + head)
        except OSError:
            pass
        finally:
            os.close(w)

    t = threading.Thread(target=send)
    t.start()
    ch = Channel(r, os.open(os.devnull, os.O_WRONLY), deadline=time.monotonic() + 2)
    try:
        with pytest.raises(WireError, match="not JSON"):
            ch.recv({})
    finally:
        os.close(r)
        os.close(ch.wfd)
        t.join(5)


def test_the_markdown_feedback_keeps_a_students_html_as_text():
    text = "<script>alert(1)</script> \\<img src=x onerror=alert(2)> [x](javascript:y)"
    g = Graded(
        "eve<b>",
        "eve.ipynb",
        "01_vector_add",
        "sim",
        points={"vector_add": 0.0},
        max_points={"vector_add": 1.0},
        reasons=["vector_add: " + text],
        notes=[text],
    )
    md = feedback.markdown(g)
    theirs = "\n".join(line for line in md.splitlines() if "eve" in line or "alert" in line)
    for i, ch in enumerate(theirs):  # each < and [ escaped by an odd run of backslashes
        if ch in "<[":
            run = i - len(theirs[:i].rstrip("\\"))
            assert run % 2 == 1, theirs[max(0, i - 20) : i + 20]
    page = feedback.to_html(md)
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\&lt;img" in page and "[x](javascript:y)" in page  # the text as it was
