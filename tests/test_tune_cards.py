"""Tune targets that carry across cards (issue #47).

- GPU: the target is a speed-up over the given kernel, timed by the judge on the same card
  in the same run (``course/grading/judging/starter.py``, ``course/exercises/tune_cards.py``): the
  given kernel measures 1.0 and fails, a faster one passes, a noisy (slow) starter time is
  capped by its floor, an unknown card gets a sentence and never a crash, a starter whose
  runs come back wrong gives no target.  The GPU's own numbers come from
  ``python -m course checktimes`` (assets/checks/), never from a timed test.
- Simulator: the figures see the work a kernel issues: useless arithmetic on perfectly
  coalesced memory (a chain in a loop, one long expression, a device function) misses the
  ``issued`` bound, while every course solution keeps passing (tests/test_practice.py).
- The starters the judge times are the notebooks' given kernels, statement for statement.
"""

import ast
import importlib
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, int32

import course
from course.exercises import get
from course.exercises.starters import STARTERS
from course.exercises.tune_cards import (
    CALIBRATION,
    MARGIN,
    MIN_SPEEDUP,
    card_of,
    card_target,
    counted,
    starter_cap_ms,
    target_for,
)
from course.grading.judging import starter as starter_mod

check_mod = importlib.import_module("course.grading.judging.check")
REPO = Path(__file__).resolve().parents[1]
TUNES = sorted(STARTERS)
CEIL = {"copy_gbps": 3000.0, "fp32_tflops": 50.0}


# -- the starters are the notebooks' given kernels -----------------------------------------


def _body(src: str, fn: str):
    tree = ast.parse(textwrap.dedent(src))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == fn)
    return [ast.dump(s) for s in node.body], [a.arg for a in node.args.args]


@pytest.mark.parametrize("name", TUNES)
def test_each_starter_is_the_student_copys_given_kernel(name):
    import inspect

    from course.grading.classroom import notebook as nbk
    from course.grading.classroom.student import strip_solutions

    spec = get(name)
    ex = nbk.plan(REPO / "notebooks" / f"{spec.lesson}.ipynb").exercises[name]
    given = _body(strip_solutions(ex.cell), ex.function)
    ours = _body(inspect.getsource(STARTERS[name].py_func), STARTERS[name].__name__)
    assert ours == given


def test_every_tune_exercise_has_a_starter_and_a_speedup_target():
    tunes = {n for n, s in course.exercises.all_exercises().items() if s.kind == "tune"}
    assert tunes == set(TUNES)
    for name in TUNES:
        spec = get(name)
        assert spec.speedup >= MIN_SPEEDUP and spec.starter_floor > 0 and spec.issue_limit > 0
        assert "the speed of the given kernel" in spec.target_text


# -- GPU verdicts from figures (the GPU's numbers: checktimes) -------------------------------


def _gpu(name, ms, starter_ms, device="NVIDIA H100 80GB HBM3"):
    c = dict(CEIL, device=device, starter={"ms": starter_ms, "runs": 30})
    return get(name).judge_figures({"ms": ms, "median_ms": ms, "runs": 30}, "gpu", c)


@pytest.mark.parametrize("name", TUNES)
def test_the_given_kernel_fails_and_a_faster_one_passes_on_every_known_card(name):
    spec = get(name)
    base = 0.5 * starter_cap_ms(spec, CEIL)  # a starter time its floor leaves alone
    for card in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA L4"):
        assert not _gpu(name, base, base, card).passed  # 1.0x: the starter against itself
        assert not _gpu(name, base / 1.01, base, card).passed  # noise
        if counted(spec, card):  # the simulator's count decides there: test_counted_cards.py
            continue
        target = card_target(spec, card_of(card))
        res = _gpu(name, base / (target * 1.01), base, card)
        assert res.passed, res.message
        assert not _gpu(name, base / (target * 0.99), base, card).passed


def test_a_slow_starter_time_counts_only_down_to_its_floor():
    spec = get("tune_vector_add")
    nbytes = spec.work(spec.gpu_case)[1]
    floor_ms = nbytes / (spec.starter_floor * 3000e9) * 1e3
    # a starter timed 10x slower than its floor (a noisy GPU) would make a slow kernel pass
    res = _gpu("tune_vector_add", floor_ms / 1.2, 10 * floor_ms)
    assert not res.passed and "counted at its floor" in res.message, res.message
    assert _gpu("tune_vector_add", floor_ms / 1.6, 10 * floor_ms).passed


