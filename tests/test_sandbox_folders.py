"""Where the instructor keeps a class, no sandbox sees it: not through the folder the grader
runs in (``python -m`` puts it first on ``sys.path``, and a Dask worker inherits that path),
nor through a Python folder the class lies inside, on the grader or on a Dask worker.

The red team's attack (2026-11-29): graded with ``--executor dask`` from a folder holding the
class and its outputs, a cell read ``/proc/self/mountinfo``, found the class there and ran
another student's cells for full marks; another read the grades CSV as it was written."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_sandbox import Cells

from course.grading.classroom import dask_workers
from course.grading.judging.settings import GradeSettings
from course.grading.wall import isolate
from course.platform.resources import PACKAGE

LOOK = """
import os
result = {name: os.path.exists(path) for name, path in WHERE.items()}
"""


def _class_folder(top: Path) -> dict:
    """A grading folder as an instructor lays it out: the class, the outputs, the solution
    notebooks."""
    files = {
        "a student's notebook": top / "class" / "alice" / "01_vector_add.ipynb",
        "the grades": top / "out" / "grades.csv",
        "feedback": top / "out" / "fb" / "alice.md",
        "a solution notebook": top / "sol" / "01_vector_add.ipynb",
    }
    for p in files.values():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("private")
    return files


def _command_line(top: Path):
    return SimpleNamespace(
        submissions=[top / "class"],
        out=top / "out" / "grades.csv",
        feedback=top / "out" / "fb",
        notebooks=top / "sol",
    )


def test_the_folder_the_grader_runs_in_is_never_bound(tmp_path, monkeypatch):
    top = tmp_path / "grading"
    _class_folder(top)
    (top / "notes.txt").write_text("private")
    monkeypatch.chdir(top)
    monkeypatch.setattr(sys, "path", [str(top), *sys.path])  # as `python -m course` does
    binds = [p for kind, p, _ in isolate.plan([], tmp_path / "run") if kind == "bind"]
    assert binds and not any(isolate._inside(top.resolve(), b) for b in binds), binds
    libs = tmp_path / "libs"  # a Python folder of the grader's that holds no class: bound
    libs.mkdir()
    monkeypatch.setattr(sys, "path", [str(libs), *sys.path])
    assert libs.resolve() in [p for kind, p, _ in isolate.plan([], tmp_path / "run")]


def test_the_private_folders_are_every_path_the_command_line_names(tmp_path):
    """Every path option counts, named or not yet thought of (the roster, a profile...):
    a folder as itself, a file or a path not made yet by its folder."""
    top = tmp_path / "grading"
    _class_folder(top)
    (top / "lms").mkdir()
    (top / "lms" / "roster.csv").write_text("alice,1")
    opts = _command_line(top)
    opts.roster = top / "lms" / "roster.csv"
    opts.profile = top / "later" / "profile.json"  # not made yet
    opts.lesson, opts.jobs, opts.scheduler = "01_vector_add", 2, "tcp://x"  # not paths
    got = set(isolate.command_line_folders(opts))
    assert got == {
        top / "class",
        top / "out",
        top / "out" / "fb",
        top / "sol",
        top / "lms",
        top / "later",
    }, got


@pytest.mark.timeout(180)
def test_a_dask_workers_sandbox_hides_the_class_wherever_it_lies(tmp_path, monkeypatch):
    """The class inside a folder on ``sys.path`` (bound, were the class not in it), graded
    from the folder the grader runs in: a Dask worker's sandbox sees neither the class, the
    outputs, the solutions nor the instructor's notes."""
    top = tmp_path / "site"  # on sys.path: bound into every sandbox
    files = _class_folder(top)
    cwd = tmp_path / "grading"  # where the grader runs: its own notes there
    files["notes where the grader runs"] = cwd / "notes.txt"
    cwd.mkdir()
    files["notes where the grader runs"].write_text("private")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", [str(cwd), str(top), *sys.path])
    settings = GradeSettings(
        seed=1,
        mode="sim",
        isolation_choice="auto",
        private=tuple(str(p) for p in isolate.command_line_folders(_command_line(top))),
    )
    run = tmp_path / "run"
    run.mkdir()
    try:
        iso = dask_workers._sandbox(run, settings)
    except dask_workers.SandboxMissing as exc:
        pytest.skip(str(exc))
    cells = Cells(iso, run)
    try:
        where = {k: str(p) for k, p in files.items()}
        seen = cells(f"WHERE = {where!r}\n" + LOOK)
        shown = cells(f"WHERE = {{'public': {str(PACKAGE / '__init__.py')!r}}}\n" + LOOK)
    finally:
        cells.child.stop()
    assert shown == {"public": True}  # the sandbox sees what it should
    assert seen == dict.fromkeys(files, False), seen


