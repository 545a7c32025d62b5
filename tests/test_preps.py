"""A grading run's shared case inputs (course/grading/judging/preps.py): made once per key by one
judge while the others wait, read-only, bounded in bytes, and used only by class runs."""

import threading

import numpy as np
import pytest
from test_vector_add import solution_add, writes_only_even_indices

from course.exercises import get
from course.grading.judging import cases, judge, preps
from course.grading.judging.settings import GradeSettings

SPEC = get("vector_add")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    preps.clear()
    made = []
    real = judge.prepare

    def counting(spec, case, rng, guard=True):
        made.append((case.name, guard))
        return real(spec, case, rng, guard)

    monkeypatch.setattr(judge, "prepare", counting)
    yield made
    preps.clear()


def test_a_class_makes_each_case_once_and_judges_as_before(_fresh):
    alone = cases.run_cases(SPEC, solution_add, 7, False, None)
    n = len(_fresh)
    first = cases.run_cases(SPEC, solution_add, 7, False, None, shared=True)
    again = cases.run_cases(SPEC, solution_add, 7, False, None, shared=True)
    assert len(_fresh) == 2 * n  # the plain run and the first shared run; never the second
    assert [r.passed for r in first] == [r.passed for r in again] == [r.passed for r in alone]
    wrong = cases.run_cases(SPEC, writes_only_even_indices, 7, False, None, shared=True)
    assert not all(r.passed for r in wrong) and len(_fresh) == 2 * n  # same inputs, judged
    cases.run_cases(SPEC, solution_add, 8, False, None, shared=True)  # another seed
    assert len(_fresh) == 3 * n


def test_kept_inputs_and_references_are_read_only():
    case = SPEC.cases()[0]
    prep = preps.prepare(SPEC, case, (False, 1, 0), lambda: cases.case_rng(1, 0))
    arrays = [v for part in (prep.host, prep.expected) for v in part.values()]
    arrays = [a for a in arrays if isinstance(a, np.ndarray)]
    assert arrays
    for a in arrays:
        with pytest.raises(ValueError):
            a[...] = 0
    bufs = prep.buffers()  # each launch still gets buffers of its own
    assert all(b.flags.writeable for b in bufs.values())


def test_judges_asking_at_once_wait_for_one_maker(_fresh):
    case = SPEC.cases()[-1]
    got = []

    def ask():
        got.append(preps.prepare(SPEC, case, (False, 3, 9), lambda: cases.case_rng(3, 9)))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 6 and all(g is got[0] for g in got) and len(_fresh) == 1


def test_what_is_kept_stays_under_its_byte_limit(monkeypatch):
    case = SPEC.cases()[-1]
    one = preps.prepare(SPEC, case, ("size", 0), lambda: cases.case_rng(0, 0))
    size = sum(
        v.nbytes for p in (one.host, one.expected) for v in p.values() if hasattr(v, "nbytes")
    )
    preps.clear()
    monkeypatch.setattr(preps, "LIMIT_BYTES", 2 * size)
    for seed in range(5):
        preps.prepare(SPEC, case, ("size", seed), lambda s=seed: cases.case_rng(s, 0))
        assert preps._held <= preps.LIMIT_BYTES and len(preps._kept) <= 2
    monkeypatch.setattr(preps, "LIMIT_BYTES", size - 1)  # too big to keep at all: made, not kept
    preps.clear()
    preps.prepare(SPEC, case, ("size", 99), lambda: cases.case_rng(99, 0))
    assert preps._held == 0 and not preps._kept


def test_only_a_class_run_shares_inputs():
    from types import SimpleNamespace

    opts = SimpleNamespace(
        memory_mb=None,
        seed=5,
        timeout=60.0,
        case_time_limit=None,
        lesson=None,
        all_or_nothing=False,
        isolation_choice="none",
    )
    assert GradeSettings.from_args(opts, "sim", None, None).shared_inputs is True
    assert GradeSettings(seed=1, mode="sim").shared_inputs is False  # the leaderboard's


def test_a_run_times_only_the_given_kernels_of_the_lessons_handed_in(monkeypatch):
    """#45: the grader times the starters of the lessons in the class before any worker
    starts - all of them only when a submission's lesson is unknown."""
    from types import SimpleNamespace

    from course.grading.classroom import prepare
    from course.grading.judging import starter
    from course.grading.wall import measurer

    plans = {
        "01_vector_add": SimpleNamespace(exercises={"vector_add": 0, "tune_vector_add": 0}),
        "04_matmul": SimpleNamespace(exercises={"tune_matmul": 0}),
    }
    subs = [SimpleNamespace(lesson="01_vector_add")] * 3
    assert prepare.handed_in(subs, plans) == {"vector_add", "tune_vector_add"}
    assert prepare.handed_in(subs + [SimpleNamespace(lesson=None)], plans) is None
    assert prepare.handed_in([SimpleNamespace(lesson="99_new")], plans) is None
    timed = []
    monkeypatch.setattr(prepare, "_MEASURED", {})
    monkeypatch.setattr(measurer, "measure_ceilings", lambda: {"copy_gbps": 1, "fp32_tflops": 1})
    monkeypatch.setattr(starter, "time_all", lambda names=None: timed.append(names) or {})
    prepare.ceilings_once("gpu", {"tune_vector_add"})
    prepare.ceilings_once("gpu", {"tune_matmul"})  # once per process
    assert timed == [{"tune_vector_add"}]


