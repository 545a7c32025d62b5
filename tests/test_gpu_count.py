"""The GPU's own count on a counted card (issue #47; ``course/grading/judging/gpu_count.py``).

A red team passed the transpose (and, as if on an L4, the reduction) with kernels that run
the lesson's fix only where the simulator counts: ``(n << 60) >> 60 == n`` is true only
there, and ``g_idata.size <= 4096`` only at its small launch (``bench/grading_attacks.py``).
The fix reads the GPU's counters of the measured launch through Nsight Compute.  No CI
machine has a GPU or ncu, so here a stand-in ``ncu`` (a script taking the same command line)
runs the real measurer, in the simulator, through the real counter process and pipes, and
writes the table the real one writes; the real one's proof is
``instructor/gpu/round.sh counted`` (the attackers get 0 on an H200, as if on a T4 and L4).
"""

import csv
import io
import sys
import textwrap
import time
from pathlib import Path

import pytest

from course.exercises import get
from course.exercises.outcome import CaseResult
from course.exercises.tune_cards import CALIBRATION, counted
from course.grading.judging import gpu_count
from course.grading.wall import counter
from course.grading.wall.child import Child

HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
    '"Metric Value"'
)
BANK = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{}.sum"
INST = "smsp__sass_inst_executed_op_shared_{}.sum"
SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_{}.sum"
# the given transpose at 4096 x 4096 on an H200 (2026-11-29), and its fix: 0.0625 shared
# requests and 0.25 global sectors an element, as in the simulator's 64 x 64 launch
CONFLICTED = {
    BANK.format("ld"): "16,547,060",
    BANK.format("st"): "7,048",
    BANK.format("atom"): "0",
    INST.format("ld"): "524,288",
    INST.format("st"): "524,288",
    INST.format("atom"): "0",
    SECT.format("ld"): "2,097,152",
    SECT.format("st"): "2,097,152",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "16,557,968",  # no family: unread
    "gpu__time_duration.sum": "90,240",
}
CLEAN = dict(CONFLICTED, **{BANK.format("ld"): "15,448", BANK.format("st"): "8,258"})
SIM = {"shared_requests": 256, "sectors": 1024, "replays": 0}  # the solution, 64 x 64


def table(*kernels: dict, name: str = 'transpose_fast[v1,cw51"x"](Array<float, 2>)') -> str:
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for i, metrics in enumerate(kernels):
        for metric, value in metrics.items():
            w.writerow(
                [i, 727, "python3.12", "127.0.0.1", name, 1, 7, "(32, 8, 1)", "(2, 2, 1)", 0]
                + ["9.0", "Command line profiler metrics", metric, "", value]
            )
    return "==PROF== Connected to process 727\n" + HEAD + "\n" + out.getvalue()


def test_parse_sums_every_profiled_launch_and_every_kind_of_access():
    c = gpu_count.parse(table(CONFLICTED, CLEAN))
    assert (c.replays, c.requests, c.kernels) == (16_554_108 + 23_706, 4 * 524_288, 2)
    assert c.sectors == 4 * 2_097_152


@pytest.mark.parametrize(
    "text,why",
    [
        ("", "wrote no counters"),
        ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "ERR_NVGPUCTRPERM"),
        (HEAD + "\n", "no launch was profiled"),
        (table(dict(CLEAN, **{BANK.format("ld"): "-5"})), "not a count"),
        (table(dict(CLEAN, **{BANK.format("ld"): "n/a"})), "not a count"),
        (table(dict(CLEAN, **{BANK.format("ld"): "1e9"})), "not a count"),
        (table({k: v for k, v in CLEAN.items() if "global" not in k}), "no sectors counter"),
        (table(*[CLEAN] * (gpu_count.MAX_KERNELS + 1)), "launches were profiled"),
    ],
)
def test_a_table_that_is_not_counts_is_unreadable_never_a_pass(text, why):
    with pytest.raises(gpu_count.Unreadable, match=why):
        gpu_count.parse(text)


def _counts(replays=0, requests=1_048_576, sectors=4_194_304):
    return gpu_count.Counts(replays, requests, sectors, 1)


