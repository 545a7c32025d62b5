"""Every timed run judged, and no figure past the hardware (issue #38, items 2 and 4).

The GPU loop (course/exercises/timed.py) runs here with the simulator's launch: every run
restores its arrays from pristine copies, and its outputs are sampled at positions drawn
from the judge's seed after the run (course/grading/judging/sampled.py).  Kernels that skip work on
later runs get no figure; so does a figure past the measured ceilings (Tune.judge_figures).
"""

import importlib

import numpy as np
import pytest
from numba import cuda, float32

import course
from course.exercises import get, timed
from course.grading.judging import judge, measurer_calls, sampled, session
from course.grading.judging.report import case_events
from course.grading.judging.settings import GradeSettings
from course.grading.source.unit import extract
from course.grading.wall import measurer

check_mod = importlib.import_module("course.grading.judging.check")
cases_mod = importlib.import_module("course.grading.judging.cases")  # the case engine below it
sim_only = pytest.mark.skipif(course.MODE == "gpu", reason="the simulator's sizes and runs")


@cuda.jit
def memo_matmul(A, B, C):
    # the attack of issue #38: return at once when C already holds numbers
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        if C[row, col] == C[row, col]:
            return
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def stale_matmul(A, B, C):
    # right only when every run starts from a poisoned C (else it leaves -1 behind)
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        if C[row, col] == C[row, col]:
            C[row, col] = -1.0
            return
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def add_all(n, x, y):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + y[i]