@pytest.mark.parametrize("device", ["NVIDIA RTX Imaginary 9090", "", None, "Weird ?? card"])
def test_a_card_the_course_never_saw_gets_a_sentence_not_a_crash(device):
    spec = get("tune_histogram")  # (reduction and transpose: counted there, see above)
    res = _gpu("tune_histogram", 1.0, 2.0, device)
    assert res.passed  # 2x: over the lowest calibrated target
    assert f"This GPU ({device or 'unknown'}) has no calibration; the target used is" in (
        res.message
    )
    t, _ = target_for(spec, device)
    assert t == min(card_target(spec, c) for c in CALIBRATION[spec.name])


def test_a_fake_device_name_goes_through_the_check_path(monkeypatch):
    """with_starter: the device's name and the starter's figures reach the verdict."""
    from course.grading.judging import cases
    from course.platform import runtime

    spec = get("tune_histogram")
    monkeypatch.setattr(runtime, "MODE", "gpu")
    monkeypatch.setattr(runtime, "device_name", lambda: "NVIDIA Quantum Toaster")
    monkeypatch.setattr(starter_mod, "_TIMED", {})
    monkeypatch.setattr(starter_mod, "time_starter", lambda s, m=None: {"ms": 2.0})
    c = starter_mod.with_starter(spec, dict(CEIL))
    assert c["device"] == "NVIDIA Quantum Toaster" and c["starter"]["ms"] == 2.0
    res = spec.judge_figures({"ms": 1.0}, "gpu", c)
    assert res.passed and "Quantum Toaster) has no calibration" in res.message
    assert cases.judge_measured is not None  # the route judge_measured takes (see cases.py)


def test_card_names_match_the_cards_the_course_knows():
    assert card_of("NVIDIA H100 80GB HBM3") == "H100"
    assert card_of("NVIDIA H100 PCIe") == "H100"
    assert card_of("NVIDIA H200") == "H200"
    assert card_of("NVIDIA A100-SXM4-80GB") == "A100"
    assert card_of("NVIDIA L4") == "L4" and card_of("Tesla T4") == "T4"
    assert card_of("NVIDIA L40S") is None and card_of("NVIDIA GeForce RTX 4090") is None


def test_measured_cards_leave_the_solution_a_margin():
    for name, cards in CALIBRATION.items():
        spec = get(name)
        for card in ("H100", "H200"):
            margin = cards[card] / card_target(spec, card)
            assert margin >= (1.03 if name == "tune_transpose" else MARGIN - 0.01), (name, card)


# -- the starter is timed and judged like a student's ------------------------------------


def _fake_ms(figures_ms):
    from course.grading.wall.measurer import measure_launch

    def measure(spec, kernel, staged, sample):
        figures, arrays, samples, trespass = measure_launch(spec, kernel, staged, sample)
        return dict(figures, ms=figures_ms), arrays, samples, trespass

    return measure


def _small(spec, monkeypatch):
    monkeypatch.setattr(spec, "gpu_case", spec.sim_case)


@pytest.mark.skipif(course.MODE == "gpu", reason="the simulator's judged runs")
def test_the_starter_runs_are_judged_and_timed(monkeypatch):
    spec = get("tune_vector_add")
    _small(spec, monkeypatch)
    figures = starter_mod.time_starter(spec, _fake_ms(0.5))
    assert figures["ms"] == 0.5


@cuda.jit
def add_wrong(n, x, y):
    for k in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[k] = x[k] + y[k] + float32(1.0)


@pytest.mark.skipif(course.MODE == "gpu", reason="the simulator's judged runs")
def test_a_starter_judged_wrong_gives_no_target(monkeypatch):
    spec = get("tune_vector_add")
    _small(spec, monkeypatch)
    monkeypatch.setitem(STARTERS, "tune_vector_add", add_wrong)
    with pytest.raises(starter_mod.StarterFailed, match="judged wrong"):
        starter_mod.time_starter(spec, _fake_ms(0.5))
    from course.exercises.starters import add_fast

    monkeypatch.setitem(STARTERS, "tune_vector_add", add_fast)
    with pytest.raises(starter_mod.StarterFailed, match="no time"):
        starter_mod.time_starter(spec, _fake_ms(0.0))


def test_a_missing_starter_time_is_an_incomplete_measurement():
    res = get("tune_matmul").judge_figures({"ms": 10.0}, "gpu", dict(CEIL))
    assert not res.passed and "incomplete" in res.message


# -- the simulator sees the work a kernel issues ------------------------------------------


@cuda.jit
def add_chain(n, x, y):
    # coalesced, every byte once: and 64 useless dependent FLOPs per element
    for k in range(cuda.grid(1), n, cuda.gridsize(1)):
        v = x[k]
        acc = v
        for _r in range(64):
            acc = acc * float32(0.5) + v
        y[k] = v + y[k] + float32(0.0) * acc


