"""Property tests (Hypothesis) of every trusted reader of submission data: random and
adversarial kernel units, files, requests, signatures, notebooks and worker replies.  Each
reader ends, within its bound, with a value or its course sentence (its own exception
class), never another exception.  Seeds are fixed (``derandomize``) and examples few: the
whole module runs in seconds."""

import io
import json
import math
import os
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course.grading.classroom import notebook as nbk
from course.grading.classroom.batch import Graded, load_plans
from course.grading.classroom.steps import TooMuchToRead, make_steps
from course.grading.source import unit as U
from course.grading.source import values
from course.grading.source.decorator import UnitError
from course.grading.source.signature import SignatureError
from course.grading.source.signature import parse as parse_signature
from course.grading.wall.wire import Channel, WireError
from course.leaderboard import reading
from course.leaderboard.fromfile import FileError, unit_of_file
from course.leaderboard.limits import Refused

pytestmark = pytest.mark.timeout(120)
BOUND_S = 2.0  # what one read of one example may take (they take milliseconds)
SETTINGS = settings(
    max_examples=60,
    deadline=timedelta(seconds=BOUND_S),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---------------------------------------------------------------------------------------
# the raw material: JSON of any shape, numbers at every edge, text that misbehaves

EDGE_INTS = [0, 1, -1, 2**31 - 1, -(2**31), 2**32, 2**63 - 1, -(2**63), 2**63, 2**64 - 1]
EDGE_INTS += [2**64, -(2**63) - 1, 10**30, -(10**30)]
EDGE_FLOATS = [0.0, -0.0, 1e308, -1e308, 5e-324, math.inf, -math.inf, math.nan, 65504.0]
WEIRD_TEXT = ["\x00", "\u202e", "\u200f", "e\u0301" * 50, "\ufeff", "\ud800", "𝔘", "１"]
DTYPES = ["<f4", "<f8", "<f2", "<i1", "<i8", "<u8", "|b1", "<c8", "<c16", "<f16", "<M8", "|V8"]
DTYPES += ["(2,)f4", "U5", "O", "f" * 20, ""]

ints = st.one_of(st.sampled_from(EDGE_INTS), st.integers(-(2**70), 2**70))
floats = st.one_of(st.sampled_from(EDGE_FLOATS), st.floats(allow_nan=True))
texts = st.one_of(st.sampled_from(WEIRD_TEXT), st.text(max_size=12))
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts)
json_any = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=25,
)


NUMERIC = ["<i1", "<u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8", "|b1"]
LEAVES = st.one_of(
    st.tuples(st.just("const"), scalars).map(list),
    st.tuples(st.just("scalar"), st.sampled_from(NUMERIC + DTYPES), scalars).map(list),
    st.tuples(st.just("scalar"), st.sampled_from(NUMERIC), ints).map(list),
    st.tuples(st.just("complex"), scalars, scalars).map(list),
    st.tuples(st.just("dtype"), st.sampled_from(DTYPES)).map(list),
    st.tuples(
        st.just("array"),
        st.sampled_from(DTYPES),
        st.lists(st.integers(-2, 70000), max_size=3),
        st.lists(scalars, max_size=6),
    ).map(list),
    st.tuples(
        st.just("attr"),
        st.sampled_from(["numpy", "math", "os", "numba.cuda"]),
        st.sampled_from(["float32", "exp", "_x", "f2py", "system", "jit", "nope"]),
    ).map(list),
    st.tuples(st.just("module"), st.sampled_from(["numpy", "os", "math"])).map(list),
    st.tuples(st.just("numba_type"), st.sampled_from(["float32", "void", "x"])).map(list),
    json_any,
)


def _descs():
    """Global descriptions: the kinds a unit may hold, with values of every sort, and
    tuples of them (nested)."""
    tuples = st.recursive(
        LEAVES,
        lambda inner: st.tuples(
            st.just("tuple"), st.lists(st.one_of(inner, scalars), max_size=5)
        ).map(list),
        max_leaves=12,
    )
    return st.one_of(LEAVES, tuples)


BASE = {
    "name": "k",
    "source": "def k(x):\n    x[0] = C\n",
    "options": {},
    "signature": None,
    "firstline": 1,
    "globals": {"C": ["const", 1]},
}


@st.composite
def units(draw):
    unit = dict(BASE, globals=dict(draw(st.dictionaries(st.sampled_from("CDET"), _descs()))))
    if draw(st.booleans()):  # a device function, maybe of its own malformed
        unit["globals"]["d"] = ["device", draw(st.one_of(json_any, st.just(dict(BASE))))]
    if draw(st.integers(0, 5)) == 0:  # a field of the wrong type or value, a bad name
        field = draw(st.sampled_from(sorted(BASE)))
        unit[field] = draw(json_any)
        if isinstance(unit["globals"], dict) and draw(st.booleans()):
            unit["globals"]["_x"] = ["const", 1]
    return unit


