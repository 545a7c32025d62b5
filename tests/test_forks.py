"""Warm sandboxes (``course/grading/wall/zygote.py``, ``forks.py``): each fork of a zygote is a
fresh sandbox, nothing one submission does reaches the next fork, and no fork can see,
signal or talk to the zygote.  Cells run in real sandboxed workers (``Child`` on an
``Isolation`` with ``Forks``), as in ``test_sandbox.py``; and the profile's bounds."""

import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("grade-sandbox")


class Cells:
    """A worker forked from the zygote; ``cells(src)`` runs a cell and returns ``result``."""

    def __init__(self, isolation, run_dir: Path):
        import tempfile

        from course.grading.wall.child import Child

        tmp = Path(tempfile.mkdtemp(dir=run_dir)) / "worker"
        self.child = Child(
            "course.grading.wall.worker", tmp, time.monotonic() + 120, 4096, 120, isolation
        )
        self.child.greeted()
        self.step = 0

    def __call__(self, source: str):
        self.step += 1
        reply, _ = self.child.ask(
            {"op": "run", "step": self.step, "label": "cell", "source": source}, "ran", self.step
        )
        assert reply["error"] is None, reply["error"]
        reply, _ = self.child.ask(
            {"op": "value", "step": self.step, "name": "result"}, "value", self.step
        )
        return reply.get("value")


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    from course.grading.wall import isolate
    from course.grading.wall.forks import Forks

    run_dir = tmp_path_factory.mktemp("forks")
    iso, said = isolate.make([], run_dir)
    if iso is None:
        pytest.skip(said)
    notes: list = []
    iso.forks = Forks(iso, log=notes.append)
    yield iso, run_dir, notes
    iso.forks.close()


PLANT = """
import os, sys, course, numba
course.PLANTED_BY_ANOTHER = 1
numba.config.PLANTED_BY_ANOTHER = 1
sys.modules["json"].PLANTED_BY_ANOTHER = 1
os.environ["PLANTED_BY_ANOTHER"] = "1"
for p in ("/tmp/planted", os.environ["HOME"] + "/planted", os.environ["NUMBA_CACHE_DIR"] + "/planted"):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "w").write("x")
result = "planted"
"""
LOOK = """
import os, sys, course, numba
result = [
    hasattr(course, "PLANTED_BY_ANOTHER"),
    hasattr(numba.config, "PLANTED_BY_ANOTHER"),
    hasattr(sys.modules["json"], "PLANTED_BY_ANOTHER"),
    "PLANTED_BY_ANOTHER" in os.environ,
    any(os.path.exists(p) for p in ("/tmp/planted", os.environ["HOME"] + "/planted",
        os.environ["NUMBA_CACHE_DIR"] + "/planted")),
]
"""


@pytest.mark.timeout(300)
def test_nothing_one_fork_does_reaches_the_next(warm):
    iso, run_dir, notes = warm
    first = Cells(iso, run_dir)
    assert first.child.forked, notes  # a warm sandbox, not a cold start
    assert first(PLANT) == "planted"
    assert first(LOOK) == [True] * 5  # the look sees what is there (it can fail)
    first.child.stop()
    second = Cells(iso, run_dir)
    assert second.child.forked
    assert second(LOOK) == [False] * 5
    second.child.stop()


@pytest.mark.timeout(300)
def test_a_fork_cannot_see_signal_or_talk_to_its_zygote(warm):
    iso, run_dir, notes = warm
    cells = Cells(iso, run_dir)
    zygote = iso.forks.zygotes["run"]
    got = cells(
        f"""
import os, signal
pids = [p for p in os.listdir("/proc") if p.isdigit()]
killed = []
for pid in range(2, 1 << 15):        # every pid there is: only its own namespace's answer
    try:
        os.kill(pid, signal.SIGKILL if pid != os.getpid() else 0)
        killed.append(pid)
    except OSError:
        pass
try:
    os.kill({zygote.proc.pid}, 0)
    zygote_seen = True
except OSError:
    zygote_seen = False
fds = []
for f in os.listdir("/proc/self/fd"):
    try:
        fds.append(os.readlink("/proc/self/fd/" + f))
    except OSError:
        pass      # the listing's own descriptor, closed already
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
result = [len(pids), zygote_seen, [f for f in fds if f.startswith("socket")],
          int(status["CapEff"], 16), int(status["NoNewPrivs"]), os.getpid()]
"""
    )
    n_pids, zygote_seen, sockets, cap_eff, no_new_privs, pid = got
    assert n_pids <= 3 and pid == 1  # its own PID namespace: itself (and what it started)
    assert not zygote_seen and sockets == []
    assert cap_eff == 0 and no_new_privs == 1
    cells.child.stop()
    assert zygote.proc.poll() is None  # alive, and still forking
    again = Cells(iso, run_dir)
    assert again.child.forked and again("result = 2") == 2
    again.child.stop()


