"""The sandbox the grading worker, measurer and gate run in (Linux; what each host allows).

A cell runs as the instructor's own user, so everything the operating system lets that user
do must be taken away here.  The rule is an allowlist: a sandboxed process sees what it
needs to run and nothing else, wherever the instructor keeps the rest.  Where ``unshare``
can make namespaces (as root, or through an unprivileged user namespace: most laptops,
containers that allow it, JupyterHub nodes), each sandbox gets

- **a fresh file tree** (a tmpfs made its root with ``pivot_root``; the host's tree is
  unmounted): read-only binds of the system folders (``/usr``; ``/bin``, ``/lib``... as the
  links they are on merged-/usr hosts), the Python installation (its prefixes and its
  ``sys.path`` folders outside the checkout and the folder the grader runs in), the
  ``course`` package and the checkout's
  public ``data/`` and ``assets/`` (plus ``pyproject.toml`` and an empty ``notebooks/``,
  so the package still knows it sits in a checkout), the folders named in
  ``LD_LIBRARY_PATH``/``CUDA_HOME`` (a GPU host's driver and toolkit) and Nsight Compute's
  (``counter.py``), a few files of ``/etc`` (the loader's cache, fonts; never ``/etc``
  whole: no shadow, no ssh keys), and a ``/dev`` of null, zero, full, random, urandom and
  the NVIDIA nodes (of the GPUs the grader sees alone: ``gpus.py``).  Nothing else exists
  in it: no ``/home``, ``/root``, ``/run``, ``/var``, no host ``/tmp``, no checkout
  root (``instructor/``, the solution notebooks), no submissions, outputs (grades, feedback,
  a leaderboard's database and tokens), lock files or sockets, wherever they lie.  Folders
  of that kind that lie *inside* a mounted one (a wheel's hidden cases in site-packages,
  outputs written into ``data/``) are covered with an empty tmpfs;
- **no Unix sockets** of the host (none is in the tree; abstract ones belong to the
  network namespace) and **no network** (its own, empty network namespace);
- **its own PID namespace and /proc**: it sees and can signal only its own processes, and
  every process it starts dies with it (the namespace's first process is the sandbox); the
  host's kernel settings under ``/proc/sys`` (and ``irq``, ``bus``, ``fs``, ``sysrq-trigger``)
  are read-only, since a sandbox of a grader run as root has root's uid;
- **its own System V IPC** (``--ipc``): no shared memory segment, queue or semaphore that
  another sandbox (or a later one: they outlive their maker) can open;
- **one writable place**: a scratch tmpfs of :data:`SCRATCH_MB` that is ``/tmp``, the run's
  scratch folder (``TMPDIR``, ``HOME``) and nothing else, gone with the sandbox; and a
  small fresh ``/dev/shm``;
- **an empty environment** but an allowlist (``child.child_env``: paths into the scratch,
  the course's mode settings, the GPU's libraries): no cloud key, hub or service token;
- **no capabilities** (``setpriv``: empty bounding set, no new privileges), so it cannot
  undo any of the above;
- **one memory and process budget** for all its processes, where a cgroup can be made
  (``cgroup.py``); elsewhere per-process limits (``child._limits``) only.

:func:`make` tries all of it once on this machine (a file and a listening Unix socket
outside the tree, a planted variable, every mount read-only) and returns None where the
host allows less: ``python -m course grade`` and ``serve`` then say once, at the start, what
is lost; the verdicts stay sound (the judge and measurer design, ``session.py``), but a cell
can then read and write what you can.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from .cgroup import Cgroup
from .child import PYTHON
from .counter import ncu_home
from .gpus import Selection, nodes, sandbox_env, visible
from .probe import NONE_MESSAGE, PLANTED, PROBE
from .tree import simulated

SCRATCH_MB = 256  # the writable tmpfs of one sandbox (/tmp and scratch together)
SHM_MB = 64  # its /dev/shm

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "fonts",
    "alternatives",
    "localtime",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
PATH_VARIABLES = (
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS",
    "NUMBA_CUDA_INCLUDE_PATH",
)
_ORDER = {"bind": 0, "cover": 1, "link": 2, "dir": 3}
TREE = str(Path(__file__).with_name("tree.py"))  # builds the tree and enters it


class Isolation:
    """Wraps a command line in ``unshare`` + the fresh tree above (``tree.py``) + ``setpriv``."""

    def __init__(self, prefix: list[str], hide: list[Path], run_dir: Path):
        self.prefix, self.run_dir = prefix, Path(run_dir)
        self.scratch = str(self.run_dir / "scratch")
        self.gpus = visible()  # the GPUs its maker sees: only their nodes are bound
        self.ops = plan(hide, self.run_dir, self.gpus)
        self.hide = [p for kind, p, _ in self.ops if kind == "cover"]
        self.forks = None  # warm sandboxes (``forks.Forks``) when the run asks for them

    def wrap(self, cmd: list[str], env: dict | None = None, allow=()) -> list[str]:
        """``cmd`` in the sandbox, with exactly ``env`` as its environment: ``tree.py``
        builds the tree and enters it, ``setpriv`` drops every capability; ``allow``: the
        refused calls it keeps (``tree.PROFILER``, for ``ncu``)."""
        return [
            *self.prefix,
            PYTHON,
            "-I",
            "-S",
            TREE,
            json.dumps({**self.tree_plan(env), "allow": list(allow)}),
            "--",
            "setpriv",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
            *cmd,
        ]

    def tree_plan(self, env: dict | None = None) -> dict:
        """What ``tree.enter`` builds (and the environment the command gets)."""
        tmp = Path("/tmp")  # the scratch tmpfs: what lies under it is bound after
        return {
            "root": str(self.run_dir),
            "user_namespace": self.user_namespace,  # no namespace made in it again (tree.py)
            "scratch": self.scratch,
            "scratch_mb": SCRATCH_MB,
            "shm_mb": SHM_MB,
            "env": {k: str(v) for k, v in sandbox_env(env or {}, self.gpus).items()},
            "processes": not simulated(env or {}),  # tree.SPAWN
            "early": [(k, str(p), t) for k, p, t in self.ops if not _inside(p, tmp)],
            "late": [(k, str(p), t) for k, p, t in self.ops if _inside(p, tmp)],
        }

    @property
    def user_namespace(self) -> bool:
        """Whether its namespaces start with a user namespace (an unprivileged grader)."""
        return "--user" in self.prefix

    def describe(self) -> str:
        cg = (
            "one cgroup per sandbox (memory, processes)"
            if Cgroup.available()
            else "per-process memory/CPU limits (no cgroup could be made)"
        )
        return (
            f"worker sandbox: own PID namespace and /proc, no network, a fresh read-only "
            f"file tree (system, Python, the course package, public data; inside it "
            f"{len(self.hide)} private folder(s) - hidden cases, solution notebooks, "
            f"submissions, outputs - show as empty), an empty environment but an "
            f"allowlist, a {SCRATCH_MB} MB scratch tmpfs as /tmp and home, no "
            f"capabilities, no namespace of its own making ("
            + ("a user namespace of its own" if self.user_namespace else "no user namespace")
            + f"); {self.gpus.describe()}; {cg}"
        )


def plan(hide: list, run_dir: Path, gpus: Selection | None = None) -> list:
    """The tree as (kind, path, link target) in the order to build it: ``bind`` (read-only,
    at the same path), ``cover`` (an empty tmpfs over a folder inside a bound one),
    ``link`` (a symlink as the host has it), ``dir`` (an empty folder)."""
    from ...platform import resources

    repo, home = resources.IMPORT_ROOT.resolve(), Path.home().resolve()
    hide = _existing(hide)
    # the folder the grader runs in (``python -m`` puts it first on sys.path, and a Dask
    # worker inherits that path): it holds the class and the outputs more often than not
    cwd = _existing([os.getcwd()])
    avoid = [repo, home, Path(run_dir).resolve(), *cwd, *hide]
    binds: dict[Path, None] = {}
    links: dict[Path, str] = {}
    dirs: list[Path] = []

    def add(p, optional: bool = False) -> None:
        p = Path(os.path.abspath(p))
        if not os.path.exists(p):
            return
        r = p.resolve()
        if optional and (
            r == Path("/")
            or any(_inside(a, r) for a in avoid)
            or (r / "pyproject.toml").exists()
            or (r / ".git").exists()
        ):
            return  # a folder that holds the checkout, home, the grader's working
            # folder or outputs, or a project
        for a in [*reversed(p.parents), p]:
            if a.is_symlink():
                links[a] = str(a.resolve())
        binds[r] = None

    for p in SYSTEM:
        add(p)
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}:
        add(p)
    for p in sys.path:
        if p and os.path.isabs(p) and os.path.isdir(p) and not _inside(Path(p).resolve(), repo):
            add(p, optional=True)
    for var in PATH_VARIABLES:
        for p in os.environ.get(var, "").split(os.pathsep):
            if p and os.path.isabs(p):
                add(p, optional=True)
    ncu = ncu_home()  # Nsight Compute's folder: the GPU's own count (``counter.py``)
    if ncu is not None and not any(_inside(ncu.resolve(), a) for a in avoid):
        add(ncu, optional=True)  # never one inside home or the checkout ($COURSE_NCU)
    for name in ETC:
        add(Path("/etc") / name)
    for name in DEVICES:
        add(Path("/dev") / name)
    for dev in nodes(gpus or visible()):  # the shared NVIDIA nodes and the selected GPUs' own
        add(dev)
    for name, target in DEV_LINKS.items():
        links[Path("/dev") / name] = target
    add(resources.PACKAGE)
    if resources.ROOT == resources.IMPORT_ROOT:  # a checkout: its public folders
        for name in ("data", "assets", "pyproject.toml"):
            add(repo / name)
        dirs.append(repo / "notebooks")

    clash = sorted(h for h in hide if h in binds)
    if clash:
        raise PrivateBound(
            f"{clash[0]} holds a path named on the command line, and every sandbox reads "
            "that folder (Python, the course package or its public data): keep the "
            "class, its outputs and rosters elsewhere"
        )
    covers = [h for h in {*hide, repo, home} if any(_inside(h, b) for b in binds)]
    # the grader's working folder, where it lies inside a bound one (data/, a prefix) and is
    # not bound itself (a Python prefix run from stays whole)
    here = [c for c in cwd if c not in binds]
    covers += [c for c in here if any(_inside(c, b) for b in binds)]
    # a folder inside another covered one is hidden with it (its own cover could not be
    # mounted: the outer tmpfs hides its mount point)
    covers = [c for c in set(covers) if not any(c != o and _inside(c, o) for o in covers)]

    def inside(p):
        return any(_inside(p, b) and p != b for b in binds) and not any(
            _inside(p, c) for c in covers
        )

    ops = [("bind", b, "") for b in binds if not inside(b)]
    ops += [("cover", c, "") for c in covers]
    ops += [("link", a, t) for a, t in links.items() if not any(_inside(a, b) for b in binds)]
    ops += [("dir", d, "") for d in dirs if not inside(d) and d not in binds]
    return sorted(ops, key=lambda op: (len(op[1].parts), _ORDER[op[0]], str(op[1])))


_PREFIXES = (
    [
        "unshare",
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--mount",
        "--propagation",
        "private",
        "--net",
        "--ipc",
    ],
    [
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--mount",
        "--propagation",
        "private",
        "--net",
        "--ipc",
    ],
)
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def make(hide: list[Path], run_dir: Path) -> tuple[Isolation | None, str]:
    """An Isolation that holds on this machine (tried once on scratch folders), or None."""
    if os.name != "posix" or not (shutil.which("unshare") and shutil.which("setpriv")):
        return None, NONE_MESSAGE.format(why="no `unshare`/`setpriv` on this system")
    from ...platform.resources import PACKAGE

    why = ""
    with (
        tempfile.TemporaryDirectory(dir=run_dir) as t,
        tempfile.TemporaryDirectory(prefix="cp-") as outside,
        socket.socket(socket.AF_UNIX) as listener,
    ):
        probe_run, secret, sock = Path(t) / "run", Path(outside) / "secret", Path(outside) / "s"
        probe_run.mkdir()
        secret.write_text("x")
        listener.bind(str(sock))
        listener.listen(4)
        env = dict(os.environ, **{PLANTED: "planted"})
        for prefix in _PREFIXES:
            try:
                probe = Isolation(prefix, hide, probe_run)  # the run's own tree, covers and all
            except PrivateBound as exc:
                return None, NONE_MESSAGE.format(why=str(exc))
            cmd = probe.wrap(
                [
                    PYTHON,
                    "-I",
                    "-S",
                    "-c",
                    PROBE,
                    str(secret),
                    str(sock),
                    str(PACKAGE),
                    probe.scratch,
                ],
                {"PATH": SAFE_PATH},
            )
            try:
                r = subprocess.run(cmd, capture_output=True, timeout=20, env=env, text=True)
            except (OSError, subprocess.TimeoutExpired) as exc:
                why = why or str(exc)
                continue
            if r.returncode == 0:
                iso = Isolation(prefix, hide, run_dir)
                return iso, iso.describe()
            lines = (r.stdout + r.stderr).strip().splitlines()
            why = why or (lines[-1][:200] if lines else f"exit code {r.returncode}")
    return None, NONE_MESSAGE.format(
        why=f"this system allows no sandbox of PID and mount namespaces: {why}"
    )


class PrivateBound(ValueError):
    """A private path (named on the command line) is a folder every sandbox must read."""


def command_line_folders(opts) -> list[Path]:
    """The folder of every path a command line names (``grade``'s submissions, outputs,
    instructor folder and notebooks, roster, profile; the leaderboard's database and
    roster): what an instructor points a command at is theirs, and no sandbox may see it,
    wherever it lies.  A file counts by its folder, as does a path not made yet."""
    folders: list[Path] = []
    for value in vars(opts).values():
        for p in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(p, Path):
                p = p.resolve()
                folders.append(p if p.is_dir() else p.parent)
    return folders


def for_grading(hide: list, run_dir: Path) -> tuple[Isolation | None, str]:
    """The grading sandbox: the fresh tree, with the hidden cases, instructor notebooks and
    ``hide`` (submissions, outputs) covered where they lie inside a mounted folder (a wheel
    keeps them in site-packages); ``run_dir``'s scratch tmpfs the only writable place.  A
    folder of ``hide`` not made yet (an output folder) is made now, empty: one made after
    the tree is planned would show inside a bound folder."""
    from ...platform.resources import ROOT, SHIPPED
    from .. import hidden

    for p in hide:
        if p is not None and not Path(p).exists():
            Path(p).mkdir(parents=True, exist_ok=True)

    covered = [
        hidden.hidden_dir(),
        ROOT / "notebooks",
        ROOT / "instructor",
        SHIPPED / "notebooks",
        SHIPPED / "instructor",
        os.environ.get("COURSE_INSTRUCTOR_DIR"),
        *hide,
    ]
    return make(hide=covered, run_dir=run_dir)


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