@cuda.jit
def add_half(n, x, y):
    for i in range(cuda.grid(1), n // 2, cuda.gridsize(1)):
        y[i] = x[i] + y[i]


@cuda.jit
def add_nothing(n, x, y):
    pass


class Runs:
    """The spec, launching ``kernels[r]`` on run r (the last one on later runs): a kernel
    with state between runs, as a GPU kernel keeps it in memory past its arrays."""

    def __init__(self, spec, kernels):
        self._spec, self.kernels, self.n = spec, kernels, 0

    def __getattr__(self, name):
        return getattr(self._spec, name)

    def launch(self, fn, case, args):
        kernel = self.kernels[min(self.n, len(self.kernels) - 1)]
        self.n += 1
        self._spec.launch(kernel, case, args)

    def measure_on(self, fn, case, args):
        return type(self._spec).measure_on(self, fn, case, args)


def _measure(spec, kernels, sim_runs=2, seed=5):
    """The measurer's loop and the judge's verdict, in this process."""
    runs = Runs(spec, kernels)
    case = spec.measured_case()
    prep = judge.prepare(spec, case, cases_mod.measured_rng(seed), guard=False)
    plan = sampled.plan(spec, prep)
    plan.sim_runs = sim_runs
    steps: dict = {}
    figures, returned, samples, trespass = measurer.measure_launch(
        runs, None, prep.staged(case), dict(plan.request(), domains=plan.domains), steps
    )
    assert runs.n == 1 + sim_runs
    assert {"to device", "traced", "sim runs", "sampling", "copies"} <= set(steps)
    assert set(steps) <= set(timed.STEPS) and all(v >= 0 for v in steps.values())
    assert trespass is None
    return cases_mod.judge_measured(spec, case, prep, returned, figures, plan=plan, samples=samples)


ADD = get("tune_vector_add")  # measured in the simulator at n = 4096, 128 threads


@sim_only
def test_an_honest_kernel_passes_every_judged_run():
    res = _measure(ADD, [add_all])
    assert "no figure" not in res.message and res.figures, res.message


@sim_only
@pytest.mark.parametrize("later, where", [(add_nothing, "y["), (add_half, "y[")])
def test_a_kernel_that_does_the_work_only_on_the_first_run_gets_no_figure(later, where):
    res = _measure(ADD, [add_all, later])
    assert not res.passed and res.message.startswith("no figure: timed run 2 of 3"), res.message
    assert where in res.message and not res.figures


@sim_only
def test_sampled_positions_catch_part_of_a_large_output(monkeypatch):
    """Outputs larger than the sample: positions drawn from the judge's seed after the run,
    a different set every run; half an output unwritten is found at once."""
    monkeypatch.setattr(timed, "SAMPLES", 64)  # 64 of the 4096 elements per run
    res = _measure(ADD, [add_all, add_all, add_half])
    assert res.message.startswith("no figure: timed run 3 of 3"), res.message
    a = timed.positions(7, 0, 0, 4096)
    assert len(a) == 64 and np.array_equal(a, timed.positions(7, 0, 0, 4096))
    assert not np.array_equal(a, timed.positions(7, 1, 0, 4096))  # run by run
    assert not np.array_equal(a, timed.positions(8, 0, 0, 4096))  # the judge's seed
    dom = np.arange(100, 200)
    assert set(timed.positions(7, 0, 0, 4096, dom)) <= set(dom)  # judged rows only


@sim_only
def test_without_restoring_the_arrays_honest_and_stale_kernels_would_be_misjudged(monkeypatch):
    """The mutant: runs on the previous run's buffers.  y = x + y then accumulates, and a
    kernel that reads its output finds numbers: the judge notices both."""
    monkeypatch.setattr(timed.Arrays, "restore", lambda self: None)
    assert _measure(ADD, [add_all]).message.startswith("no figure: timed run 2 of 3")


@sim_only
def test_the_memoizing_kernel_computes_every_run_through_course_check(monkeypatch):
    """On a GPU this kernel ranked first at 27.6x the FP32 peak: it timed 30 launches on
    one set of buffers.  Every run now starts from a poisoned C, so it does all the work
    each time and gets its honest figure (here the naive kernel's, below the target)."""
    monkeypatch.setattr(sampled, "SIM_RUNS", 2)
    memo = course.check("tune_matmul", memo_matmul, record=False, seed=3)
    timed_case = memo.cases[-1]
    assert timed_case.name.startswith("tune target") and not timed_case.passed
    # the naive kernel's 1.125 bytes per FLOP, plus its two reads of C (every read counts)
    assert "not there yet" in timed_case.message and "measured 1.25" in timed_case.message
    spec = get("tune_matmul")
    stale = check_mod.measure(spec, stale_matmul, 3)  # course.check's measurement
    assert "no figure" not in stale.message and stale.figures, stale.message
    monkeypatch.setattr(timed.Arrays, "restore", lambda self: None)  # the mutant
    stale = check_mod.measure(spec, stale_matmul, 3)
    assert stale.message.startswith("no figure: timed run 2 of 3"), stale.message


@sim_only
def test_the_graders_judge_judges_every_run_the_measurer_makes(monkeypatch):
    """session.judge_unit (the leaderboard's and the grader's judge): the measurer process
    makes three judged runs of the stale kernel (right only on a poisoned C), and the
    judge checks that all three came back (fewer: no figure)."""
    monkeypatch.setattr(sampled, "SIM_RUNS", 2)
    error, cases = session.judge_unit(
        get("tune_matmul"),
        extract(stale_matmul),
        GradeSettings(seed=3, mode="sim", timeout=120.0, memory_mb=16384),
    )
    assert not error and all(c.passed for c in cases[:-1]), error
    assert "no figure" not in cases[-1].message and cases[-1].figures, cases[-1].message


class FakeMeasurer:
    """A measurer whose reply the test writes (what a broken or hostile one could send)."""

    def __init__(self, edit, steps=None):
        self.edit, self.steps = edit, steps

    def ask(self, header, op, arrays=None, expect=None):
        """The measurer's three requests: ``stage`` kept, ``measure`` answered with
        figures, ``collect`` with the arrays the test's ``edit`` made."""
        if header["op"] == "stage":
            self.staged = (header, arrays)
            return {"op": "staged", "error": None}, {}
        if header["op"] == "measure":
            reply = {"op": "measured", "figures": {"used": 1, "moved": 1}, "error": None}
            return (reply if self.steps is None else dict(reply, steps=self.steps)), {}
        assert header["op"] == "collect", header
        header, arrays = self.staged
        spec = get(header["exercise"])
        case = spec.measured_case("sim")
        prep = judge.prepare(spec, case, cases_mod.measured_rng(9), guard=False)
        bufs = {k: arrays[k].copy() for k in prep.shapes}
        bufs["y"] = prep.expected["y"].astype(np.float32)
        plan = sampled.Plan(header["sample"]["seed"], header["sample"]["names"], {}, 2)
        out = dict(bufs)
        for j, name in enumerate(plan.names):
            pos = [timed.positions(plan.seed, r, j, bufs[name].size) for r in range(3)]
            out[f"sample:{name}"] = np.stack([bufs[name].reshape(-1)[p] for p in pos])
        self.edit(out)
        for k, v in out.items():
            dt, shape = expect[k]
            assert v.dtype == dt and all(
                s in a if isinstance(a, range) else s == a for s, a in zip(v.shape, shape)
            )
        return {"op": "collected"}, out


def test_the_measuring_lock_covers_the_runs_and_not_the_pipes(monkeypatch):
    """#45: the inputs go over before the lock is taken and the outputs come back after it
    is given up, so a class's measurements wait for each other's GPU work only."""
    from contextlib import contextmanager

    from course.platform import gpu_lock

    held, seen = [False], []

    @contextmanager
    def lock(on, deadline):
        held[0] = True
        try:
            yield
        finally:
            held[0] = False

    class Watched(FakeMeasurer):
        def ask(self, header, op, arrays=None, expect=None):
            seen.append((header["op"], held[0], sorted(arrays or {})))
            return super().ask(header, op, arrays, expect)

    monkeypatch.setattr(sampled, "SIM_RUNS", 2)
    monkeypatch.setattr(gpu_lock, "device_lock", lock)
    jd = session.Judge(GradeSettings(seed=9, mode="sim", case_time_limit=10.0), None)
    res = jd.measure(Watched(lambda out: None), ADD)
    assert "no figure" not in res.message and res.figures, res.message
    assert [(op, h) for op, h, _ in seen] == [
        ("stage", False),
        ("measure", True),
        ("collect", False),
    ], seen
    assert seen[0][2] and not seen[1][2] and not seen[2][2]  # arrays only with the stage


def test_a_measurer_that_loses_its_staged_inputs_reports_it():
    m = measurer.Measurement()
    assert "before its inputs" in m.measure(None)["error"]
    header, arrays = m.collect()
    assert "nothing was measured" in header["error"] and arrays == {}


def test_the_session_judge_refuses_a_run_whose_samples_are_wrong(monkeypatch):
    monkeypatch.setattr(sampled, "SIM_RUNS", 2)
    jd = session.Judge(GradeSettings(seed=9, mode="sim", case_time_limit=10.0), None)

    def stale_run_2(out):
        out["sample:y"][1, 5] = 0.0

    res = jd.measure(FakeMeasurer(lambda out: None), ADD)
    assert "no figure" not in res.message, res.message
    res = jd.measure(FakeMeasurer(stale_run_2), ADD)
    assert res.message.startswith("no figure: timed run 2 of 3") and "y[" in res.message

    def one_run_only(out):
        out["sample:y"] = out["sample:y"][:1]

    res = jd.measure(FakeMeasurer(one_run_only), ADD)
    assert "did not all come back" in res.message


@pytest.mark.parametrize(
    "steps, moved",
    [
        ({"compile": 0.0, "launches": 0.0}, True),
        ({"compile": -1.0}, False),
        ({"launches": 1e9}, False),  # longer than the judge waited
        ({"verdict": 0.0}, False),
        ("fast", False),
    ],
)
def test_a_measurers_step_times_only_move_seconds_between_phases(monkeypatch, steps, moved):
    from course.grading.phases import Phases

    monkeypatch.setattr(sampled, "SIM_RUNS", 2)
    jd = session.Judge(GradeSettings(seed=9, mode="sim", case_time_limit=10.0), None)
    jd.phases = Phases()
    with jd.phases.timed("timed runs"):
        res = jd.measure(FakeMeasurer(lambda out: None, steps), ADD)
    assert "no figure" not in res.message and res.figures, res.message
    got = jd.phases.seconds
    assert ("timed runs: compile" in got) is moved and "timed runs: verdict" not in got
    assert "timed runs: judge prepare" in got and "timed runs: judge check" in got


@sim_only
def test_writing_past_an_array_or_into_a_pristine_copy_fails_the_measurement():
    case = ADD.measured_case()
    prep = judge.prepare(ADD, case, cases_mod.measured_rng(1), guard=False)
    arrays = timed.Arrays(prep.buffers(), prep.shapes, prep.scalars())
    arrays.work["y"][:] = 3.5  # what the runs left in y (y is updated in place)
    whole, trespass = arrays.collect()
    assert trespass is None and set(whole) == set(arrays.work)
    for name, w in arrays.work.items():  # the working arrays, whole, without their tails
        assert whole[name].shape == w.shape and np.array_equal(whole[name], w.copy_to_host())
    assert (whole["y"] == 3.5).all() and np.array_equal(whole["x"], arrays.host["x"])
    arrays.flat["y"][4096 + 17] = 1.0  # the tail after y
    whole, trespass = arrays.collect()
    assert whole == {} and "past the end of y" in trespass
    arrays = timed.Arrays(prep.buffers(), prep.shapes, prep.scalars())
    arrays.pristine["x"][3] = 2.0  # the copy runs restore from
    assert "pristine copy of x" in arrays.collect()[1]


# ---------------------------------------------------------------------------------------
# figures past the ceiling

CEIL = {"copy_gbps": 3000.0, "fp32_tflops": 50.0}


def _ms_for(spec, rate, what):
    _n, nbytes, flops = spec.work(spec.gpu_case)
    return (nbytes / (rate * 1e9) if what == "copy" else flops / (rate * 1e12)) * 1e3


@pytest.mark.parametrize(
    "name, rate, what, ok, words",
    [
        ("tune_matmul", 27.6 * 50, "flops", False, "27.6x the FP32 rate"),
        ("tune_matmul", 1.05 * 50, "flops", True, ""),
        ("tune_vector_add", 1.2 * 3000, "copy", False, "1.2x the copy bandwidth"),
        ("tune_vector_add", 1.05 * 3000, "copy", True, ""),
        ("tune_covariance", 1.5 * 50, "flops", True, ""),  # a symmetric kernel: half the work
        ("tune_covariance", 2.5 * 50, "flops", False, "the FP32 rate"),
        ("flash_attention", 1.2 * 990, "flops", False, "tensor-core rate"),
        ("flash_attention", 500, "flops", True, ""),  # above FP32: tensor cores may
    ],
)
def test_a_figure_past_the_ceiling_fails_with_no_figure_and_no_rank(name, rate, what, ok, words):
    spec = get(name)
    ms = _ms_for(spec, rate, what)
    res = spec.judge_figures({"ms": ms, "median_ms": ms}, "gpu", CEIL)
    if ok:
        assert "not believable" not in res.message and res.figures is None, res.message
        return
    assert not res.passed and words in res.message and "not believable" in res.message
    assert res.figures == {}


def test_the_measured_launch_is_found_by_its_field_not_its_name():
    """Gradescope and the leaderboard read the measured launch with split_timed: by
    ``CaseResult.timed``, which every way the judge makes that case sets; a test case named
    like it stays a test case (it was found by the name's prefix)."""
    from course.exercises.outcome import TIMED, CaseResult, split_timed

    made = [
        cases_mod.measure_failed("it broke"),
        get("tune_vector_add").judge_figures({"ms": 1.0, "median_ms": 1.0}, "gpu", CEIL),
    ]
    assert all(c.timed for c in made)
    impostor = CaseResult(f"{TIMED} (GPU)", "grid (1,), block (32,)")
    tests, timed = split_timed(case_events([impostor, made[1]]))
    assert [c["name"] for c in tests] == [impostor.name] and timed["timed"], (tests, timed)
    assert split_timed(case_events([impostor]))[1] is None


def test_a_figure_past_the_ceiling_is_not_ranked_on_the_leaderboard():
    from course.exercises import Case
    from course.leaderboard.runner import verdict

    spec = get("tune_matmul")
    case = Case("M = K = N = 8", {"M": 8, "K": 8, "N": 8}, (1, 1), (8, 8))
    prep = judge.prepare(spec, case, cases_mod.measured_rng(2), guard=False)
    done = dict(prep.buffers(), C=prep.expected["C"].astype(np.float32))
    ms = _ms_for(spec, 27.6 * 50, "flops")
    figures = {"ms": ms, "median_ms": ms, "mean_ms": ms, "std_ms": 0.0, "runs": 30}
    res = cases_mod.judge_measured(spec, case, prep, done, figures, "gpu", CEIL)
    assert not res.passed and "27.6x the FP32 rate" in res.message and not res.figures
    test = case_events([_passed_case()])[0]
    out = verdict("", [test, case_events([res])[0]])
    assert out["status"] == "rejected" and "mean_ms" not in out and test["passed"]
    honest = cases_mod.judge_measured(
        spec, case, prep, done, dict(figures, ms=100 * ms, mean_ms=100 * ms), "gpu", CEIL
    )
    assert honest.figures["ms"] == 100 * ms  # believed: ranked
    assert verdict("", [test, case_events([honest])[0]])["status"] == "done"


def _passed_case():
    from course.exercises.outcome import CaseResult

    return CaseResult("M x K x N = 16 x 16 x 16", "grid (1, 1), block (16, 16)")


@pytest.mark.gpu
def test_on_a_gpu_the_memoizing_kernel_gets_its_honest_figure(monkeypatch):
    """The issue's attack on real hardware: honest time (far below the target), never
    27.6x the FP32 rate; with the restore removed (the old measurement) the same kernel
    would be timed doing nothing, and the ceiling rule refuses that figure."""
    memo = course.check("tune_matmul", memo_matmul, record=False, seed=3).cases[-1]
    assert not memo.passed and "not there yet" in memo.message, memo.message
    assert memo.figures and memo.figures["runs"] == timed.REPEAT
    monkeypatch.setattr(timed.Arrays, "restore", lambda self: None)
    forged = course.check("tune_matmul", memo_matmul, record=False, seed=3).cases[-1]
    assert "not believable" in forged.message and not forged.figures, forged.message


def test_the_attention_boards_judged_rows_come_from_the_judges_seed():
    """At the seed's shape only SAMPLED_ROWS query rows are judged: which ones is drawn
    from the judge's seed of that submission, so a kernel that computes only the rows it
    guesses is wrong somewhere (it was the board's shape before: the same rows every run)."""
    from course.exercises import Case

    spec = get("flash_attention")
    case = Case("large", {"bh": 2, "n": 40_000, "d": 2, "big": 1.0}, (1,), (1,))

    def judged(seed):
        inputs = spec.make_inputs(case, np.random.default_rng(seed))
        out = spec.reference(case, inputs)["O"]
        return {tuple(ix) for ix in np.argwhere(~np.isnan(out[:, :, 0]))}

    first, again, other = judged(1), judged(1), judged(2)
    assert first == again and first != other and len(first) > 20


@sim_only
def test_the_graders_measurer_stages_on_the_device_and_checks_copies_after_the_runs():
    """``stage`` puts the arrays on the device before the lock; ``measure`` replies with
    figures only; ``collect`` (after the lock) checks the tails and sends the arrays - and
    a run that wrote past an array is refused there, with nothing sent back."""
    case = ADD.measured_case()
    prep = judge.prepare(ADD, case, cases_mod.measured_rng(3), guard=False)
    plan = sampled.plan(ADD, prep)

    def staged_measurement():
        m = measurer.Measurement()
        req = {
            "exercise": ADD.name,
            "case": measurer_calls.case_data(case),
            "shapes": prep.shapes,
            "scalars": prep.scalars(),
            "sample": plan.request(),
        }
        m.stage(req, {**prep.buffers(), **plan.arrays()}, add_all)
        return m

    m = staged_measurement()
    bufs = m.ready[3]
    assert set(bufs.work) == {"x", "y"}  # on the device before the runs
    reply = m.measure(add_all)
    assert reply["error"] is None and reply["figures"] and "copies" not in reply["steps"]
    header, arrays = m.collect()
    assert header["error"] is None and set(arrays) == {"x", "y", "sample:y"}
    assert not measurer_calls.same_arrays({k: arrays[k] for k in "xy"}, prep.buffer_shapes())
    m = staged_measurement()
    assert m.measure(add_all)["error"] is None
    m.done[0].flat["y"][case.params["n"] + 5] = 1.0  # as a kernel writing past y would
    header, arrays = m.collect()
    assert "past the end of y" in header["error"] and arrays == {}
