"""The slider panel, driven from code as a user would drive it."""

import itertools

import pytest
from numba import cuda

from course.measure.timing import Timing
from course.show import plots
from course.show.widgets import SliderPanel


def fake_run(calls):
    def run(threads_per_block, blocks):
        calls.append((threads_per_block, blocks))
        return Timing([1000.0 / (threads_per_block * blocks)])

    return run


def test_panel_runs_on_creation_and_on_change():
    calls = []
    p = SliderPanel(
        {"k": fake_run(calls)},
        sliders={"threads_per_block": [32, 64, 128], "blocks": [1, 2]},
        nbytes=1e6,
    )
    assert calls == [(64, 2)] and p.image.value[:4] == b"\x89PNG"
    first = p.image.value
    p.set(threads_per_block=128)
    assert calls[-1] == (128, 2) and p.image.value != first
    assert "simulator" in p.status.value and "not a speed" in p.status.value
    assert "GB/s" not in p.status.value  # CPU time is never shown as a speed
    p.set(threads_per_block=64)  # cached: no new launch
    assert len(calls) == 2


def test_sweep_covers_the_x_range_and_sweep_all_everything():
    calls = []
    p = SliderPanel(fake_run(calls), sliders={"threads_per_block": [32, 64, 128], "blocks": [1, 2]})
    p.sweep()
    assert {c[0] for c in calls} == {32, 64, 128}
    p.sweep_button.click()  # the button does the same (cached now)
    p.sweep_all()
    assert len(set(calls)) == 6 and p.runs == 6


def too_many(threads_per_block, blocks):
    return "too many threads" if threads_per_block * blocks > 128 else None


def test_only_valid_settings_can_be_chosen():
    calls = []
    p = SliderPanel(
        {"k": fake_run(calls)},
        sliders={"threads_per_block": [32, 64, 128, 256], "blocks": [1, 2, 4]},
        constraint=too_many,
        value={"threads_per_block": 32, "blocks": 1},
    )
    assert list(p.sliders["threads_per_block"].options) == [32, 64, 128]  # 256 never fits
    with pytest.raises(ValueError, match="too many threads"):
        p.set(threads_per_block=64, blocks=4)  # several at once: must be valid
    p.sliders["blocks"].value = 4  # as a user drags it: 32 x 4 fits
    assert p.params == {"threads_per_block": 32, "blocks": 4}
    p.sliders["threads_per_block"].value = 64  # 64 x 4 does not: blocks follows
    assert p.params == {"threads_per_block": 64, "blocks": 2}
    assert (
        "moved blocks 4 \u2192 2: threads_per_block = 64, blocks = 4 cannot launch (too "
        "many threads)"
    ) in p.status.value
    p.set(threads_per_block=128)  # from code, the same
    assert p.params == {"threads_per_block": 128, "blocks": 1}
    assert "Not a valid setting" not in p.status.value
    assert calls and all(not too_many(*c) for c in calls)  # nothing invalid launched
    points = {(q["threads_per_block"], q["blocks"]) for q in p.selectable()}
    assert points == {(32, 1), (32, 2), (32, 4), (64, 1), (64, 2), (128, 1)}


def test_an_invalid_default_is_refused_and_the_middle_moves():
    with pytest.raises(ValueError, match="not a valid setting"):
        SliderPanel(
            fake_run([]),
            sliders={"threads_per_block": [32, 64], "blocks": [1, 2, 4]},
            constraint=too_many,
            value={"threads_per_block": 64, "blocks": 4},
        )
    p = SliderPanel(
        fake_run([]),
        sliders={"threads_per_block": [16, 32, 64], "blocks": [1, 2, 4]},
        constraint=too_many,
    )  # the middle, (32, 2), is valid
    assert p.params == {"threads_per_block": 32, "blocks": 2}
    p = SliderPanel(
        fake_run([]),
        sliders={"threads_per_block": [64, 128], "blocks": [1, 2, 4]},
        constraint=too_many,
    )  # blocks 4 is dropped; the middle (128, 2) is
    assert p.params == {"threads_per_block": 128, "blocks": 1}  # not valid: x stays put


def test_errors_show_beside_the_sliders():
    def broken(threads_per_block):
        raise RuntimeError("launch failed")

    p = SliderPanel(broken, sliders={"threads_per_block": [32, 64]})
    assert "launch failed" in p.status.value


def test_bad_arguments():
    with pytest.raises(ValueError):
        SliderPanel({}, sliders={"a": [1]})
    with pytest.raises(ValueError):
        SliderPanel(lambda a: 1.0, sliders={"a": []})
    p = SliderPanel(lambda a: 1.0, sliders={"a": [1, 2]})
    with pytest.raises(KeyError):
        p.set(b=1)
    with pytest.raises(ValueError):
        p.set(a=3)


