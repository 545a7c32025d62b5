"""Warm sandboxes (``course/grading/zygote.py``, ``forks.py``): each fork of a zygote is a
fresh sandbox, nothing one submission does reaches the next fork, and no fork can see,
signal or talk to the zygote.  Cells run in real sandboxed workers (``Child`` on an
``Isolation`` with ``Forks``), as in ``test_sandbox.py``; and the profile's bounds."""

import math
import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("grade-sandbox")


class Cells:
    """A worker forked from the zygote; ``cells(src)`` runs a cell and returns ``result``."""

    def __init__(self, isolation, run_dir: Path):
        import tempfile

        from course.grading.child import Child

        tmp = Path(tempfile.mkdtemp(dir=run_dir)) / "worker"
        self.child = Child(
            "course.grading.worker", tmp, time.monotonic() + 120, 4096, 120, isolation
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
    from course.grading import isolate
    from course.grading.forks import Forks

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
    from course.grading.child import child_env

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
