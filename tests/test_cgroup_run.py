"""All sandboxes of one grading process share one parent cgroup that keeps them to a share
of the machine's memory and half its process ids, however many jobs run at once."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

PROBE = """
import json, os
from course.grading.wall.cgroup import Cgroup, run_limits
a, b = Cgroup("course-test-a"), Cgroup("course-test-b", 512)
out = {"pid": os.getpid(), "dirs": [str(d) for d in a.dirs + b.dirs], "limits": run_limits(),
       "parents": {}}
for d in a.dirs:
    for f in ("memory.limit_in_bytes", "memory.max", "pids.max"):
        if (d.parent / f).exists():
            out["parents"][str(d.parent / f)] = (d.parent / f).read_text().strip()
a.remove(); b.remove()
print(json.dumps(out))
"""


def test_every_sandbox_of_a_run_sits_in_its_one_bounded_parent():
    from course.grading.wall.cgroup import Cgroup

    if not Cgroup.available():
        pytest.skip("this machine lets this user make no cgroup")
    r = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    parent = f"course-run-{got['pid']}"
    assert got["dirs"] and all(d.split("/")[-2] == parent for d in got["dirs"]), got["dirs"]
    mem, pids = got["limits"]["memory"], got["limits"]["pids"]
    assert 0 < mem < 1 << 50 and pids >= 4096
    for path, value in got["parents"].items():
        if path.endswith("pids.max"):
            assert int(value) == pids, (path, value)
        else:  # the kernel rounds a memory limit down to a whole page
            assert mem - (1 << 16) < int(value) <= mem, (path, value)
    for d in got["dirs"]:  # the run's exit removed the parent with its sandboxes
        assert not Path(d).parent.exists(), d


def _hierarchy():
    """(root, controller) of the memory hierarchy this machine lets this user write, or skip."""
    from course.grading.wall.cgroup import Cgroup

    if not Cgroup.available():
        pytest.skip("this machine lets this user make no cgroup")
    if (Cgroup.V2 / "cgroup.controllers").exists():
        return Cgroup.V2, None
    return Cgroup.V1["memory"], "memory"


def test_a_parent_left_by_a_dead_process_is_swept_and_ours_sits_in_our_cgroup():
    from course.grading.wall.cgroup import own_place

    root, controller = _hierarchy()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    stale = root / f"course-run-{dead}"
    stale.mkdir()
    (stale / "course-left").mkdir()
    try:
        r = subprocess.run(
            [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stderr
        assert not stale.exists(), "a dead run's parent cgroup was left behind"
        got = json.loads(r.stdout)
        place = own_place(root, controller)  # the test runs where its child runs
        mine = [Path(d) for d in got["dirs"] if Path(d).is_relative_to(root)]
        assert mine and all(p.parent.parent == place or p.parent.parent == root for p in mine), (
            mine,
            place,
        )
        if place != root and not (root / "cgroup.controllers").exists():  # v1: nested
            assert all(p.parent.parent == place for p in mine), (mine, place)
    finally:
        for d in (stale / "course-left", stale):
            if d.exists():
                d.rmdir()


# ---------------------------------------------------------------------------------------
# a run's Dask workers share its one budget; a sandbox cannot widen its maker's cores

WORKER = """
import json, os
from course.grading.wall.cgroup import Cgroup
if len(os.sched_getaffinity(0)) > 1:   # a worker on its GPU's share: a cpuset parent too
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
c = Cgroup("course-test-worker")
print(json.dumps([str(d) for d in c.dirs]))
c.remove()
"""

OWNER = """
import json, os, subprocess, sys
from course.grading.wall.cgroup import OWNER_ENV, Cgroup
mine = Cgroup("course-test-owner")
env = dict(os.environ, **{OWNER_ENV: str(os.getpid())})
workers = [subprocess.run([sys.executable, "-c", sys.argv[1]], env=env, capture_output=True,
                          text=True, timeout=60) for _ in range(2)]
print(json.dumps({"pid": os.getpid(), "mine": [str(d) for d in mine.dirs],
                  "workers": [json.loads(w.stdout) for w in workers]}))
mine.remove()
"""


def test_a_runs_workers_put_their_sandboxes_in_the_runs_one_parent():
    """Two workers told the grader's pid: their sandboxes sit in the grader's parent (one
    memory budget for the run, not one each), which outlives them and goes with the grader
    - in every hierarchy, the cpuset one a pinned worker made included."""
    _hierarchy()
    r = subprocess.run(
        [sys.executable, "-c", OWNER, WORKER], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    parents = {Path(d).parent for d in got["mine"]}
    assert parents and all(p.name == f"course-run-{got['pid']}" for p in parents)
    made = set(parents)
    for dirs in got["workers"]:
        ups = {Path(d).parent for d in dirs}
        assert dirs and all(p.name == f"course-run-{got['pid']}" for p in ups), (dirs, parents)
        assert parents <= ups, (ups, parents)  # the owner's memory and pids parents
        made |= ups  # and a cpuset one, which only a pinned worker made
    left = [p for p in made if p.exists()]
    assert not left, f"the run's parents outlived the run: {left}"


PINNED = """
import json, os, subprocess, sys
from course.grading.wall.cgroup import Cgroup
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})   # a worker on its GPU's share
c = Cgroup("course-test-cpus")
fds = c.procs_files()
def join():
    for fd in fds:
        os.write(fd, str(os.getpid()).encode())
widen = "import os; os.sched_setaffinity(0, range(os.cpu_count())); print(sorted(os.sched_getaffinity(0)))"
r = subprocess.run([sys.executable, "-c", widen], preexec_fn=join, capture_output=True, text=True)
print(json.dumps({"maker": sorted(os.sched_getaffinity(0)), "sandbox": r.stdout.strip(),
                  "err": r.stderr[-300:], "cpuset": any("cpuset" in str(d) for d in c.dirs)}))
c.remove()
"""


def test_a_sandbox_cannot_widen_the_cores_its_maker_is_held_to():
    import os

    _hierarchy()
    if (os.cpu_count() or 1) < 2 or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: nothing to widen to")
    r = subprocess.run(
        [sys.executable, "-c", PINNED], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    if not _cpuset_here():
        pytest.skip("this machine has no cpuset controller this user may write")
    assert got["cpuset"] and got["sandbox"] == str(got["maker"]), got


def _cpuset_here() -> bool:
    import os

    from course.grading.wall.cgroup import Cgroup

    v2 = Cgroup.V2 / "cgroup.controllers"
    if v2.exists():
        return "cpuset" in v2.read_text()
    return Cgroup.V1_CPUSET.is_dir() and os.access(Cgroup.V1_CPUSET, os.W_OK)