def test_the_verdict_forgives_only_the_slack():
    spec = get("tune_transpose")
    assert gpu_count.verdict(spec, _counts(0), SIM).passed
    at = int(gpu_count.SLACK * 1_048_576)
    assert gpu_count.verdict(spec, _counts(at), SIM).passed
    over = gpu_count.verdict(spec, _counts(at + 1), SIM)
    assert not over.passed and "at most" in over.message
    given = gpu_count.verdict(spec, gpu_count.parse(table(CONFLICTED)), SIM)
    assert not given.passed and "16,554,108 bank-conflict replays" in given.message
    fixed = gpu_count.verdict(spec, gpu_count.parse(table(CLEAN)), SIM)
    assert fixed.passed, fixed.message


ATTACKS = {  # the GPU path of a kernel whose simulator path is the fix (red team, H200)
    # the given tile, its conflicted reads as cuda.atomic.exch: ATOMS, not LDS
    "conflicts in atomics": {
        **CLEAN,
        BANK.format("atom"): "16,526,970",
        INST.format("ld"): "0",
        INST.format("atom"): "524,288",
    },
    # no shared memory at all, reads strided (faster than the fix on an H200: 75 us)
    "no shared memory": {
        **CLEAN,
        **{INST.format(op): "0" for op in ("ld", "st")},
        SECT.format("ld"): "16,777,216",
    },
    # the given tile diluted: 62x more conflict-free shared loads than the fix makes
    "diluted conflicts": {**CONFLICTED, INST.format("ld"): str(62 * 524_288)},
    # the fix's shared traffic as dummies beside the strided transpose
    "dummy tile, strided reads": {**CLEAN, SECT.format("ld"): "16,777,216"},
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_gpu_path_other_than_the_counted_kernel_fails(name):
    res = gpu_count.verdict(get("tune_transpose"), gpu_count.parse(table(ATTACKS[name])), SIM)
    assert not res.passed, (name, res.message)


def test_the_runs_must_agree_per_element_within_the_bound():
    spec = get("tune_transpose")
    bound = gpu_count.AGREE["requests"][1]
    assert gpu_count.verdict(spec, _counts(requests=int(1_048_576 * bound)), SIM).passed
    more = gpu_count.verdict(spec, _counts(requests=int(1_048_576 * bound * 1.01)), SIM)
    assert not more.passed and "shared-memory requests per element" in more.message
    fewer = gpu_count.verdict(spec, _counts(sectors=int(4_194_304 / 1.6)), SIM)
    assert not fewer.passed and "global-memory sectors per element" in fewer.message
    blind = gpu_count.verdict(spec, _counts(), {"replays": 0})  # no figure to compare
    assert not blind.passed and "gave no" in blind.message
    both_none = gpu_count.verdict(spec, _counts(requests=0), dict(SIM, shared_requests=0))
    assert both_none.passed  # no shared memory in either run (warp shuffles): agreed


def test_every_counted_card_has_a_gpu_counter():
    """A card where a count decides must be able to read that count from the GPU."""
    for name, cal in CALIBRATION.items():
        spec = get(name)
        if any(counted(spec, card) for card in [*cal, "Some New GPU"]):
            assert gpu_count.has_counter(spec), name


def _sim(passed: bool) -> CaseResult:
    res = CaseResult("timed launch (simulator)", "", timed=True)
    res.message = "shared-memory replays: measured 0, target <= 0"
    if not passed:
        res.fail("shared-memory replays: measured 4096, target <= 0")
    return res


def test_both_counts_decide_and_an_unread_gpu_count_is_said():
    gpu_ok = gpu_count.verdict(get("tune_transpose"), _counts(0), SIM)
    gpu_bad = gpu_count.verdict(get("tune_transpose"), _counts(900_000), SIM)
    assert gpu_count.confirmed(_sim(True), gpu_ok, strict=True).passed
    res = gpu_count.confirmed(_sim(True), gpu_bad, strict=False)  # the attack: sim says 0
    assert not res.passed and "this GPU's own count: 900,000" in res.message
    assert not gpu_count.confirmed(_sim(False), gpu_ok, strict=True).passed
    graded = gpu_count.confirmed(_sim(True), "ERR_NVGPUCTRPERM", strict=True)
    assert not graded.passed and "NVreg_RestrictProfilingToAdminUsers=0" in graded.message
    notebook = gpu_count.confirmed(_sim(True), "ERR_NVGPUCTRPERM", strict=False)
    assert notebook.passed and "not confirmed on this GPU" in notebook.message


FAKE_NCU = """#!{python}
# a stand-in for Nsight Compute: the same command line, the target run with its pipes
import subprocess, sys
args = sys.argv[1:]
assert args[args.index("--profile-from-start") + 1] == "off"
log = args[args.index("--log-file") + 1]
target = args[args.index("--log-file") + 2 :]
if {start}:
    subprocess.run(target, pass_fds=(int(target[-2]), int(target[-1])))
{said}
open(log, "w").write({table!r})
"""


def _fake(tmp_path: Path, tbl: str = "", start: bool = True, said: str = "") -> Path:
    p = tmp_path / "nsight-compute-fake" / "ncu"
    p.parent.mkdir(exist_ok=True)
    text = FAKE_NCU.format(python=sys.executable, start=start, said=said, table=tbl)
    p.write_text(textwrap.dedent(text))
    p.chmod(0o755)
    return p


def _count_with(tmp_path: Path, ncu: str, student: bool = False, strict: bool = False):
    """The counted verdict as ``check._count`` and the grader build it: the simulator's
    measurer, then the counter process running the measurer under ``ncu``."""
    from course.grading.classroom.solutions import defined
    from course.grading.judging.measurer_calls import SIM_ENV
    from course.grading.source.unit import extract

    spec = get("tune_transpose")
    fn, _ = defined(spec.name, student=student)
    load = {"op": "load", "unit": extract(fn, spec.launch_names)}
    deadline = time.monotonic() + 120
    tmp_path.mkdir(parents=True, exist_ok=True)

    def child(module, name, env):
        return Child(module, tmp_path / name, deadline, 0, 120, None, None, env)

    sim = lambda: child("course.grading.wall.measurer", "m", SIM_ENV)  # noqa: E731
    gpu = lambda: child(counter.COUNTER, "g", dict(SIM_ENV, **{counter.NCU_VAR: ncu}))  # noqa: E731
    orig = gpu_count.count_on_gpu

    def in_sim(start, spec, load, seed, deadline, **kw):  # the measurer: the simulator's
        return orig(start, spec, load, seed, deadline, mode="sim", **kw)

    gpu_count.count_on_gpu, saved = in_sim, orig
    try:
        return gpu_count.counted_verdict(sim, gpu, spec, load, 5, deadline, strict)
    finally:
        gpu_count.count_on_gpu = saved


def test_the_counter_process_runs_the_measurer_under_ncu_and_reads_its_table(tmp_path):
    """The real counter and measurer processes and pipes: the solution's launch is judged,
    then the table decides - 0 replays pass, the attack's replays fail."""
    clean = _count_with(tmp_path / "a", str(_fake(tmp_path, table(CLEAN))), strict=True)
    assert clean.passed and "this GPU's own count: 23,706 bank-conflict replays" in clean.message
    attacked = _count_with(tmp_path / "b", str(_fake(tmp_path, table(CONFLICTED))))
    assert not attacked.passed and "16,554,108 bank-conflict replays" in attacked.message
    other = _count_with(tmp_path / "c", str(_fake(tmp_path, table(ATTACKS["no shared memory"]))))
    assert not other.passed and "did not run what the simulator counted" in other.message


def test_counters_that_cannot_be_read_are_said_and_the_grader_does_not_pass(tmp_path):
    denied = _fake(tmp_path, "", said='print("==ERROR== ERR_NVGPUCTRPERM - no permission")')
    graded = _count_with(tmp_path / "a", str(denied), strict=True)
    assert not graded.passed and "ERR_NVGPUCTRPERM" in graded.message
    assert "NVreg_RestrictProfilingToAdminUsers=0" in graded.message
    missing = _count_with(tmp_path / "b", str(tmp_path / "no-ncu"))
    assert missing.passed and "ncu) is not installed" in missing.message
    never = _count_with(tmp_path / "c", str(_fake(tmp_path, table(CLEAN), start=False)))
    assert never.passed and "without starting the measurer" in never.message


def test_the_given_kernel_fails_on_the_simulator_count_before_any_gpu_count(tmp_path):
    res = _count_with(tmp_path, str(tmp_path / "never-asked"), student=True, strict=True)
    assert not res.passed and "this GPU's own count" not in res.message


def test_the_sandbox_binds_ncus_folder_read_only(tmp_path, monkeypatch):
    from course.grading.wall import isolate

    ncu = _fake(tmp_path, "")
    monkeypatch.setenv(counter.NCU_VAR, str(ncu))
    assert counter.find_ncu() == ncu.resolve() and counter.ncu_env()[counter.NCU_VAR] == str(
        ncu.resolve()
    )
    ops = isolate.plan([], tmp_path / "run")
    assert ("bind", ncu.parent.resolve(), "") in ops
    monkeypatch.setenv(counter.NCU_VAR, str(tmp_path / "absent"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert counter.find_ncu() is None or "nsight-compute" in str(counter.find_ncu())


def test_one_profiler_at_a_time_on_a_gpu(tmp_path, monkeypatch):
    """A second Nsight Compute session on a GPU reads nothing (notebook 02's profile cell
    came back empty beside notebook 10's count): the count waits for the profiler lock,
    within the submission's deadline, and course.profile's ncu takes the same lock."""
    from course.hardware import ncu
    from course.platform.gpu_lock import device_lock

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    started = []
    spec, load = get("tune_transpose"), {"op": "load", "unit": {}}
    with device_lock(purpose=gpu_count.PROFILER):
        why = gpu_count.count_on_gpu(started.append, spec, load, 1, time.monotonic() + 0.3)
        assert why == "another profiler kept this GPU busy past the time limit" and not started
        monkeypatch.setattr(ncu, "find", lambda: "/bin/true")
        with pytest.raises(ncu.NcuError, match="another profiler session"):
            ncu.run(tmp_path / "payload", 0.3, 1, "none")


def test_a_count_slow_under_the_profiler_holds_the_lock_a_bounded_time(tmp_path, monkeypatch):
    """The count holds the profiler lock at most PROFILE_S: past it, the exercise fails with
    a sentence (the kernel's own slowness), and the next submission's count can start."""
    monkeypatch.setattr(gpu_count, "PROFILE_S", 1.0)
    slow = _fake(tmp_path, table(CLEAN), said="import time; time.sleep(30)")
    t = time.monotonic()
    res = _count_with(tmp_path / "a", str(slow), strict=True)
    assert not res.passed and "the GPU count ran past its 1 s" in res.message
    assert time.monotonic() - t < 25


def test_the_recorded_h200_counts_pass_the_solutions_and_fail_the_rest():
    """Nsight Compute's counts of every kernel on an H200 (``round.sh counted``, 2026-11-29):
    with the simulator's figures of the same kernels (their simulator path is the lesson's
    tiling), only the course's solutions pass - the given kernels and every attacker fail.
    A SLACK or AGREE loosened past what the hardware shows fails here."""
    import json

    from course.platform.resources import path

    rec = json.loads(
        path("assets", "profiles", "gpu-count-nvidia-h200-2026-11-29.json").read_text()
    )
    sim = {  # the simulator's counts of the fix (and of the given tile: the same traffic)
        "tune_transpose": {"shared_requests": 256, "sectors": 1024},
        "tune_reduction": {"shared_requests": 368, "sectors": 144},
    }
    assert len(rec) == 9
    for key, entry in rec.items():
        name, which = key.split(" ", 1)
        (counts,) = entry["counts"]
        res = gpu_count.verdict(get(name), gpu_count.Counts(**counts), sim[name])
        assert res.passed is (which == "solution"), (key, res.message)
