"""Progress is kept per course copy, under a lock, and a corrupt file is kept, not lost."""

import importlib
import json
import multiprocessing
import os
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

# the module, not the function
progress = importlib.import_module("course.grading.judging.progress")


@dataclass
class Result:  # what progress.record reads of a CheckResult
    exercise: str
    passed: bool = True
    mode: str = "sim"
    cases: list = field(default_factory=list)


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    p = tmp_path / "progress.json"
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(p))
    return p


def _writer(path: str, who: int, n: int) -> None:
    os.environ["COURSE_PROGRESS_FILE"] = path
    for i in range(n):
        progress.record(Result(f"ex_{who}_{i}"))


def test_concurrent_writers_lose_no_record(progress_file):
    procs, n = 6, 25
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    workers = [ctx.Process(target=_writer, args=(str(progress_file), w, n)) for w in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    data = json.loads(progress_file.read_text())
    assert len(data) == procs * n, f"{procs * n - len(data)} records lost"
    assert not list(progress_file.parent.glob("*.tmp")), "a temporary file was left behind"


def test_without_the_lock_records_are_lost(progress_file, monkeypatch):
    """The concurrent test can fail: the same writers without the lock lose records (the
    read-modify-write of one process overwrites another's)."""
    import contextlib
    import time

    real_read = progress._read

    def slow_read(p):  # widen the window between read and replace
        data = real_read(p)
        time.sleep(0.01)
        return data

    monkeypatch.setattr(progress, "_locked", lambda p: contextlib.nullcontext())
    monkeypatch.setattr(progress, "_read", slow_read)
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_writer, args=(str(progress_file), w, 10)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert len(json.loads(progress_file.read_text())) < 40


def test_a_corrupt_file_is_kept_aside_with_a_one_line_warning(progress_file, capsys):
    progress_file.write_text('{"vector_add": {"passed": tr')  # a half-written file
    progress.record(Result("matrix_add"))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid JSON" in err[0] and "kept as" in err[0], err
    [aside] = progress_file.parent.glob("progress.json.corrupt-*")
    assert aside.read_text() == '{"vector_add": {"passed": tr'
    assert set(json.loads(progress_file.read_text())) == {"matrix_add"}


def test_each_course_copy_keeps_its_own_progress(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_PROGRESS_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    a, b = tmp_path / "copy_a", tmp_path / "copy_b"
    for c in (a, b):
        (c / "notebooks").mkdir(parents=True)
        (c / "notebooks" / "01_vector_add.ipynb").write_text("{}")
    monkeypatch.chdir(a / "notebooks")  # a notebook runs in its folder
    progress.record(Result("vector_add"))
    assert progress.path() == a / "notebooks" / progress.FILE_NAME
    monkeypatch.chdir(b)  # the copy's root finds it too
    assert progress.path() == b / "notebooks" / progress.FILE_NAME
    assert progress.load() == {}
    monkeypatch.chdir(a)
    assert set(progress.load()) == {"vector_add"}
    monkeypatch.chdir(tmp_path)  # no copy here: the home folder
    assert progress.path() == tmp_path / "home" / ".numba-course" / "progress.json"


def test_progress_command_reads_the_copy_it_runs_in(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_vector_add.ipynb").write_text("{}")
    (tmp_path / "notebooks" / progress.FILE_NAME).write_text(
        json.dumps(
            {
                "vector_add": {
                    "passed": True,
                    "mode": "sim",
                    "when": "2026-11-26 14:00:00",
                    "cases": "6/6",
                    "ever_passed": True,
                }
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "COURSE_PROGRESS_FILE"}
    r = subprocess.run(
        [sys.executable, "-m", "course", "progress"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert str(tmp_path / "notebooks" / progress.FILE_NAME) in r.stdout
    assert "vector_add" in r.stdout and "passed" in r.stdout