def test_a_grader_started_by_a_relative_interpreter_path_still_gets_its_sandbox(tmp_path):
    """``../.venv/bin/python -m course grade`` from a folder the tree lacks: the sandbox (its
    probe, then a worker in it) starts the interpreter by a path with the ``..`` resolved,
    not one that is not there."""
    import os
    import subprocess

    if isolate.make([], tmp_path)[0] is None:
        pytest.skip("this machine allows no sandbox")
    here = tmp_path / "grading"
    here.mkdir()
    python = os.path.relpath(sys.executable, here)  # ../../.../bin/python
    probe = (
        "import tempfile, time; from pathlib import Path\n"
        "from course.grading.wall import isolate\n"
        "from course.grading.wall.child import Child\n"
        "run = Path(tempfile.mkdtemp()); (run / 't').mkdir()\n"
        "iso = isolate.make([], run)[0]\n"
        "w = Child('course.grading.wall.worker', run / 't' / 'w', time.monotonic() + 60, 4096,"
        " 60, iso)\n"
        "w.greeted(); w.stop()\n"
        "print(iso is not None)"
    )
    r = subprocess.run([python, "-c", probe], cwd=here, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "True", r.stdout + r.stderr


def test_a_leaderboard_worker_hides_the_services_folders(monkeypatch, tmp_path):
    """The service sends its command line's folders with every Dask task; the worker's
    sandbox hides those of them its machine has."""
    from course.leaderboard import queue, runner

    seen = []
    monkeypatch.setattr(queue, "_WORKER", {})
    monkeypatch.setattr(runner, "sandbox", lambda hide: (seen.extend(hide), (None, "none"))[1])
    queue.judge_on_worker("vector_add", {}, (str(tmp_path / "db"), str(tmp_path / "lms")))
    assert seen == [tmp_path / "db", tmp_path / "lms"]


def _on_a_worker(run: str) -> dict:
    """(a Dask task) The worker's folders on sys.path, and what a sandbox planned there binds."""
    import sys

    from course.grading.classroom import dask_workers

    mine = dask_workers.worker_folders()
    on_path = [p for p in sys.path if any(isolate._inside(Path(p), f) for f in mine)]
    Path(run).mkdir()
    try:
        iso = dask_workers._sandbox(Path(run), SimpleNamespace(private=()))
    except dask_workers.SandboxMissing as exc:
        return {"skip": str(exc)}
    binds = [str(p) for kind, p, _ in iso.ops if kind == "bind"]
    return {"mine": [str(f) for f in mine], "on_path": on_path, "binds": binds}


@pytest.mark.timeout(180)
def test_a_dask_workers_scratch_space_is_on_its_path_but_in_no_sandbox(tmp_path):
    """Dask puts a worker's scratch folder (uploads, data it spills) on ``sys.path``, where
    the sandbox would bind it; the worker's sandboxes hide it, its siblings' too."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            local_directory=str(tmp_path / "scratch"),
        ) as cluster,
        Client(cluster) as client,
    ):
        got = client.submit(_on_a_worker, str(tmp_path / "run")).result(timeout=120)
    if "skip" in got:
        pytest.skip(got["skip"])
    assert got["mine"] and got["on_path"], got  # Dask did put it there
    for b in got["binds"]:
        assert not any(isolate._inside(Path(f), Path(b)) for f in got["mine"]), (b, got)
        assert not any(isolate._inside(Path(b), Path(f)) for f in got["mine"]), (b, got)
