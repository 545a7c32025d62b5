"""One memory and process budget for a sandbox and every process it starts: a cgroup (v2, or
v1's memory and pids controllers) where this user may make one.

The sandbox of ``isolate.py`` puts each grading child in one (``child.py``): a submission
that forks or allocates without end is stopped there, not on the host.  Where no cgroup
can be made, the children keep their per-process limits only.

Every sandbox of one grading run (a ``grade`` run and its Dask workers, the leaderboard
service) lives inside one parent cgroup, ``course-run-PID`` of the run's first process
(:data:`OWNER_ENV` names it to the workers it starts), that holds them all to
:data:`RUN_SHARE` of the machine's memory and half its process ids: however many jobs and
workers run at once, the grader and the host keep the rest.

A sandbox runs on the cores of the process that made it, and cannot widen them: where that
process is held to fewer cores than the machine has (a Dask worker on its GPU's share), the
sandbox's cgroup gets a cpuset of them (``sched_setaffinity`` alone any process may undo).
"""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path

MEMORY_MB = 8192  # a cgroup's memory limit (all processes of one sandbox)
PIDS_MAX = (
    4096  # a cgroup's task limit: the simulator runs a thread per CUDA thread (1,024 a block)
)
GPU_PIDS_MAX = 512  # ... and a GPU sandbox's: CUDA's few threads (times ``tree.NOFILE``: files)
RUN_SHARE = 0.75  # every sandbox of one run together: at most this share of the memory
OWNER_ENV = "COURSE_CGROUP_OWNER"  # the pid whose parent cgroup a run's workers share
_RUN_LOCK = threading.Lock()
_RUN: dict[tuple[Path, int], Path | None] = {}  # (hierarchy root, pid) -> the parent there
_REMOVING: set[int] = set()  # the processes that remove their run's parents at exit