@pytest.mark.timeout(300)
def test_the_probe_rejects_a_fork_that_keeps_the_zygotes_environment(warm):
    """The probe (what decides whether forks are used at all) can fail: a fork given the
    zygote's own environment, planted variable included, is refused."""
    from course.grading.wall.child import child_env

    iso, _run_dir, _ = warm
    z = iso.forks.zygotes["run"]
    env = child_env(Path(iso.scratch))
    assert iso.forks._probe(z, env) == ""
    leaky = dict(env, COURSE_SANDBOX_PROBE_PLANTED="planted")
    assert "environment" in iso.forks._probe(z, leaky)


def test_reported_times_are_bounded_numbers():
    from course.grading.phases import reported

    assert reported(1.5, 10) == 1.5
    for bad in (True, -1, 11, math.nan, math.inf, "1", None, [1]):
        assert reported(bad, 10) is None


def test_phases_are_exclusive():
    from course.grading.phases import Phases

    ph = Phases()
    with ph.timed("outer"):
        time.sleep(0.05)
        with ph.timed("inner"):
            time.sleep(0.05)
        ph.moved("moved", 0.02)
    s = ph.seconds
    assert 0.045 <= s["inner"] < 0.2 and s["moved"] == 0.02
    assert 0.025 <= s["outer"] < 0.2  # its own 0.05, less the 0.02 moved out
    assert abs(sum(s.values()) - (s["outer"] + 0.05 + 0.02)) < 0.03
    assert os.getpid()  # (nothing started)


# ---------------------------------------------------------------------------------------
# a student's attacks on the zygote and on the forks beside and after it (issue #45)

SHM = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
result = libc.shmget(0x4C45, 4096, {flags})
"""


@pytest.mark.timeout(300)
def test_no_system_v_ipc_between_forks(warm):
    """Shared memory made by one fork (alive, or ended: a segment outlives its maker) is not
    there for another: each fork has its own IPC namespace."""
    iso, run_dir, _ = warm
    maker, other = Cells(iso, run_dir), Cells(iso, run_dir)
    assert maker(SHM.format(flags=0o1000 | 0o666)) >= 0  # IPC_CREAT: it can make one
    assert maker(SHM.format(flags=0)) >= 0  # and find it again (the look can succeed)
    assert other(SHM.format(flags=0)) == -1  # a fork beside it cannot
    maker.child.stop()
    later = Cells(iso, run_dir)
    assert later(SHM.format(flags=0)) == -1  # nor one after it
    other.child.stop()
    later.child.stop()


@pytest.mark.timeout(300)
def test_a_fork_cannot_ptrace_the_zygote_nor_write_its_tree(warm):
    from course.platform.resources import PACKAGE

    iso, run_dir, _ = warm
    zygote = iso.forks.zygotes["run"]
    cells = Cells(iso, run_dir)
    got = cells(
        f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
traced = [libc.ptrace(16, pid, 0, 0) for pid in ({zygote.proc.pid}, os.getppid() or 0)]
written = []
for p in ({str(PACKAGE)!r} + "/planted.py", {str(PACKAGE)!r} + "/__pycache__/planted.pyc",
          "/proc/{zygote.proc.pid}/mem"):
    try:
        open(p, "wb").write(b"x")
        written.append(p)
    except OSError:
        pass
result = [traced, written, os.getppid()]
"""
    )
    assert got == [[-1, -1], [], 0]  # PTRACE_ATTACH refused; nothing written; no parent seen
    cells.child.stop()
    assert not (PACKAGE / "planted.py").exists()


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


