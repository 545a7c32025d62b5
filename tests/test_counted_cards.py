"""A card whose memory hides what a tune exercise changes is graded by the simulator's count
(issue #47; ``course/exercises/tune_cards.py``).

Where the calibration says the course's solution is within noise of the given kernel
(``tune_transpose`` on an L4 or a T4, ``tune_reduction`` on an L4), time alone would fail
an honest student or pass the given kernel by luck.  There the GPU time must only not be
slower than the given kernel's, and a measurer of its own, started in simulator mode,
counts the same kernel: its verdict decides.  Tested here: which cards count, the combined
verdict (a missing count fails, a slow kernel fails, a conflicted kernel fails, an honest
one passes), the simulator measurer on the course's solution and on the given kernel, and
that a warm fork is never asked to run a measurer in the other mode.
"""

import importlib

import pytest

from course.exercises import get
from course.exercises.outcome import CaseResult
from course.exercises.tune_cards import NOT_SLOWER, counted, starter_cap_ms, target_for

check_mod = importlib.import_module("course.grading.judging.check")
CEIL = {"copy_gbps": 3000.0, "fp32_tflops": 50.0}
T4, L4, H100 = "Tesla T4", "NVIDIA L4", "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    "name,device,expected",
    [
        ("tune_transpose", T4, True),
        ("tune_transpose", L4, True),
        ("tune_reduction", L4, True),
        ("tune_reduction", T4, False),
        ("tune_transpose", H100, True),  # 1.07x on a Hopper card: within noise's reach
        ("tune_reduction", H100, False),
        ("tune_histogram", "NVIDIA H200", False),
        ("tune_matmul", L4, False),
        ("tune_transpose", "NVIDIA RTX Imaginary 9090", True),  # some known card hides it
        ("tune_vector_add", "NVIDIA RTX Imaginary 9090", False),
        ("tune_transpose", None, True),
    ],
)
def test_which_cards_count(name, device, expected):
    assert counted(get(name), device) is expected


def test_an_instructor_can_judge_as_if_on_another_card(monkeypatch):
    spec = get("tune_reduction")
    assert not counted(spec, H100)
    monkeypatch.setenv("COURSE_TUNE_CARD", "NVIDIA L4")
    assert counted(spec, H100)
    t, note = target_for(spec, H100)
    assert t == NOT_SLOWER and "This GPU (L4)" in note and "simulator's count" in note


def _count(passed: bool) -> CaseResult:
    res = CaseResult("timed launch (simulator)", "", timed=True)
    if passed:
        res.message = "shared-memory replays: measured 0, target <= 0"
    else:
        res.fail("shared-memory replays: measured 4096, target <= 0 - correct, but not there yet")
    return res


def _verdict(name, device, speedup, count):
    starter = 0.5 * starter_cap_ms(get(name), CEIL)  # a time its floor leaves alone
    c = dict(CEIL, device=device, starter={"ms": starter, "runs": 30})
    figures = {"ms": starter / speedup, "median_ms": starter / speedup, "runs": 30}
    return get(name).judge_figures(figures, "gpu", c, count)


@pytest.mark.parametrize(
    "name,device", [("tune_transpose", T4), ("tune_reduction", L4), ("tune_transpose", "Odd")]
)
def test_on_a_counted_card_the_count_decides(name, device):
    honest = _verdict(name, device, 1.0, _count(True))
    assert honest.passed, honest.message
    assert "the simulator's count: shared-memory replays: measured 0" in honest.message
    assert "time must only not be slower than the given kernel's" in honest.message
    missing = _verdict(name, device, 1.5, None)  # mutant: the count never ran
    assert not missing.passed and "it did not run" in missing.message
    conflicted = _verdict(name, device, 1.5, _count(False))  # mutant: the given kernel's count
    assert not conflicted.passed and "measured 4096" in conflicted.message
    slow = _verdict(name, device, 0.9, _count(True))  # mutant: right count, slower kernel
    assert not slow.passed and f">= {NOT_SLOWER:g}" in slow.message


def test_a_kernel_too_slow_is_never_counted():
    """The counts are made only when the time passes: a slow kernel (a spinning one, say)
    starts no counting process and holds no GPU lock for them."""
    made = []

    def count():
        made.append(1)
        return _count(True)

    slow = _verdict("tune_transpose", T4, 0.5, count)
    assert not slow.passed and not made and f">= {NOT_SLOWER:g}" in slow.message
    fast = _verdict("tune_transpose", T4, 1.0, count)
    assert fast.passed and made == [1], fast.message


def test_a_timed_card_ignores_no_count_and_needs_its_speedup():
    """On a card that shows the lesson in time, the speed-up decides as before."""
    assert _verdict("tune_reduction", H100, 1.13, None).passed
    assert not _verdict("tune_reduction", H100, 1.0, _count(True)).passed


@pytest.mark.parametrize("student,passes", [(False, True), (True, False)])
def test_the_simulator_measurer_counts_the_solution_and_the_given_kernel(student, passes):
    """The notebook's way (``check._count``): a measurer started in simulator mode loads the
    kernel's unit, runs the small launch traced and judged, and the simulator target
    applies - the course's solution passes, the given (conflicted) kernel fails."""
    from course.grading.classroom.solutions import defined

    fn, _ = defined("tune_transpose", student=student)
    res = check_mod._count(get("tune_transpose"), fn, seed=5)
    assert res.passed is passes, res.message
    assert "shared-memory replays" in res.message