def machine_memory() -> int:
    """Bytes of memory this machine has (MemTotal), 0 where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_limits() -> dict[str, int]:
    """The parent's limits: memory bytes (0: unknown) and process ids."""
    try:
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        pid_max = 32768
    return {"memory": int(machine_memory() * RUN_SHARE), "pids": max(PIDS_MAX, pid_max // 2)}


def own_place(root: Path, controller: str | None) -> Path:
    """The folder under ``root`` of the cgroup this process is in (v1: the hierarchy of
    ``controller``; v2: ``controller`` None), or ``root`` where that cannot be told."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, where = line.split(":", 2)
            mine = controller in controllers.split(",") if controller else controllers == ""
            if mine:
                place = root / where.lstrip("/")
                return place if place.is_dir() else root
    except (OSError, ValueError):
        pass
    return root


def run_parent(root: Path, files: dict[str, str], controller: str | None = None) -> Path | None:
    """This process's parent cgroup in the hierarchy at ``root`` (made once, removed at
    exit): inside the cgroup this process is in, so a limit put on the grader covers its
    sandboxes too, else at ``root``; ``files`` ({limit file: "memory" or "pids"}) set from
    :func:`run_limits`.  None where none can be made (the sandboxes then sit at ``root``)."""
    owner = run_owner()
    key = (root, owner)  # a forked child makes its own, and never removes ours
    with _RUN_LOCK:
        seen = key in _RUN
        known = _RUN.get(key)
        if seen and (known is None or known.is_dir()):
            return known
        limits = run_limits()
        bases = list(dict.fromkeys([own_place(root, controller), root]))
        for base in bases:
            sweep(base)
        for base in bases:
            d = base / f"course-run-{owner}"
            try:
                d.mkdir(exist_ok=True)
                if (d / "cgroup.subtree_control").exists():  # v2: hand the controllers down
                    (d / "cgroup.subtree_control").write_text("+memory +pids")
                    _try_write(d / "cgroup.subtree_control", "+cpuset")
                if controller == "cpuset":  # v1: a cpuset starts empty; it gets its parent's
                    for name in ("cpuset.cpus", "cpuset.mems"):
                        (d / name).write_text((base / name).read_text().strip() or "\n")
                for name, what in files.items():
                    if limits[what]:
                        (d / name).write_text(str(limits[what]))
            except OSError:
                if owner == os.getpid():
                    _remove_tree(d)
                continue
            if not seen and owner == os.getpid():  # the run's first process removes it
                _remove_at_exit()
            _RUN[key] = d
            return d
        _RUN[key] = None
        return None


def run_owner() -> int:
    """The pid whose parent cgroup this process's sandboxes go in: :data:`OWNER_ENV`'s, set
    by the grader for the Dask workers it starts, while that process lives; else its own."""
    text = os.environ.get(OWNER_ENV, "")
    if text.isdigit() and Path(f"/proc/{int(text)}").exists():
        return int(text)
    return os.getpid()


def maker_cpus() -> str | None:
    """The cores this process may run on as a cpuset list ("0-7,16"), where they are fewer
    than the machine has; None where they are all (or cannot be told)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    mine = sorted(os.sched_getaffinity(0))
    if not mine or len(mine) >= (os.cpu_count() or 0):
        return None
    runs: list[list[int]] = []
    for c in mine:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def _try_write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
        return True
    except OSError:
        return False


def sweep(base: Path) -> None:
    """Remove the parents that processes no longer alive left in ``base`` (one killed
    with SIGKILL cannot remove its own); a parent still in use is never removed."""
    for old in base.glob("course-run-*"):
        try:
            pid = int(old.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid not in (os.getpid(), run_owner()) and not Path(f"/proc/{pid}").exists():
            _remove_tree(old)


def _remove_tree(d: Path) -> None:
    """``rmdir`` a parent's empty sandbox cgroups, then the parent (a cgroup that still
    holds a process refuses: EBUSY, and stays)."""
    try:
        for child in d.iterdir():
            if child.is_dir():
                try:
                    child.rmdir()
                except OSError:
                    pass
        d.rmdir()
    except OSError:
        pass


def _remove_at_exit() -> None:
    """Once in the run's first process: at its exit, remove its parents in every hierarchy,
    those its Dask workers made too (a worker pinned to its cores makes the cpuset one)."""
    if os.getpid() not in _REMOVING:
        _REMOVING.add(os.getpid())
        atexit.register(_remove_everywhere, os.getpid())


def _remove_everywhere(pid: int) -> None:
    if os.getpid() != pid:  # a forked child's exit: the parents are its creator's
        return
    hierarchies = [(Cgroup.V2, None), *((r, c) for c, r in Cgroup.V1.items())]
    for root, controller in [*hierarchies, (Cgroup.V1_CPUSET, "cpuset")]:
        if root.is_dir():
            for base in {own_place(root, controller), root}:
                if (base / f"course-run-{pid}").is_dir():
                    _remove_tree(base / f"course-run-{pid}")


class Cgroup:
    """One memory + process budget for a sandbox and every process it starts (cgroup v2, or
    v1's memory and pids controllers), where this user may make cgroups."""

    V2 = Path("/sys/fs/cgroup")
    V1 = {"memory": Path("/sys/fs/cgroup/memory"), "pids": Path("/sys/fs/cgroup/pids")}
    V1_CPUSET = Path("/sys/fs/cgroup/cpuset")

    def __init__(self, name: str, memory_mb: int | None = None, pids: int = PIDS_MAX):
        self.dirs: list[Path] = []
        memory = (memory_mb or MEMORY_MB) << 20
        cpus = maker_cpus()
        try:
            if (self.V2 / "cgroup.controllers").exists() and "memory" in (
                self.V2 / "cgroup.controllers"
            ).read_text():
                parent = run_parent(self.V2, {"memory.max": "memory", "pids.max": "pids"}, None)
                d = (parent or self.V2) / name
                d.mkdir()
                self.dirs.append(d)
                (d / "memory.max").write_text(str(memory))
                (d / "pids.max").write_text(str(pids))
                if cpus and (d / "cpuset.cpus").exists():
                    _try_write(d / "cpuset.cpus", cpus)
            elif all(p.is_dir() for p in self.V1.values()):
                for ctl, limit_file, value in (
                    ("memory", "memory.limit_in_bytes", memory),
                    ("pids", "pids.max", pids),
                ):
                    parent = run_parent(self.V1[ctl], {limit_file: ctl}, ctl)
                    d = (parent or self.V1[ctl]) / name
                    d.mkdir()
                    self.dirs.append(d)
                    (d / limit_file).write_text(str(value))
                if cpus and self.V1_CPUSET.is_dir():
                    self._v1_cpuset(name, cpus)
        except OSError:
            self.remove()

    def _v1_cpuset(self, name: str, cpus: str) -> None:
        """v1: a cpuset cgroup of ``cpus`` beside the memory and pids ones, kept only once
        its cores and memory nodes are written (a process cannot join an empty cpuset)."""
        parent = run_parent(self.V1_CPUSET, {}, "cpuset")
        d = (parent or self.V1_CPUSET) / name
        try:
            d.mkdir()
        except OSError:
            return
        mems = (d.parent / "cpuset.mems").read_text().strip() if parent else ""
        if mems and _try_write(d / "cpuset.mems", mems) and _try_write(d / "cpuset.cpus", cpus):
            self.dirs.append(d)
        else:
            try:
                d.rmdir()
            except OSError:
                pass

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