# --- simulator mode: the GPU's recorded grid, never the simulator's CPU time ---------------

from course.show import records  # noqa: E402


def fake_record(panel="test/panel"):
    """A small record as ``python -m course bench sliders`` writes it (made-up numbers:
    on this GPU 64 threads per block is faster than 32, as on a real one)."""
    points = []
    for tpb in (32, 64, 128):
        for blocks in (1, 2):
            ms = 1.0 / (tpb * blocks)
            points.append(
                {
                    "params": {"threads_per_block": tpb, "blocks": blocks},
                    "results": {
                        "k": {
                            "median_ms": ms,
                            "rate": 1e6 / ms / 1e9 * 1e3,
                            "floor_ms": 0.001,
                            "n": 5,
                        }
                    },
                }
            )
    return records.Record(
        panel=panel,
        device="FakeGPU 9000",
        date="2026-11-26",
        points=points,
        x="threads_per_block",
        rate="GB/s",
        sliders={"threads_per_block": [32, 64, 128], "blocks": [1, 2]},
        ceilings={"copy_gbps": 3000.0, "fp32_tflops": 50.0},
        command="python -m course bench sliders test/panel",
        title="k at the GPU's size",
    )


def test_simulator_panel_plots_the_record_and_says_what_it_counts(monkeypatch):
    drawn = []
    real_sweep = plots.sweep
    monkeypatch.setattr(
        plots,
        "sweep",
        lambda xs, series, **kw: (
            drawn.append((kw["ylabel"], dict(series), kw.get("source"))),
            real_sweep(xs, series, **kw),
        )[1],
    )
    calls, counted = [], []
    rec = fake_record()
    rec.value = {"threads_per_block": 64, "blocks": 2}
    p = SliderPanel(
        {"k": fake_run(calls)},
        sliders={"threads_per_block": [8, 16], "blocks": [1]},  # sim sizes
        nbytes=1e6,
        record=rec,
        counts=lambda **q: counted.append(q) or {"sectors / request": "4.00"},
    )
    assert list(p.sliders["threads_per_block"].options) == [32, 64, 128]  # the GPU's grid
    assert p.params == {"threads_per_block": 64, "blocks": 2}  # its default
    assert calls == [] and counted == [p.params]  # nothing timed; the simulator counts
    assert p.title == rec.title  # the record's sizes, not the simulator's
    status = p.status.value
    assert "0.007812 ms" in status and "GB/s on the GPU" in status, status
    assert "recorded on FakeGPU 9000, 2026-11-26" in status
    assert "sectors / request 4.00" in status and "roofline floor on the GPU 0.001 ms" in status
    ylabel, series, source = drawn[0]
    assert ylabel == "GPU time (ms)" and source == "recorded on FakeGPU 9000, 2026-11-26"
    assert series == {"k": [1 / 64, 1 / 128, 1 / 256]}  # the record, at blocks = 2
    before = p.image.value
    p.set(threads_per_block=32)  # the figure follows the GPU's record
    assert p.image.value != before and "0.01562 ms" in p.status.value
    assert calls == []


def test_simulator_panel_without_a_record_plots_no_speed(monkeypatch):
    drawn = []
    monkeypatch.setattr(plots, "sweep", lambda *a, **kw: drawn.append(kw))
    p = SliderPanel(
        fake_run([]),
        sliders={"threads_per_block": [32, 64], "blocks": [1, 2]},
        nbytes=1e6,
        record="no/such/panel",
    )
    assert p.record is None and not drawn and p.image.value[:4] == b"\x89PNG"
    assert "no GPU record" in p.status.value and "GB/s" not in p.status.value


def test_records_save_and_load_the_newest(tmp_path):
    old, new = fake_record(), fake_record()
    old.date, new.date = "2026-01-01", "2026-11-26"
    for r in (old, new):
        r.save(tmp_path)
    got = records.load("test/panel", tmp_path)
    assert got.date == "2026-11-26" and got.device == "FakeGPU 9000"
    assert got.at({"threads_per_block": 64, "blocks": 2})["k"]["median_ms"] == 1 / 128
    assert got.at({"threads_per_block": 256, "blocks": 2}) is None
    assert records.load("other/panel", tmp_path) is None