def _ends(fn, *args, allowed=()):
    """fn(*args) ends within the bound with a value or one of ``allowed``."""
    t0 = time.monotonic()
    try:
        return fn(*args)
    except allowed as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a sentence"
        return exc
    finally:
        assert time.monotonic() - t0 < BOUND_S


# ---------------------------------------------------------------------------------------
# kernel units: validate, constants (the judge's side)


@SETTINGS
@given(units())
def test_a_unit_is_valid_or_refused_with_a_sentence(unit):
    got = _ends(U.validate, unit, allowed=(UnitError,))
    if not isinstance(got, UnitError):  # valid: its constants come back without error
        _ends(U.constants, unit, allowed=())


@settings(SETTINGS, max_examples=200)
@given(_descs())
def test_a_global_is_read_back_or_refused_with_a_sentence(desc):
    """Each global alone, many of them: every kind with values at every edge."""
    _ends(values.value, desc, values.Budget(), allowed=(UnitError,))


number_trees = st.recursive(
    st.one_of(
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([np.float32(0.5), np.int8(-128), np.uint64(2**64 - 1), np.float16(1)]),
        st.sampled_from([np.iinfo(t).min for t in (np.int8, np.int16, np.int32, np.int64)]),
        st.sampled_from([np.iinfo(t).max for t in (np.uint8, np.uint16, np.uint32, np.uint64)]),
        st.sampled_from([np.finfo(t).max for t in (np.float16, np.float32, np.float64)]),
        st.sampled_from([np.complex64(1 - 2j), np.bool_(True)]),
    ),
    lambda inner: st.lists(inner, max_size=4).map(tuple),
    max_leaves=30,
)


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    if type(a) is not type(b):
        return False
    return bool(a == b) or (a != a and b != b)


@SETTINGS
@given(number_trees)
def test_honest_constants_travel_and_come_back_the_same(value):
    """Numbers, numpy numbers at every dtype's edges and nested tuples of them: described
    as JSON, validated and read back by the judge, equal (type and value)."""
    desc = values.describe("C", value, "k", values.Budget())
    unit = json.loads(json.dumps(dict(BASE, globals={"C": desc}), allow_nan=False))
    U.validate(unit)
    assert _same(U.constants(unit)["C"], value)


# ---------------------------------------------------------------------------------------
# files: fromfile (the service's reader) and the reader process's request


@st.composite
def expressions(draw, names):
    leaf = st.one_of(
        ints.map(str),
        st.sampled_from(["1.5", "1e308", "1e999", "-0.0", "True", "'s'", "0x7f", "1_000"]),
        st.sampled_from(names or ["X"]),
        st.sampled_from(["np.float32(1)", "np.int8(300)", "np.dtype('f4')", "math.inf"]),
        st.sampled_from(["np.uint64(2**64 - 1)", "np.longdouble(2)", "np.float16(70000)"]),
        st.sampled_from(["np.float32", "cuda", "np", "np.dtype", "np.ctypeslib", "cuda.jit"]),
    )
    tree = st.recursive(
        leaf,
        lambda e: st.one_of(
            st.lists(e, max_size=6).map(lambda xs: "(" + ", ".join(xs) + ",)"),
            st.tuples(e, st.sampled_from("+-*/%&|^") | st.just("**"), e).map(" ".join),
            st.tuples(e, st.sampled_from(["<<", ">>", "//"]), e).map(" ".join),
            e.map(lambda x: f"-({x})"),
            e.map(lambda x: f"np.float32({x})"),
            e.map(lambda x: f"({x},) * 64"),
        ),
        max_leaves=12,
    )
    return draw(tree)


@st.composite
def files(draw):
    lines = ["import math", "import numpy as np", "from numba import cuda"]
    names: list[str] = []
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.integers(0, 9))
        if kind < 5:
            lines.append(f"N{i} = {draw(expressions(names))}")
            names.append(f"N{i}")
        elif kind == 5:  # the DAG of tuples: each level 64 references to the one before
            lines.append(f"N{i} = (" + ", ".join([names[-1] if names else "1"] * 64) + ")")
            names.append(f"N{i}")
        elif kind == 6:
            lines.append(draw(texts) + draw(st.sampled_from(["", " = 1", "()", ":"])))
        elif kind == 7:
            lines.append(draw(st.sampled_from(["import os", "exec('1')", "print(1)", "x.y = 1"])))
        else:
            lines.append(f"a{i}, b{i} = {draw(expressions(names))}")
    used = draw(st.lists(st.sampled_from(names or ["1"]), max_size=3))
    body = " + ".join(f"{u}[0]" if draw(st.booleans()) else u for u in used) or "0"
    lines += ["@cuda.jit", "def k(x):", f"    x[0] = {body}"]
    if draw(st.booleans()):
        k = draw(st.integers(0, len(lines) - 1))
        lines[k] = lines[k][: draw(st.integers(0, 20))] + draw(texts)
    return "\n".join(lines) + "\n"