@pytest.mark.timeout(300)
def test_a_fork_bomb_and_a_hung_fork_end_with_the_fork(warm, monkeypatch):
    """Processes a fork starts (a bomb, a child that ignores SIGTERM and keeps the pipes)
    end when the grader stops it; the zygote keeps none of them, stays one thread, and
    forks the next sandbox at once.  (A GPU's sandboxes may start processes; a simulator's
    may not, ``tree.SPAWN``.)"""
    from test_sandbox import gpu_like

    gpu_like(monkeypatch)
    iso, run_dir, _ = warm
    zygote = iso.forks.zygotes["run"]
    cells = Cells(iso, run_dir)
    started = cells(
        """
import os, signal, time
n = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
        os._exit(0)
    n += 1
result = n
"""
    )
    assert started > 0
    assert len(_descendants(zygote.proc.pid)) > started  # the look sees them (it can fail)
    cells.child.stop()
    deadline = time.monotonic() + 20
    while _descendants(zygote.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _descendants(zygote.proc.pid) == []
    assert len(list(Path(f"/proc/{zygote.proc.pid}/task").iterdir())) == 1
    t0 = time.monotonic()
    again = Cells(iso, run_dir)
    assert again("result = 3") == 3 and time.monotonic() - t0 < 60
    again.child.stop()


@pytest.mark.timeout(300)
def test_the_graders_secrets_are_nowhere_in_a_fork(tmp_path, monkeypatch):
    """A token in the grader's environment is not in a fork's environment, nor in the
    environment block it inherits from its zygote (``/proc/self/environ``), nor in its
    command line: the zygote starts with the children's allowlist only."""
    from course.grading.wall import isolate
    from course.grading.wall.forks import Forks

    monkeypatch.setenv("COURSE_LEADERBOARD_TOKEN", "tok-s3cr3t-4512")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-s3cr3t-4512")
    iso, said = isolate.make([], tmp_path)
    if iso is None:
        pytest.skip(said)
    iso.forks = Forks(iso, log=print)
    try:
        cells = Cells(iso, tmp_path)
        assert cells.child.forked
        got = cells(
            """
import os
blob = b"".join(open(f"/proc/self/{n}", "rb").read() for n in ("environ", "cmdline"))
result = [b"s3cr3t-4512" in blob, "s3cr3t-4512" in repr(dict(os.environ)), len(blob) > 0]
"""
        )
        assert got == [False, False, True]
        cells.child.stop()
    finally:
        iso.forks.close()


def test_a_measurers_step_times_are_taken_only_as_bounded_known_numbers():
    from course.grading.phases import steps

    known = ("compile", "launches")
    assert steps({"compile": 1.0, "launches": 2.0}, 5.0, known) == {"compile": 1.0, "launches": 2.0}
    for bad in (
        None,
        [("compile", 1.0)],
        {"compile": 1.0, "other": 1.0},  # a step it does not have
        {"compile": -1.0},
        {"compile": math.nan},
        {"compile": True},
        {"compile": 6.0},  # longer than the judge waited
        {"compile": 3.0, "launches": 3.0},  # together longer
    ):
        assert steps(bad, 5.0, known) == {}, bad


def test_a_fork_is_reaped_once_whichever_thread_comes_first():
    """A job's thread and an interrupted run's stop may both wait for the same fork."""
    from course.grading.wall.forks import Forked

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    asked = []

    class Zygote:
        def ask(self, request):
            asked.append(request)
            proc.wait()
            return {"status": proc.returncode}

    f = Forked(Zygote(), proc.pid)  # type: ignore[arg-type]
    threads = [threading.Thread(target=f.wait) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    f.kill()
    assert f.wait() == 0 and f.poll() == 0 and f.pidfd == -1 and len(asked) == 1


def test_a_job_cut_off_by_the_runs_stop_is_interrupted_not_a_grader_failure(monkeypatch):
    """What a stopped run's job threads still see (a closed pipe: ValueError) is its stop."""
    from course.grading.classroom.batch import grade_one, load_plans
    from course.grading.classroom.intake import collect
    from course.grading.judging import session
    from course.grading.judging.settings import GradeSettings
    from course.grading.wall import child

    repo = Path(__file__).resolve().parents[1]
    plans = load_plans(repo / "notebooks")
    sub = collect([repo / "tests" / "fixtures" / "submissions" / "correct"])[0]

    def cut_off(steps, settings, on_stage=None):
        raise ValueError("file descriptor cannot be a negative integer")

    monkeypatch.setattr(session, "grade_steps", cut_off)
    settings = GradeSettings(seed=1, mode="sim")
    g = grade_one(sub, plans, settings)
    assert g.status == "error" and "the grader failed" in " ".join(g.reasons), g.reasons
    monkeypatch.setattr(child, "INTERRUPTED", threading.Event())
    child.INTERRUPTED.set()
    g = grade_one(sub, plans, settings)
    assert g.status == "interrupted" and "stopped" in g.reasons[-1], g.reasons


def test_the_run_zygote_warms_the_compiler_without_a_device():
    """``zygote.warm_compiler`` (the run zygote, GPU mode) loads NVVM by compiling to PTX for a
    named GPU: in a fresh real-compiler process NVVM is loaded after it, not before; and it
    neither asks for a device nor starts the driver (a context would not survive the fork:
    both are spied on)."""
    import subprocess
    import sys

    code = """
import os
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
from numba.cuda.cudadrv import devices, driver, nvvm
asked = []
devices.get_context = lambda *a, **k: asked.append("device")
driver.Driver.ensure_initialized = lambda self: asked.append("driver")
before = getattr(nvvm.NVVM, "_NVVM__INSTANCE", None) is not None
from course.grading.wall.zygote import warm_compiler
warm_compiler()
print(before, getattr(nvvm.NVVM, "_NVVM__INSTANCE", None) is not None, len(asked))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "True", "0"], r.stdout + r.stderr[-2000:]