@cuda.jit
def add_expression(n, x, y):
    # the same chain as one long expression (one source line)
    for k in range(cuda.grid(1), n, cuda.gridsize(1)):
        v = x[k]
        w = v * v * v * v * v * v * v * v * v * v * v * v * v * v * v * v * v * v * v * v * v * v
        w = w * w * w * w * w * w * w * w * w * w * w * w * w * w * w * w * w * w * w * w * w * w
        y[k] = v + y[k] + float32(0.0) * w


@cuda.jit(device=True)
def spin(v):
    acc = v
    for _r in range(48):
        acc = acc * float32(0.5) + v
    return acc


@cuda.jit
def add_device_chain(n, x, y):
    # the chain hidden in a device function
    for k in range(cuda.grid(1), n, cuda.gridsize(1)):
        v = x[k]
        y[k] = v + y[k] + float32(0.0) * spin(v)


@cuda.jit
def reduce_busy(g_idata, g_odata):
    # the conflict-free tree, and a useless loop at every level
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    pad = float32(0.0)
    while s > 0:
        for _r in range(40):
            pad = pad * float32(0.5) + float32(1.0)
        if tid < s:
            sdata[tid] += sdata[tid + s] + float32(0.0) * pad
        cuda.syncthreads()
        s >>= 1
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def histogram_busy(data, hist):
    # privatized counts, and a useless loop per element
    t = cuda.threadIdx.x
    ch_per_block = (data.shape[1] + cuda.gridDim.x - 1) // cuda.gridDim.x
    rows_per_block = (data.shape[0] + cuda.gridDim.y - 1) // cuda.gridDim.y
    c0 = cuda.blockIdx.x * ch_per_block
    r0 = cuda.blockIdx.y * rows_per_block
    n_ch = max(0, min(ch_per_block, data.shape[1] - c0))
    n_rows = max(0, min(rows_per_block, data.shape[0] - r0))
    sdata = cuda.shared.array(4 * 256, int32)
    for i in range(t, 4 * 256, cuda.blockDim.x):
        sdata[i] = 0
    cuda.syncthreads()
    for k in range(t, n_rows * n_ch, cuda.blockDim.x):
        r = k // n_ch
        c = k - r * n_ch
        v = int32(data[r0 + r, c0 + c])
        for _r in range(100):
            v = (v * 7 + 3) % 256
        cuda.atomic.add(sdata, c * 256 + int32(data[r0 + r, c0 + c]) + 0 * v, 1)
    cuda.syncthreads()
    for i in range(t, n_ch * 256, cuda.blockDim.x):
        if sdata[i] > 0:
            cuda.atomic.add(hist, (c0 + i // 256, i % 256), sdata[i])


@pytest.mark.skipif(course.MODE == "gpu", reason="the simulator's counted figures")
@pytest.mark.parametrize(
    "name, kernel",
    [
        ("tune_vector_add", add_chain),
        ("tune_vector_add", add_expression),
        ("tune_vector_add", add_device_chain),
        ("tune_reduction", reduce_busy),
        ("tune_histogram", histogram_busy),
    ],
)
def test_useless_arithmetic_misses_the_issued_bound(name, kernel):
    res = check_mod.measure(get(name), kernel, 7)
    assert not res.passed, res.message
    assert "but kernel instructions run per unit of work" in res.message, res.message


@pytest.mark.skipif(course.MODE == "gpu", reason="the simulator's counted figures")
def test_issued_counts_the_kernels_code_and_its_device_functions():
    from course.sim import trace, trace_figures

    x = np.ones(64, np.float32)
    counts = {}
    for k in (add_chain, add_device_chain, STARTERS["tune_vector_add"]):
        y = np.ones(64, np.float32)
        counts[k] = trace_figures.counts([trace.run(k, 1, 64, 64, x, y, ops=True)])["issued"]
    plain = counts[STARTERS["tune_vector_add"]]
    assert 0 < plain < 80 * 64  # tens of instructions per thread (one element each)
    assert counts[add_chain] > 10 * plain and counts[add_device_chain] > 8 * plain


# -- checktimes: the GPU proof's report -------------------------------------------------


@pytest.mark.skipif(course.MODE == "gpu", reason="a small simulator report")
def test_checktimes_reports_the_given_kernel_and_the_solution(tmp_path):
    from course.grading.classroom import solutions

    out = tmp_path / "report.md"
    assert solutions.main(["--only", "tune_centering", "--out", str(out)]) == 0
    text = out.read_text()
    assert "# Check times (simulator, " in text and "## Tune targets on this device" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| `tune_centering` | >="))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == ">= 0.6" and cells[3] == "fails" and cells[5] == "pass", row
    assert float(cells[2]) < 0.6 <= float(cells[4]) and cells[6].endswith("x"), row