@settings(SETTINGS, max_examples=30)
@given(files())
def test_a_file_is_read_or_refused_with_a_sentence_and_its_unit_is_what_the_judge_takes(src):
    got = _ends(unit_of_file, src, "k", allowed=(FileError,))
    if isinstance(got, dict):  # what the service stores is what the judge accepts
        json.dumps(got, allow_nan=False)
        _ends(U.validate, json.loads(json.dumps(got)), allowed=())


requests = st.fixed_dictionaries(
    {},
    optional={
        "source": st.one_of(files(), texts, json_any),
        "function": st.one_of(st.just("k"), texts, json_any),
        "unit": st.one_of(units(), json_any),
        "extra_names": st.lists(st.sampled_from(["N0", "TILE", "x"]), max_size=2),
    },
)


@settings(SETTINGS, max_examples=30)
@given(requests)
def test_the_readers_request_ends_in_a_unit_or_a_refusal(request):
    got = _ends(reading.read, request, allowed=(Refused,))
    if isinstance(got, Refused):
        assert 400 <= got.status < 500 and got.message
    else:
        source, unit = got
        assert isinstance(source, str) and isinstance(unit, dict)


# ---------------------------------------------------------------------------------------
# signatures, notebooks, worker replies

TOKENS = ["void", "float32", "int64", "(", ")", "[", "]", ":", "::1", ",", " ", "x", "__import__"]


@SETTINGS
@given(st.one_of(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join), texts, json_any))
def test_a_signature_is_parsed_or_refused_with_a_sentence(text):
    _ends(parse_signature, text, allowed=(SignatureError,))


cells = st.one_of(
    st.fixed_dictionaries(
        {
            "cell_type": st.sampled_from(["code", "markdown", "raw", 3, None]),
            "source": st.one_of(
                st.lists(st.one_of(texts, json_any), max_size=4), texts, json_any, files()
            ),
        },
        optional={
            "metadata": st.one_of(
                json_any,
                st.fixed_dictionaries(
                    {"tags": json_any, "course": st.one_of(json_any, st.just({"exercise": "x"}))}
                ),
            ),
            "id": json_any,
        },
    ),
    json_any,
)
notebooks = st.one_of(
    st.fixed_dictionaries(
        {"cells": st.lists(cells, max_size=12)},
        optional={"metadata": json_any, "nbformat": json_any},
    ),
    json_any,
)


@pytest.fixture(scope="module")
def plan():
    return load_plans(REPO / "notebooks")["01_vector_add"]


@SETTINGS
@given(st.one_of(notebooks.map(lambda nb: json.dumps(nb).encode()), st.binary(max_size=200)))
def test_a_notebook_is_read_or_refused_and_its_steps_are_made_without_error(plan, raw):
    nb = _ends(nbk.loads, raw, "x.ipynb", allowed=(nbk.NotebookError,))
    if isinstance(nb, nbk.NotebookError):
        return
    g = Graded("s", "x.ipynb")
    steps = _ends(make_steps, plan, nb, g, allowed=(TooMuchToRead,))
    assert isinstance(steps, (list, TooMuchToRead))


EXPECT = {"y": (np.float32, (4,))}


def _blob(a) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=False)
    return len(buf.getvalue()).to_bytes(8, "little") + buf.getvalue()


replies = st.one_of(
    json_any.map(lambda h: json.dumps(h).encode()),
    st.sampled_from([b"[" * 100_000, b'{"arrays": ["y", "y"]}', b'{"arrays": ["z"]}']),
    st.binary(max_size=64),
)


@SETTINGS
@given(
    replies,
    st.sampled_from([b"", _blob(np.zeros(4, np.float32)), _blob(np.zeros(5, np.float32))]),
    st.booleans(),
)
def test_a_worker_reply_is_read_or_refused_within_its_deadline(plan, head, tail, arrays):
    if arrays and head.startswith(b"{"):
        head = head[:-1] + b', "arrays": ["y"]}' if head != b"{}" else b'{"arrays": ["y"]}'
    r, w = os.pipe()
    data = len(head).to_bytes(8, "little") + head + tail

    def send():  # a worker that writes its reply and goes (a pipe holds 64 KiB)
        try:
            os.write(w, data)
        except OSError:
            pass  # the judge stopped reading
        finally:
            os.close(w)

    writer = threading.Thread(target=send)
    writer.start()
    ch = Channel(r, os.open(os.devnull, os.O_WRONLY), deadline=time.monotonic() + 1)
    try:
        got = _ends(ch.recv, EXPECT, allowed=(WireError,))
        if not isinstance(got, WireError):
            header, arrs = got
            assert isinstance(header, dict) and set(arrs) <= {"y"}
    finally:
        os.close(r)
        os.close(ch.wfd)
        writer.join(5)