def test_a_kernel_the_simulator_cannot_load_fails_with_a_sentence():
    res = check_mod._count(get("tune_transpose"), object(), seed=5)
    assert not res.passed and "the simulator cannot count this kernel" in res.message


def test_a_measurer_in_the_other_mode_is_never_forked(monkeypatch, tmp_path):
    """A warm fork keeps its zygote's numba: a GPU grader's simulator measurer starts cold,
    without starting or asking a zygote; one in the grader's own mode asks for a fork."""
    from course.grading.wall import forks as forks_mod

    f = forks_mod.Forks(isolation=None)
    asked = []
    monkeypatch.setattr(f, "zygote", lambda kind, env: asked.append(kind))
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)  # the grader on a GPU
    m = "course.grading.wall.measurer"
    assert f.child(m, {"NUMBA_ENABLE_CUDASIM": "1"}, tmp_path / "l", [], 60, 0, None) is None
    assert asked == []
    assert f.child(m, {}, tmp_path / "l", [], 60, 0, None) is None  # its zygote: None here
    assert asked == ["run"]


def test_each_tune_notebook_says_its_target_in_plain_words():
    """The lesson's text states what the check asks on an H100 or H200: a speed-up, or (where
    time hides the lesson) not slower, with the simulator's count deciding."""
    import json
    from pathlib import Path

    from course.exercises.starters import STARTERS

    repo = Path(__file__).resolve().parents[1]
    for name in STARTERS:
        spec = get(name)
        cells = json.loads((repo / "notebooks" / f"{spec.lesson}.ipynb").read_text())["cells"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        if counted(spec, H100):
            assert f"at least {NOT_SLOWER:g}x" in text and "simulator's count" in text, name
        else:
            assert f"at least {spec.speedup:g}x as fast as it on an H100 or H200" in text, name


def test_the_grader_counts_where_the_card_hides_the_lesson(monkeypatch):
    """session.Judge.measure: on a counted GPU it starts the simulator measurer and then the
    GPU counter with the same kernel (``load``) and hands their verdict to the judged GPU
    measurement - an unread GPU count fails there (strict); elsewhere it starts neither.
    (The GPU half runs in ``instructor/gpu/round.sh counted``.)"""
    from course.grading.judging import gpu_count, measurer_calls, session
    from course.grading.judging.settings import GradeSettings

    calls = {}

    def count(start, spec, load, seed, deadline):
        calls["count"] = (start(), spec.name, load, seed)
        return _count(True)

    def on_gpu(start, spec, load, seed, deadline, sim_figures=None):
        calls["gpu"] = (start(), spec.name, load, seed)
        return calls.get("gpu_says", "ERR_NVGPUCTRPERM")

    def measure(m, spec, **kw):
        counted = kw["counted"]  # made only when the time passes: here, always
        calls["measure"] = (m, spec.name, kw["mode"], counted() if counted else None)
        return _count(True)

    monkeypatch.setattr(measurer_calls, "count_in_simulator", count)
    monkeypatch.setattr(gpu_count, "count_on_gpu", on_gpu)
    monkeypatch.setattr(session, "judge_measure", measure)
    settings = GradeSettings(seed=3, mode="gpu")
    jd = session.Judge(
        settings,
        lambda: "gpu measurer",
        start_counter=lambda: "sim measurer",
        start_gpu_counter=lambda: "gpu counter",
    )
    load = {"op": "load", "unit": {"source": "..."}}
    for name, hides in (("tune_transpose", True), ("tune_matmul", False)):
        calls.clear()
        monkeypatch.setattr(session, "counted_here", lambda spec, h=hides: h)
        jd.measure("gpu measurer", get(name), load)
        assert calls["measure"][:3] == ("gpu measurer", name, "gpu")
        if hides:
            assert calls["count"] == ("sim measurer", name, load, 3)
            assert calls["gpu"] == ("gpu counter", name, load, 3)
            said = calls["measure"][3]
            assert not said.passed and "could not be read (ERR_NVGPUCTRPERM)" in said.message
            sim = {"shared_requests": 256, "sectors": 1024}
            ok = gpu_count.verdict(get(name), gpu_count.Counts(0, 1 << 20, 1 << 22, 1), sim)
            calls["gpu_says"] = ok
            jd.measure("gpu measurer", get(name), load)
            assert calls["measure"][3].passed, calls["measure"][3].message
        else:
            assert "count" not in calls and "gpu" not in calls and calls["measure"][3] is None


def test_a_rehearsal_report_names_the_card_it_was_judged_as(monkeypatch):
    from course.grading.classroom import solutions

    monkeypatch.delenv("COURSE_TUNE_CARD", raising=False)
    assert solutions._judged_as("NVIDIA H200") == []
    monkeypatch.setenv("COURSE_TUNE_CARD", "Tesla T4")
    line = "\n".join(solutions._judged_as("NVIDIA H200"))
    assert "as if on Tesla T4" in line and "measured on the NVIDIA H200" in line
