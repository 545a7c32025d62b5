"""The service's submission readers run in the grading sandbox when the service has one:
they read what a student sent, so they see no database, no token file, no other process
and no secret of the service's environment (the trust rule), and they still read."""

import os
from pathlib import Path

import pytest

from course.leaderboard import reading, runner

HONEST = """from numba import cuda

@cuda.jit
def add(n, x, y):
    i = cuda.grid(1)
    if i < n:
        y[i] = x[i] + y[i]
"""


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def test_a_reader_in_the_sandbox_reads_and_sees_nothing_of_the_service(tmp_path, monkeypatch):
    secret = tmp_path / "service"
    secret.mkdir()
    (secret / "tokens.csv").write_text("student,token\nann,s3cret\n")
    monkeypatch.setenv("COURSE_LEADERBOARD_ADMIN_TOKEN", "admin-s3cret")
    isolation, said = runner.sandbox([secret])
    if isolation is None:
        pytest.skip(f"this machine makes no sandbox: {said}")
    reader = reading.Reader(isolation)
    try:
        reply = reader.ask({"source": HONEST, "function": "add"}, 60)
        assert reply["unit"]["name"] == "add", reply
        pids = [
            p
            for p in [reader.proc.pid, *_descendants(reader.proc.pid)]
            if b"course.leaderboard.reading" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        python = pids[-1]  # the reader itself, inside the wrap
        assert os.readlink(f"/proc/{python}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert os.readlink(f"/proc/{python}/ns/pid") != os.readlink("/proc/self/ns/pid")
        environ = Path(f"/proc/{python}/environ").read_bytes()
        assert b"admin-s3cret" not in environ and b"COURSE_LEADERBOARD" not in environ
        assert not Path(f"/proc/{python}/root{secret}/tokens.csv").exists()
    finally:
        reader.close()


def test_without_a_sandbox_the_reader_still_drops_the_services_secrets(monkeypatch):
    monkeypatch.setenv("COURSE_LEADERBOARD_ADMIN_TOKEN", "admin-s3cret")
    reader = reading.Reader()
    try:
        environ = Path(f"/proc/{reader.proc.pid}/environ").read_bytes()
        assert b"admin-s3cret" not in environ
        assert reader.ask({"source": HONEST, "function": "add"}, 60)["unit"]["name"] == "add"
    finally:
        reader.close()