def test_the_gate_takes_the_first_cases_inputs_from_the_run(_fresh, monkeypatch):
    """The compile gate's launch types come from the first case; in a class run those
    inputs are the store's (the same key and seed as run_cases' first case)."""
    from course.grading.source.unit import extract

    class Compiler:  # the types are what matters here, not the compile
        def check(self, unit, calls):
            return None

    unit = extract(solution_add)
    assert cases.gate_error(SPEC, unit, 5, Compiler(), shared=True) is None
    assert len(_fresh) == 1
    cases.run_cases(SPEC, solution_add, 5, False, None, shared=True)
    assert _fresh.count(_fresh[0]) == 1  # the first case was not made again
    assert cases.gate_error(SPEC, unit, 5, Compiler()) is None  # notebook: its own
    assert len(_fresh) == len(SPEC.cases()) + 1


def test_the_processes_of_one_run_on_one_gpu_measure_it_once(monkeypatch, tmp_path):
    """#45 (Dask): every worker process of a run on a GPU used to measure the ceilings and
    time the given kernels itself, one after another under the GPU lock.  Now the first
    measures and keeps the figures beside the lock files; the others read them; another
    run, or another GPU, measures again."""
    from course.grading.classroom import prepare
    from course.grading.judging import starter
    from course.grading.wall import measurer

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    measured, timed = [], []

    def measure():
        measured.append(1)
        return {"copy_gbps": 100.0 + len(measured), "fp32_tflops": 2.0}

    def time_all(names=None):
        out = {}
        for n in sorted(names or ()):
            if ("card", n) not in starter._TIMED:
                timed.append(n)
                starter._TIMED[("card", n)] = {"ms": 1.5, "median_ms": 1.6}
            out[n] = starter._TIMED[("card", n)]["ms"]
        return out

    monkeypatch.setattr(measurer, "measure_ceilings", measure)
    monkeypatch.setattr(starter, "time_all", time_all)

    def new_process(gpu="0"):  # what a fresh Dask worker process starts from
        monkeypatch.setattr(prepare, "_MEASURED", {})
        monkeypatch.setattr(starter, "_TIMED", {})
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpu)

    new_process()
    first = prepare.ceilings_once("gpu", {"tune_vector_add"}, run=41)
    new_process()
    second = prepare.ceilings_once("gpu", {"tune_vector_add"}, run=41)
    assert first == second == {"copy_gbps": 101.0, "fp32_tflops": 2.0}
    assert measured == [1] and timed == ["tune_vector_add"]
    assert starter._TIMED == {("card", "tune_vector_add"): {"ms": 1.5, "median_ms": 1.6}}
    new_process()  # a lesson the first process did not time: only that one is timed
    prepare.ceilings_once("gpu", {"tune_vector_add", "tune_matmul"}, run=41)
    assert measured == [1] and timed == ["tune_vector_add", "tune_matmul"]
    new_process()  # another run
    assert prepare.ceilings_once("gpu", {"tune_vector_add"}, run=42)["copy_gbps"] == 102.0
    new_process("1")  # another GPU of the same run
    assert prepare.ceilings_once("gpu", {"tune_vector_add"}, run=41)["copy_gbps"] == 103.0
    kept = sorted(p.name for p in (tmp_path / "course-locks").glob("*.json"))
    assert kept == ["gpu-0.run-41.json", "gpu-0.run-42.json", "gpu-1.run-41.json"]
    assert all((tmp_path / "course-locks" / k).stat().st_mode & 0o077 == 0 for k in kept)


def test_warm_sandboxes_import_what_the_set_up_cells_import():
    """The run's zygote imports the modules the lessons' set-up cells name (and never
    anything a submission wrote): read from the instructor's plans."""
    from types import SimpleNamespace as NS

    from course.grading.classroom import prepare

    cells = [
        NS(source="%matplotlib inline\nimport numpy as np\nfrom course.show import plots, widgets"),
        NS(source="from numba import cuda\nfrom .x import y\nfrom m import *\nx = 1"),
        NS(source="def broken(:"),
    ]
    got = prepare.cell_imports({"01": NS(setup=cells)})
    want = ("course.show", "course.show.plots", "course.show.widgets", "m")
    assert got == tuple(sorted(want + ("numba", "numba.cuda", "numpy")))
