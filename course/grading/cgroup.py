"""One memory and process budget for a sandbox and every process it starts: a cgroup (v2, or
v1's memory and pids controllers) where this user may make one.

The sandbox of ``isolate.py`` puts each grading child in one (``child.py``): a submission
that forks or allocates without end is stopped there, not on the host.  Where no cgroup
can be made, the children keep their per-process limits only.
"""

from __future__ import annotations

import os
from pathlib import Path

MEMORY_MB = 8192  # a cgroup's memory limit (all processes of one sandbox)
PIDS_MAX = (
    4096  # a cgroup's task limit: the simulator runs a thread per CUDA thread (1,024 a block)
)


class Cgroup:
    """One memory + process budget for a sandbox and every process it starts (cgroup v2, or
    v1's memory and pids controllers), where this user may make cgroups."""

    V2 = Path("/sys/fs/cgroup")
    V1 = {"memory": Path("/sys/fs/cgroup/memory"), "pids": Path("/sys/fs/cgroup/pids")}

    def __init__(self, name: str, memory_mb: int | None = None):
        self.dirs: list[Path] = []
        memory = (memory_mb or MEMORY_MB) << 20
        try:
            if (self.V2 / "cgroup.controllers").exists() and "memory" in (
                self.V2 / "cgroup.controllers"
            ).read_text():
                d = self.V2 / name
                d.mkdir()
                self.dirs.append(d)
                (d / "memory.max").write_text(str(memory))
                (d / "pids.max").write_text(str(PIDS_MAX))
            elif all(p.is_dir() for p in self.V1.values()):
                for ctl, limit_file, value in (
                    ("memory", "memory.limit_in_bytes", memory),
                    ("pids", "pids.max", PIDS_MAX),
                ):
                    d = self.V1[ctl] / name
                    d.mkdir()
                    self.dirs.append(d)
                    (d / limit_file).write_text(str(value))
        except OSError:
            self.remove()

    def procs_files(self) -> list[int]:
        """Its ``cgroup.procs`` files, open for writing (close-on-exec): a process joins by
        writing its pid there - in a preexec_fn, with nothing but a system call."""
        fds = []
        for d in self.dirs:
            try:
                fds.append(os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
            except OSError:
                pass
        return fds

    def remove(self, wait_s: float = 3.0) -> None:
        """Kill whatever is still in it and remove it.  The sandbox's processes are reaped a
        moment after its first one dies, and until then ``rmdir`` fails (EBUSY): retry
        until ``wait_s``, or a long-lived service leaks a cgroup per submission."""
        import signal
        import time

        deadline = time.monotonic() + wait_s
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        break
                try:
                    if (d / "cgroup.kill").exists():  # cgroup v2, Linux 5.14+
                        (d / "cgroup.kill").write_text("1")
                    else:
                        for pid in (d / "cgroup.procs").read_text().split():
                            os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
                time.sleep(0.01)
        self.dirs = []

    @classmethod
    def available(cls) -> bool:
        probe = cls(f"course-probe-{os.getpid()}")
        ok = bool(probe.dirs)
        probe.remove()
        return ok