def test_on_a_gpu_the_record_is_drawn_dashed_beside_the_live_figures(monkeypatch):
    from course.measure import perf
    from course.platform import runtime

    monkeypatch.setattr(runtime, "MODE", "gpu")
    monkeypatch.setattr(perf, "measured_ceilings", lambda: {"copy_gbps": 3000.0})
    drawn = []
    monkeypatch.setattr(
        plots, "sweep", lambda xs, series, **kw: drawn.append((dict(series), kw.get("dashed")))
    )
    p = SliderPanel(
        {"k": fake_run([])},
        sliders={"threads_per_block": [32, 64, 128], "blocks": [1, 2]},
        nbytes=1e6,
        record=fake_record(),
    )
    series, dashed = drawn[0]
    assert "k" in series and "k (2026-11-26 record)" in series
    assert dashed == ["k (2026-11-26 record)"] and "record: 0.007812 ms" in p.status.value


# --- every slider panel in the notebooks: its default and every selectable point are valid -

import ast  # noqa: E402
import json  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import course  # noqa: E402

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
CONTROLS = ("sliders", "value", "x", "constraint")


def _cells(nb: Path) -> list[str]:
    return [
        "".join(c["source"])
        for c in json.loads(nb.read_text())["cells"]
        if c["cell_type"] == "code"
    ]


def _panels():
    """(notebook, code cell index, the SliderPanel call) for every panel a notebook makes."""
    found = []
    for nb in NOTEBOOKS:
        for i, src in enumerate(_cells(nb)):
            if "SliderPanel(" not in src:
                continue
            for node in ast.walk(ast.parse(src)):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) == "SliderPanel"
                ):
                    found.append(pytest.param(nb, i, node, id=f"{nb.stem}-cell{i}"))
    return found


def _namespace(nb: Path, cell: int, call: ast.Call, profile: str) -> dict:
    """What the call's controls need: the notebook's imports, ``course`` as it is on a GPU
    (lecture sizes) or in the simulator, and the notebook's assignments of the names they
    use (found before the call, evaluated alone: no kernel runs)."""
    real = course
    fake = types.SimpleNamespace(
        **{k: getattr(real, k) for k in dir(real) if not k.startswith("__")}
    )
    fake.MODE = "gpu" if profile == "lecture" else "sim"
    fake.size = lambda *, lecture, sim: lecture if profile == "lecture" else sim
    ns = {}
    cells = _cells(nb)[: cell + 1]
    stmts = [s for src in cells for s in ast.parse(src).body]
    for s in stmts:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            try:
                exec(compile(ast.Module([s], []), str(nb), "exec"), ns)
            except ImportError:
                pass
    ns["course"] = fake
    assigns = {}
    for s in stmts:  # the last assignment before the call wins
        if (
            s.lineno
            and isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
        ):
            assigns[s.targets[0].id] = s.value

    def need(expr):
        for n in ast.walk(expr):
            if (
                isinstance(n, ast.Name)
                and n.id not in ns
                and n.id in assigns
                and not isinstance(n.ctx, ast.Store)
            ):
                value = assigns.pop(n.id)
                need(value)
                ns[n.id] = eval(compile(ast.Expression(value), str(nb), "eval"), ns)

    for kw in call.keywords:
        if kw.arg in CONTROLS:
            need(kw.value)
    return ns


@pytest.mark.parametrize("profile", ["sim", "lecture"])
@pytest.mark.parametrize("nb, cell, call", _panels())
def test_every_panel_offers_only_valid_settings(nb, cell, call, profile):
    ns = _namespace(nb, cell, call, profile)
    controls = {
        kw.arg: eval(compile(ast.Expression(kw.value), str(nb), "eval"), ns)
        for kw in call.keywords
        if kw.arg in CONTROLS
    }
    sliders = controls.pop("sliders")
    runs = []

    def stub(**params):  # stands in for the panel's kernels
        runs.append(params)
        return Timing([1.0])

    p = SliderPanel({"stub": stub}, sliders, **{k: v for k, v in controls.items() if v is not None})
    constraint = controls.get("constraint")
    why = (lambda q: constraint(**q)) if constraint else (lambda q: None)
    assert not why(p.params), f"the default {p.params} is not valid: {why(p.params)}"
    if controls.get("value"):
        assert p.params == {**p.params, **controls["value"]}, "the default moved"
    points = p.selectable()
    assert p.params in points
    bad = [(q, why(q)) for q in points if why(q)]
    assert not bad, f"selectable settings that cannot launch: {bad}"
    assert runs == [p.params]  # listing them launched nothing


# --- the recording command: python -m course bench sliders --------------------------------


