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
