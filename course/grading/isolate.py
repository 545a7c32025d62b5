"""The sandbox the grading worker and measurer run in (Linux; what each host allows).

A cell runs as the instructor's own user, so everything the operating system lets that user
do must be taken away here.  Where ``unshare`` can make namespaces (as root, or through an
unprivileged user namespace: most laptops, containers that allow it, JupyterHub nodes),
each worker and measurer gets

- **its own PID namespace and /proc**: it sees and can signal only its own processes - not
  the grader (no ``/proc/<grader>/root``), not the measurer, not other students' workers -
  and every process it starts dies with it (the namespace's first process is the worker);
- **no network** (its own, empty network namespace);
- **a read-only disk**: every mount is remounted read-only in its mount namespace; the only
  writable place is a scratch tmpfs of :data:`SCRATCH_MB` that covers the run's temporary
  folder (so it also hides the other submissions' folders) and vanishes with the sandbox:
  disk use is bounded as a whole and nothing is left behind;
- **hidden folders** (empty tmpfs over them): the hidden cases, the instructor notebooks
  (they hold the solutions), the submissions and the grades;
- **no capabilities** (``setpriv``: empty bounding set, no new privileges), so it cannot
  undo any of the above;
- **one memory and process budget** for all its processes, where a cgroup can be made
  (:class:`Cgroup`); elsewhere per-process limits (``child._limits``) only.

Where none of this is available (macOS, Windows, a container that forbids namespaces),
``python -m course grade`` says so once at the start; the verdicts stay sound (the judge and
measurer design, ``session.py``), but a cell can then read and write what you can.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

SCRATCH_MB = 256          # the writable tmpfs of one sandbox (all its files together)
MEMORY_MB = 8192          # a cgroup's memory limit (all processes of one sandbox)
PIDS_MAX = 4096           # a cgroup's task limit: the simulator runs a thread per CUDA thread (1,024 a block)


class Isolation:
    """Wraps a command line in ``unshare`` + the mounts above + ``setpriv``."""

    def __init__(self, prefix: list[str], hide: list[Path], run_dir: Path):
        self.prefix, self.hide, self.run_dir = prefix, hide, Path(run_dir)
        self.scratch = str(self.run_dir / "scratch")

    def script(self) -> str:
        run, scratch = shlex.quote(str(self.run_dir)), shlex.quote(self.scratch)
        lines = [
            "set -e",
            # every mount read-only (mount points as /proc/self/mountinfo lists them), but
            # /proc: it is the sandbox's own, and the CUDA driver fails on a read-only one
            "awk '{print $5}' /proc/self/mountinfo | while read -r m; do "
            'case "$m" in /proc|/proc/*) continue;; esac; '
            'mount -o remount,bind,ro "$m" 2>/dev/null || true; done',
            "! touch /.course-sandbox-probe 2>/dev/null",
        ]
        for p in self.hide:
            lines.append(f"mount -t tmpfs -o ro,size=4k,mode=0555 course-hidden "
                         f"{shlex.quote(str(p))}")
        lines += [
            f"mount -t tmpfs -o size={SCRATCH_MB}m,mode=0755 course-scratch {run}",
            f"mkdir -m 1777 {scratch}",
            f"cd {scratch}",
            "export TMPDIR=" + scratch,
            'exec setpriv --no-new-privs --inh-caps=-all --bounding-set=-all -- "$@"',
        ]
        return "; ".join(lines)

    def wrap(self, cmd: list[str]) -> list[str]:
        return [*self.prefix, "sh", "-c", self.script(), "course-sandbox", *cmd]

    def describe(self) -> str:
        cg = "one cgroup per sandbox (memory, processes)" if Cgroup.available() else \
            "per-process memory/CPU limits (no cgroup could be made)"
        return (f"worker sandbox: own PID namespace and /proc, no network, read-only disk but a "
                f"{SCRATCH_MB} MB scratch tmpfs, no capabilities, {len(self.hide)} folder(s) "
                f"hidden; {cg}")


_PREFIXES = (
    ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc",
     "--mount", "--propagation", "private", "--net"],
    ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--propagation",
     "private", "--net"],
)


def make(hide: list[Path], run_dir: Path) -> tuple[Isolation | None, str]:
    """An Isolation that holds on this machine (tried once on scratch folders), or None."""
    if os.name != "posix" or not (shutil.which("unshare") and shutil.which("setpriv")):
        return None, NONE_MESSAGE.format(why="no `unshare`/`setpriv` on this system")
    hide = _coverable(_existing(hide), run_dir)
    with tempfile.TemporaryDirectory(dir=run_dir) as t:
        probe_run, secret = Path(t) / "run", Path(t) / "h"
        probe_run.mkdir()
        secret.mkdir()
        (secret / "secret").write_text("x")
        test = (f"test ! -e {shlex.quote(str(secret / 'secret'))} && "
                f"! touch {shlex.quote(str(Path(t) / 'f'))} 2>/dev/null && "
                f"touch ./ok && test $(ls /proc | grep -c '^[0-9]') -lt 5")
        for prefix in _PREFIXES:
            probe = Isolation(prefix, [secret], probe_run)
            try:
                r = subprocess.run(probe.wrap(["sh", "-c", test]), capture_output=True,
                                   timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if r.returncode == 0:
                iso = Isolation(prefix, hide, run_dir)
                return iso, iso.describe()
    return None, NONE_MESSAGE.format(why="this system allows no PID and mount namespaces")


NONE_MESSAGE = ("worker sandbox: NONE ({why}). Verdicts are still decided only by the "
                "grader, but student code runs as you: it can read and write your files, "
                "the hidden cases included, and signal your processes. Grade inside a "
                "container (instructor/README.md) for a class.")


def for_grading(hide: list, run_dir: Path) -> tuple[Isolation | None, str]:
    """The grading sandbox: hidden cases, instructor notebooks and ``hide`` (submissions,
    outputs) covered; everything else read-only; ``run_dir`` becomes the scratch tmpfs."""
    from ..platform.resources import ROOT
    from . import hidden

    covered = [hidden.hidden_dir(), ROOT / "notebooks", ROOT / "instructor", *hide]
    return make(hide=covered, run_dir=run_dir)


class Cgroup:
    """One memory + process budget for a sandbox and every process it starts (cgroup v2, or
    v1's memory and pids controllers), where this user may make cgroups."""

    V2 = Path("/sys/fs/cgroup")
    V1 = {"memory": Path("/sys/fs/cgroup/memory"), "pids": Path("/sys/fs/cgroup/pids")}

    def __init__(self, name: str, memory_mb: int | None = None):
        self.dirs: list[Path] = []
        memory = (memory_mb or MEMORY_MB) << 20
        try:
            if (self.V2 / "cgroup.controllers").exists() and \
                    "memory" in (self.V2 / "cgroup.controllers").read_text():
                d = self.V2 / name
                d.mkdir()
                self.dirs.append(d)
                (d / "memory.max").write_text(str(memory))
                (d / "pids.max").write_text(str(PIDS_MAX))
            elif all(p.is_dir() for p in self.V1.values()):
                for ctl, limit_file, value in (("memory", "memory.limit_in_bytes", memory),
                                               ("pids", "pids.max", PIDS_MAX)):
                    d = self.V1[ctl] / name
                    d.mkdir()
                    self.dirs.append(d)
                    (d / limit_file).write_text(str(value))
        except OSError:
            self.remove()

    def join(self) -> None:
        """Put the calling process (and so its children) in the cgroup (a preexec_fn)."""
        for d in self.dirs:
            try:
                (d / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                pass

    def remove(self) -> None:
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass
        self.dirs = []

    @classmethod
    def available(cls) -> bool:
        probe = cls(f"course-probe-{os.getpid()}")
        ok = bool(probe.dirs)
        probe.remove()
        return ok


def _coverable(paths: list[Path], run_dir: Path) -> list[Path]:
    """The folders that can be hidden: none that holds what the sandbox must read (Python,
    the course) or the run folder, and none inside another hidden one."""
    import sys

    needed = [Path(sys.prefix).resolve(), Path(sys.executable).resolve(),
              Path(__file__).resolve().parents[2], Path(run_dir).resolve()]
    keep = [p for p in paths if not any(_inside(n, p) for n in needed)]
    return [p for p in keep if not any(q != p and _inside(p, q) for q in keep)]


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(path).relative_to(folder)
        return True
    except ValueError:
        return False


def _existing(paths) -> list[Path]:
    out = []
    for p in paths:
        if p is None:
            continue
        p = Path(p).resolve()
        if p.is_dir() and p not in out:
            out.append(p)
    return out