def test_recording_refuses_the_simulator_and_a_dry_run_is_never_shown(tmp_path, capsys):
    from course.bench import sliders as rec

    assert rec.main(["01_vector_add/grid_stride"]) == 2  # no GPU: no record
    assert "no GPU" in capsys.readouterr().err and not list(tmp_path.iterdir())
    assert rec.main(["no/such/panel"]) == 2
    panel = rec.panels()["04_matmul/v3"]
    panel.sliders = {"S": [4, 8], "L": [16, 32], "V": [2]}  # a tiny grid: 3 valid points
    r = rec.record(panel, quiet=True)
    assert [p["params"] for p in r.points] == [
        {"S": 4, "L": 16, "V": 2},
        {"S": 8, "L": 16, "V": 2},
        {"S": 8, "L": 32, "V": 2},
    ]
    row = r.points[0]["results"]["v3"]
    assert row["median_ms"] > 0 and row["rate"] > 0 and r.rate == "GFLOP/s"
    assert r.device.startswith("simulator") and r.command.endswith("04_matmul/v3")
    r.save(tmp_path)
    assert records.load("04_matmul/v3", tmp_path) is None  # a CPU's times: never shown


def _lecture_panels(monkeypatch):
    from course.bench import sliders as rec
    from course.platform import runtime

    monkeypatch.setattr(runtime, "profile", lambda: "lecture")
    return rec.panels()


def test_each_recorded_grid_is_its_notebook_panels_grid(monkeypatch):
    """What the command records for a panel is what the notebook's panel offers on a GPU."""
    recorded = _lecture_panels(monkeypatch)
    named = 0
    for param in _panels():
        nb, cell, call = param.values
        kws = {kw.arg: kw.value for kw in call.keywords}
        if "record" not in kws:
            continue
        named += 1
        pid = ast.literal_eval(kws["record"])
        assert pid in recorded, f"{nb.stem}: no recording for record={pid!r}"
        ns = _namespace(nb, cell, call, "lecture")
        ev = {
            k: eval(compile(ast.Expression(kws[k]), str(nb), "eval"), ns)
            for k in CONTROLS
            if k in kws
        }
        spec = recorded[pid]
        assert {k: list(v) for k, v in ev["sliders"].items()} == spec.sliders, pid
        assert ev.get("x", next(iter(ev["sliders"]))) == (spec.x or next(iter(spec.sliders)))
        mine = ev.get("constraint")
        for point in itertools.product(*spec.sliders.values()):  # the same settings launch
            p = dict(zip(spec.sliders, point))
            said = [bool(c and c(**p)) for c in (mine, spec.constraint)]
            assert said[0] == said[1], (pid, p, said)
        assert spec.default() == {**spec.default(), **(ev.get("value") or {})}, pid
    assert named == len(recorded) == 10  # every notebook panel names its record


@cuda.jit
def _strided(x, y):  # each lane reads 32 floats apart: its own sector
    i = cuda.grid(1)
    if i * 32 < x.size:
        y[i] = x[i * 32]


@cuda.jit
def _coalesced(x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = x[i]


def test_simulator_counts_are_counts_not_speeds():
    import numpy as np

    from course.show.simcounts import launch_counts

    x, y = np.ones(32 * 32, np.float32), np.zeros(32, np.float32)
    good = launch_counts(lambda: _coalesced[1, 32](x, y), threads=32)
    bad = launch_counts(
        lambda: _strided[1, 32](x, y), threads=32, nbytes=1e6, ceilings={"copy_gbps": 1000.0}
    )
    assert good["sectors / request"] == "4.00", good
    assert float(bad["sectors / request"]) > 16, bad
    assert good["bank-conflict ways"] == "no shared memory"
    assert good["occupancy (H100)"].startswith("50%, limited by blocks")  # 32 x 1-warp blocks
    assert bad["roofline floor"] == "0.001 ms" and "roofline floor" not in good


def test_every_recording_matches_a_notebook_panel(monkeypatch):
    """Each grid the command records is the grid of a panel of its notebook on a GPU."""
    recorded = _lecture_panels(monkeypatch)
    grids = {}
    for param in _panels():
        nb, cell, call = param.values
        ns = _namespace(nb, cell, call, "lecture")
        kws = {kw.arg: kw.value for kw in call.keywords}
        sl = eval(compile(ast.Expression(kws["sliders"]), str(nb), "eval"), ns)
        grids.setdefault(nb.stem, []).append({k: list(v) for k, v in sl.items()})
    for pid, spec in recorded.items():
        assert spec.sliders in grids.get(pid.split("/")[0], []), f"{pid}: no such panel"
        assert spec.constraint is None or not spec.constraint(**spec.default()), pid
    assert len(recorded) == sum(len(g) for g in grids.values())  # every panel recordable
