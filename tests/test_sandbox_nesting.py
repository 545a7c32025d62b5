"""No namespace inside a sandbox: a cell without capabilities could still make a user
namespace of its own, regain every capability in it, mount the host's cgroups and rewrite
its own limits or freeze other processes (the red team's attack, 2026-11-29: a cell lifted
its pids limit, took the run's process ids and failed other students).  Each sandbox, cold
or forked from a zygote, sets its user namespace's namespace limits to 0 before it drops
its capabilities; ``isolate.make`` refuses a sandbox where a cell could still nest one.

Also here: a private folder that does not exist yet when the sandbox is made (an output
folder inside a bound one) is made then, and covered."""

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from test_forks import Cells as ForkedCells
from test_forks import warm  # noqa: F401 - the fixture
from test_sandbox import Cells

from course.grading.wall import isolate

pytestmark = pytest.mark.xdist_group("grade-sandbox")

NEST = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
made = {}
for name, flag in (("user", 0x10000000), ("mount", 0x20000), ("cgroup", 0x02000000)):
    made[name] = libc.unshare(flag) == 0
limits = {n: open("/proc/sys/user/" + n).read().strip()
          for n in os.listdir("/proc/sys/user") if n.endswith("_namespaces")}
result = {"made": made, "limits": limits}
"""


def _host_has_user_namespaces() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True)
    return r.returncode == 0


def _sandbox(run: Path):
    iso, said = isolate.make([], run)
    if iso is None and not _host_has_user_namespaces():
        pytest.skip(said)
    assert iso is not None, said  # the host nests user namespaces: the sandbox must hold
    return iso


def _nothing_nests(got: dict, user_namespace: bool) -> None:
    assert got["made"] == {"user": False, "mount": False, "cgroup": False}, got
    if user_namespace:
        assert got["limits"]["max_user_namespaces"] == "0", got
        assert set(got["limits"].values()) == {"0"}, got


@pytest.mark.timeout(180)
def test_a_cold_sandbox_makes_no_namespace(tmp_path):
    iso = _sandbox(tmp_path)
    cells = Cells(iso, tmp_path)
    try:
        got = cells(NEST)
    finally:
        cells.child.stop()
    _nothing_nests(got, iso.user_namespace)


@pytest.mark.timeout(300)
def test_a_forked_sandbox_makes_no_namespace(warm):  # noqa: F811 - the fixture
    iso, run_dir, _ = warm
    cells = ForkedCells(iso, run_dir)
    try:
        got = cells(NEST)
    finally:
        cells.child.stop()
    assert cells.child.forked
    _nothing_nests(got, iso.user_namespace)


def test_the_probe_refuses_a_sandbox_that_nests(tmp_path, monkeypatch):
    """Were the limits not set, ``make`` finds it out on this machine and gives no sandbox."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    if isolate.make([], tmp_path / "a")[0] is None:
        pytest.skip("this machine allows no sandbox")
    monkeypatch.setattr(isolate, "TREE", str(_tree_without_limits(tmp_path)))
    iso, said = isolate.make([], tmp_path / "b")
    assert iso is None and "a user namespace can be made in it" in said, said


def _tree_without_limits(tmp_path: Path) -> Path:
    """tree.py as it was before the limits (a cold sandbox runs it as a script)."""
    src = Path(isolate.__file__).with_name("tree.py").read_text()
    old = '    if plan.get("user_namespace"):\n        no_more_namespaces()\n'
    assert old in src
    out = tmp_path / "tree.py"
    out.write_text(src.replace(old, ""))
    return out


@pytest.mark.timeout(180)
def test_a_private_folder_made_after_the_sandbox_is_covered_all_the_same(tmp_path):
    later = REPO / "data" / f".course-test-later-{tmp_path.name}"  # inside a bound folder
    assert not later.exists()
    run = tmp_path / "run"
    run.mkdir()
    try:
        iso, said = isolate.for_grading([later], run)
        if iso is None:
            pytest.skip(said)
        (later / "grades.csv").write_text("alice,6")  # the run writes its outputs
        cells = Cells(iso, run)
        try:
            seen = cells(f"import os\nresult = os.listdir({str(later)!r})")
        finally:
            cells.child.stop()
        assert seen == [], seen
    finally:
        shutil.rmtree(later, ignore_errors=True)
