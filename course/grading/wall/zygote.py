"""The zygote: a warm, clean process that forks a fresh sandbox for each grading child.

``python -m course.grading.wall.zygote SOCK KIND`` is started by the grader (``forks.py``) outside any
submission, with the environment a sandboxed child gets (``child.child_env``).  It imports
``course``, numba and the modules a worker, measurer or compile gate needs, warms the
compiler where it is one (KIND ``gate``: ``gate.warm``, the course's own one-line kernel;
KIND ``run``: a worker's and a measurer's modules and those the lessons' set-up cells
import, named by the grader in ``COURSE_ZYGOTE_IMPORTS``),
freezes its
heap, and then only forks.  It never runs, reads or receives anything a submission
controls: its one conversation is with the grader, over the socket ``SOCK``:

- ``spawn`` (with the child's pipes, its log file and its cgroup's ``cgroup.procs`` files
  as passed descriptors): fork; the fork joins the cgroup, makes its own user (where the
  sandbox has one), mount, PID, network and IPC namespaces, forks the namespace's first
  process, which builds the fresh file tree (``tree.enter``: the same tree as a cold
  sandbox), drops every capability (bounding set, no new privileges, ``capset`` to none),
  sets its limits, closes every descriptor but its pipes and log, takes exactly the
  request's environment and runs the module's ``main``.  The reply is the fork's pid;
- ``reap``: the exit status of a fork that ended (the grader watches it with a pidfd).

So every submission's worker, measurer and gate start as a copy of a process no submission
ever touched, and nothing flows back into it: a fork's memory is its own (copy on write),
it cannot see or signal the zygote (another PID namespace), nor reach its socket (closed,
and no network namespace in common).  What a fork does to its modules, files, environment
or numba's caches stays in that fork.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC = 0x08000000  # its own System V IPC: no shared memory or queue with another fork
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_NOEXEC = 16384, 1 << 18, 2, 4, 8
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAP_VERSION_3 = 0x20080522
MAX_REQUEST = 1 << 20
MODULES = ("course.grading.wall.worker", "course.grading.wall.measurer", "course.grading.wall.gate")
WARM_IMPORTS = "COURSE_ZYGOTE_IMPORTS"  # in a zygote's environment only, never a fork's

libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


# ---------------------------------------------------------------------------------------
# inside a fork: the wall, then the module


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capabilities() -> None:
    """What ``setpriv --no-new-privs --inh-caps=-all --bounding-set=-all`` does, and then
    the effective and permitted sets emptied too (there is no ``exec`` to empty them)."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the last capability
                break
            raise OSError(ctypes.get_errno(), f"drop capability {cap} from the bounding set")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(_CapHeader(CAP_VERSION_3, 0)), data), "capset")
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    if any(int(status[k], 16) for k in ("CapEff", "CapPrm", "CapInh", "CapBnd")):
        raise OSError("capabilities are left after dropping them")


