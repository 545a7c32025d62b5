"""In simulator mode every timing a notebook shows is a GPU's, from a committed record or
report that names its card and date: the simulator's CPU time is never shown as a time of
a kernel, a bandwidth or a speed-up (tables and slider panels alike)."""

import ast
import json
import re

import pytest
from conftest import REPO
from test_records import PENDING

from course.bench import sliders as rec
from course.platform import runtime
from course.show import records, reported
from course.show.widgets import SliderPanel

pytestmark = pytest.mark.skipif(runtime.MODE == "gpu", reason="what the simulator shows")

SPEED_CALLS = {"speedup_table", "time_bars", "gbps", "gflops", "tflops"}
SPEED_TEXT = re.compile(r"GB/s|GFLOP/s|TFLOP/s|speed-?up", re.I)
FROM_A_RECORD = re.compile(
    r"reported\.|assets/benchmarks|'benchmarks'|SliderPanel\(.*record=", re.S
)
CPU_MS = 98765.4321  # a simulator "time" no GPU report holds


def _gpu_only(test) -> bool | None:
    """True: the If's body runs only on a GPU; False: only its orelse does; else None."""
    src = ast.unparse(test)
    if re.search(r"MODE\s*==\s*['\"]gpu['\"]|MODE\s*!=\s*['\"]sim['\"]|is not None", src):
        return True
    if re.search(r"MODE\s*==\s*['\"]sim['\"]|MODE\s*!=\s*['\"]gpu['\"]", src):
        return False
    return None


def speeds_shown(code: str) -> list[str]:
    """What a cell shows as a speed outside a GPU-only branch."""
    out = []

    def visit(node, gpu):
        if isinstance(node, (ast.If, ast.IfExp)):
            kind = _gpu_only(node.test)
            body = node.body if isinstance(node.body, list) else [node.body]
            orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
            for n in body:
                visit(n, gpu or kind is True)
            for n in orelse:
                visit(n, gpu or kind is False)
            return
        if not gpu and isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in SPEED_CALLS:
                out.append(f"{name}() (line {node.lineno})")
        if not gpu and isinstance(node, ast.Constant) and isinstance(node.value, str):
            if SPEED_TEXT.search(node.value):
                out.append(f"{node.value[:40]!r} (line {node.lineno})")
        for child in ast.iter_child_nodes(node):
            visit(child, gpu)

    visit(ast.parse(code), False)
    return out


def _cells():
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text())["cells"]):
            if c["cell_type"] == "code":
                src = "".join(c["source"])
                yield (
                    nb.stem,
                    i,
                    "\n".join(
                        line
                        for line in src.splitlines()
                        if not line.lstrip().startswith(("%", "!"))
                    ),
                )


def test_no_notebook_shows_the_simulators_time_as_a_speed():
    wrong = [
        f"{nb} cell {i}: {', '.join(said)}"
        for nb, i, src in _cells()
        if (said := speeds_shown(src)) and not FROM_A_RECORD.search(src)
    ]
    assert not wrong, "shown in simulator mode, from no GPU record:\n" + "\n".join(wrong)


def test_the_scan_catches_what_it_is_for():
    """Mutants: the tables this issue removed, as they were."""
    assert speeds_shown("tables.speedup_table(measured, 3 * N * 4, title='x')")
    assert speeds_shown("print(f'{t.gbps(n):.1f} GB/s')")
    assert speeds_shown("if course.MODE == 'sim':\n    print(t.gflops(f))")
    assert not speeds_shown("if course.MODE == 'gpu':\n    print(t.gbps(n))")
    assert not speeds_shown("if course.MODE != 'gpu':\n    pass\nelse:\n    t.gbps(n)")


def test_a_simulator_table_is_the_gpu_reports_with_card_and_date():
    measured = {"one_thread": CPU_MS, "one_block": CPU_MS / 2, "many_blocks": CPU_MS / 3}
    t = reported.timing_table(
        measured,
        12e6,
        lesson="vector_add",
        title="Vector add",
        counts={"one_block": {"threads": 64}},
    )
    rep = reported.report("vector_add")
    text = repr(t)
    assert f"{rep['device']['name']}, {rep['date']}" in t.title and rep["file"] in t.note
    assert "98765" not in text and "3.292e+04" not in text and "4.938e+04" not in text
    rows = {r[0]: r for r in t.rows}
    one = reported.find(rep, "one_thread")
    assert rows["one_thread"][1] == one["median_ms"] and rows["one_thread"][2] == one["gbps"]
    assert rows["one_block"][-1] == 64 and t.columns[-1] == "simulator: threads"
    assert (
        rows["many_blocks"][3] == one["median_ms"] / reported.find(rep, "many_blocks")["median_ms"]
    )


def test_no_report_is_said_not_faked(tmp_path):
    with pytest.raises(reported.NoReport, match="no committed GPU report"):
        reported.timing_table({"k": 1.0}, 4, lesson="no_such_lesson")
    (tmp_path / "vector_add-sim-2026-01-01.json").write_text(
        json.dumps(
            {
                "lesson": "vector_add",
                "date": "2026-01-01",
                "rows": [],
                "device": {"mode": "sim", "name": "simulator"},
            }
        )
    )
    assert reported.reports("vector_add", tmp_path) == []  # a simulator's report: never


@pytest.mark.parametrize("pid", sorted(set(rec.panels()) - PENDING))  # PENDING: to record
def test_each_panel_shows_its_gpu_record_and_runs_nothing(pid):
    panel = rec.panels()[pid]

    def must_not_run(**params):
        raise AssertionError(f"{pid} timed {params} in the simulator")

    p = SliderPanel(
        {n: must_not_run for n in ("a",)},
        panel.sliders,
        x=panel.x or None,
        constraint=panel.constraint,
        record=pid,
    )
    found = records.load(pid)
    assert p.replay and p.runs == 0 and p.record.label == found.label
    assert found.label in p.status.value and "on the GPU" in p.status.value, p.status.value
    assert "CPU time" not in p.status.value