def _limits(cpu_s: int, memory_mb: int, env: dict) -> None:
    import resource

    from .tree import rlimits

    for which, value in rlimits(env, cpu_s, memory_mb):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def _only_fds(keep: set[int]) -> None:
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _first(req: dict, pipes: tuple[int, int], log: int) -> None:
    """The namespace's first process (pid 1): the tree, no capabilities, the limits, only
    its pipes and log, the request's environment; then the module (never returns)."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # its parent's death ends it
    _check(libc.unshare(CLONE_NEWNS), "unshare the mount namespace")  # its own, not its parent's
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "private /")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _check(libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(flags), None), "mount /proc")
    from . import tree

    tree.enter(req["plan"])
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    _only_fds({0, 1, 2, *pipes})
    drop_capabilities()
    tree.deny_calls((), req["plan"].get("processes", True) is not False)
    _limits(int(req["cpu_s"]), int(req["memory_mb"]), req["plan"]["env"])
    os.environ.clear()
    os.environ.update(req["plan"]["env"])
    import random

    random.seed()  # not the zygote's state: every fork draws its own
    try:
        import numpy as np

        np.random.seed()
    except ImportError:
        pass
    if req.get("probe"):
        sys.argv = ["probe", *req["probe"]]
        from .probe import PROBE

        try:
            exec(compile(PROBE, "<probe>", "exec"), {"__name__": "__main__"})  # noqa: S102
        except SystemExit as end:
            sys.stdout.flush()
            os._exit(end.code if isinstance(end.code, int) else 1)
        os._exit(1)
    import importlib

    module = importlib.import_module(req["module"])
    # what a cold child's argv is (``python -m MODULE R W``), not the zygote's: a cell sees
    # the same process either way, and the wall's tests attack the same surface
    sys.argv = [str(module.__file__), str(pipes[0]), str(pipes[1])]
    module.main(sys.argv[1:])
    os._exit(0)


def _fork_body(req: dict, fds: list[int]) -> None:
    """The fork: it joins the cgroup, unshares its namespaces, forks the first process and
    ends as that process ends (killed by the same signal).  Never returns."""
    code = 1
    try:
        pipes, log, procs = (fds[0], fds[1]), fds[2], fds[3:]
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # it ends with the zygote
        os.setsid()
        for fd in procs:
            os.write(fd, b"%d" % os.getpid())
            os.close(fd)
        user = bool(req["user_namespace"])
        uid, gid = os.getuid(), os.getgid()
        flags = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | (CLONE_NEWUSER if user else 0)
        _check(libc.unshare(flags), "unshare")
        if user:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"0 {uid} 1"),
                ("gid_map", f"0 {gid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        pid = os.fork()
        if pid == 0:
            try:
                _first(req, pipes, log)
            except BaseException as exc:  # noqa: BLE001 - one line in its log
                for fd in (log, 2):  # its log, or stderr once that is the log
                    try:
                        os.write(fd, f"sandbox: {type(exc).__name__}: {exc}\n".encode())
                        break
                    except OSError:
                        pass
            os._exit(1)
        os.closerange(0, log)  # its pipes: the grader sees them close with the first process
        os.closerange(log + 1, 1 << 16)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        code = os.waitstatus_to_exitcode(status)
    except BaseException as exc:  # noqa: BLE001
        try:
            os.write(fds[2], f"sandbox: {type(exc).__name__}: {exc}\n".encode())
        except (OSError, IndexError):
            pass
    os._exit(code if 0 <= code < 256 else 1)


# ---------------------------------------------------------------------------------------
# the zygote's loop


def _warm(kind: str) -> None:
    """Import what its children need, once: a worker's and measurer's modules (``run``),
    or the compiler, warmed on the course's own one-line kernel (``gate``)."""
    import importlib

    import course  # noqa: F401 - chooses gpu/sim before numba loads

    if kind == "gate":
        from .gate import warm

        why = warm()
        if why:
            raise RuntimeError(why)
        return
    for name in MODULES[:2] + (
        "course.grading.source.unit",
        "course.grading.wall.launch",
        "numba.cuda",
    ):
        importlib.import_module(name)
    from course import exercises

    exercises.all_exercises()  # their modules (kernels, sizes) load now
    # what the lessons' set-up cells import (``prepare.cell_imports``), once for every fork
    for name in filter(None, os.environ.get(WARM_IMPORTS, "").split(",")):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - `from m import function`: not a module
            continue
    try:  # the worker's cell transformer
        from IPython.core.inputtransformer2 import TransformerManager  # noqa: F401
    except ImportError:
        pass
    if course.MODE == "gpu":
        from numba.cuda.cudadrv.driver import driver

        warm_compiler()
        if driver.is_initialized:  # a CUDA context does not survive a fork
            raise RuntimeError("an import started CUDA in the zygote")


def warm_compiler() -> None:
    """NVVM loaded and numba's CUDA target set up once, here, by compiling a one-line kernel
    to PTX for a named GPU (no device asked, no driver started: checked on an H200), so a
    forked measurer's first compile takes ~0.15 s, not ~0.6 s (``assets/profiles/
    warmup-parts-*.txt``).  Where it cannot, each fork pays that itself."""
    from .gate import TARGETS

    try:
        from numba import cuda

        cuda.compile_ptx(lambda x: None, "void(float32[::1])", cc=TARGETS[-1])
    except Exception:  # noqa: BLE001, S110 - an old toolkit or no NVVM: nothing warmed
        pass


def serve(sock: socket.socket) -> None:
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_REQUEST, 16)
        except OSError:
            return
        if not data:
            return
        req = json.loads(data)
        op = req.get("op")
        if op == "spawn":
            reply = _spawn(req, fds)
        elif op == "reap":
            pid = int(req["pid"])
            try:
                _, status = os.waitpid(pid, 0)
                reply = {"status": os.waitstatus_to_exitcode(status)}
            except ChildProcessError:
                reply = {"status": None}
        else:
            return
        sock.sendall(json.dumps(reply).encode() + b"\n")


def _spawn(req: dict, fds: list[int]) -> dict:
    try:
        if len(os.listdir("/proc/self/task")) != 1:
            return {"error": "the zygote has more than one thread: it cannot fork safely"}
        if len(fds) < 3 or (req.get("module") not in MODULES and not req.get("probe")):
            return {"error": "a spawn request needs two pipes, a log and a course module"}
        pid = os.fork()
        if pid == 0:
            _fork_body(req, fds)
        return {"pid": pid}
    finally:
        for fd in fds:
            os.close(fd)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # it ends with the grader
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the grader stops it, not a Ctrl-C
    import resource

    # no core file, ever: a fork that ends by the signal its sandbox died of (SIGSEGV) must
    # not dump its memory into the zygote's folder, the grader's run folder
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sock = socket.socket(fileno=int(argv[0]))
    if os.getppid() == 1:
        return 1
    try:
        _warm(argv[1])
        ready: dict = {"ready": True}
    except Exception as exc:  # noqa: BLE001 - the grader then starts its children cold
        ready = {"ready": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    import gc

    gc.collect()
    gc.freeze()  # the heap stays shared with every fork (copy on write)
    sock.sendall(json.dumps(ready).encode() + b"\n")
    serve(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
