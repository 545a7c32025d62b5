"""A worker, measurer or gate process of the grader (``session.py``): started in the sandbox
(``isolate.py``) with an environment of its own (:func:`child_env`) and its limits (CPU
time, file size, memory where the mode allows one, a cgroup), spoken to over two pipes this
side owns (``wire.py``), and stopped with everything it started.

Any module whose ``main`` takes the two pipe descriptors (``python -m MODULE REQ_FD REP_FD``,
as ``worker.py`` and ``measurer.py`` do) starts the same way::

    Child("course.grading.wall.gate", tmp / "gate", deadline, memory_mb, timeout, isolation,
          env_extra={"NUMBA_ENABLE_CUDASIM": "0"})
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from ...platform.resources import IMPORT_ROOT as REPO
from . import tree
from .wire import Channel, widen

# this interpreter by a path every sandbox's tree has: ``..`` resolved (``../.venv/bin/python``
# names a folder the tree lacks); what the grader starts in a sandbox runs this
PYTHON = os.path.abspath(sys.executable)

# A child's whole environment: nothing of the grader's (its cloud keys, hub and service
# tokens) but these names, read from the grader's environment when set ...
PASSED = (
    "NUMBA_ENABLE_CUDASIM",
    "COURSE_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
)
PASSED_PREFIXES = ("NUMBA_CUDA_",)
# ... and these, fixed
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# One hardware work queue per CUDA context instead of 8: a sandbox launches on one stream,
# and a context's queues are made under the driver's lock, which every process on the
# machine, on every GPU, waits for (24 contexts made at once on an H200: 3.6 s each with 8,
# 1.3 s with 1 - assets/profiles/contention-*.json).
GPU_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def child_env(scratch: Path, extra: dict | None = None) -> dict:
    """The environment of a sandboxed process whose only writable folder is ``scratch``: an
    allowlist (:data:`PASSED`, ``NUMBA_CUDA_*``), a fixed ``PATH`` and locale, home, temp
    and caches in ``scratch``, the course on ``PYTHONPATH``, :data:`GPU_ENV`; then
    ``extra``."""
    scratch = Path(scratch)
    env = {k: v for k, v in os.environ.items() if k in PASSED or k.startswith(PASSED_PREFIXES)}
    paths = [str(REPO)] + [
        p
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if os.path.isabs(p) and p != str(REPO)
    ]
    env.update(
        PATH=SAFE_PATH,
        LANG="C.UTF-8",
        LC_ALL="C.UTF-8",
        HOME=str(scratch),
        TMPDIR=str(scratch),
        MPLCONFIGDIR=str(scratch / "mpl"),
        NUMBA_CACHE_DIR=str(scratch / "numba"),
        PYTHONPATH=os.pathsep.join(paths),
        PYTHONDONTWRITEBYTECODE="1",
        MPLBACKEND="Agg",
        COURSE_PROGRESS_FILE=str(scratch / "progress.json"),
        COURSE_HIDDEN_DIR=str(scratch / "no-hidden-cases"),
        **GPU_ENV,
    )
    env.update(extra or {})
    return env


SETTLE_S = 2.0  # how long a child whose pipes closed may take to end on its own
LIVE: weakref.WeakSet = weakref.WeakSet()  # children not stopped yet (an interrupted run's)
INTERRUPTED = threading.Event()  # set when an interrupted run stops every child under its jobs


def stop_all(interrupted: bool = False) -> None:
    """Stop every child this process started and did not stop yet (``interrupted``: the run
    was cut off, and what its jobs still running see is its stop, not their failure)."""
    if interrupted:
        INTERRUPTED.set()
    for c in list(LIVE):
        try:
            c.stop()
        except Exception:  # noqa: BLE001 - half-started: nothing more to stop
            LIVE.discard(c)


class Tampered(Exception):
    """The worker said something the protocol does not allow."""


class Child:
    """A worker, measurer or gate process (``python -m module REQ_FD REP_FD``) and our ends
    of its two pipes; ``env_extra``: what its environment needs beyond :func:`child_env`."""

    def __init__(
        self,
        module: str,
        tmp: Path,
        deadline: float,
        memory_mb: int,
        timeout: float,
        isolation,
        sandbox_mb: int | None = None,
        env_extra: dict | None = None,
    ):
        self.t0 = time.perf_counter()
        self.phases: Any = None  # a ``phases.Phases`` to time its start in
        self.stopping = threading.Lock()
        LIVE.add(self)
        tmp.mkdir()
        req_r, req_w = os.pipe()  # we write requests, it reads
        rep_r, rep_w = os.pipe()  # it writes replies, we read
        for fd in (req_w, rep_r):
            widen(fd)
        scratch = Path(isolation.scratch) if isolation is not None else tmp
        env = child_env(scratch, env_extra)  # e.g. the compile gate: NUMBA_ENABLE_CUDASIM=0
        cmd = [PYTHON, "-m", module, str(req_r), str(rep_w)]
        if isolation is not None:  # Nsight Compute waits with epoll (``tree.PROFILER``)
            keep = tree.PROFILER if module == "course.grading.wall.counter" else ()
            cmd = isolation.wrap(cmd, env, keep)
        (tmp / "cwd").mkdir()
        self.log_path = tmp / "log.txt"
        self.cgroup = None
        if isolation is not None:
            from .cgroup import GPU_PIDS_MAX, PIDS_MAX, Cgroup

            self.cgroup = Cgroup(
                f"course-{os.getpid()}-{tmp.parent.name}-{tmp.name}",
                sandbox_mb or memory_mb or None,
                PIDS_MAX if tree.simulated(env) else GPU_PIDS_MAX,
            )
        procs = self.cgroup.procs_files() if self.cgroup is not None else []
        forks = getattr(isolation, "forks", None)
        self.forked = False
        try:
            with open(self.log_path, "wb") as log:
                if forks is not None:  # a warm sandbox, forked from a zygote (forks.py)
                    self.proc = forks.child(
                        module,
                        env,
                        self.log_path,
                        procs,
                        int(2 * timeout) + 30,
                        memory_mb,
                        (req_r, rep_w),
                    )
                    self.forked = self.proc is not None
                if not self.forked:
                    self.proc = self._popen(
                        cmd, tmp, env, log, req_r, rep_w, timeout, memory_mb, procs
                    )
        finally:
            for fd in procs:
                os.close(fd)
        os.close(req_r)
        os.close(rep_w)
        self.chan = Channel(rep_r, req_w, deadline)

    @staticmethod
    def _popen(cmd, tmp, env, log, req_r, rep_w, timeout, memory_mb, procs):
        """The child started cold: a new interpreter in a new sandbox."""
        return subprocess.Popen(
            cmd,
            cwd=tmp / "cwd",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            pass_fds=(req_r, rep_w),
            preexec_fn=_limits(timeout, memory_mb, procs, env) if os.name == "posix" else None,
        )

    def greeted(self) -> None:
        hello, _ = self.chan.recv()
        if hello.get("op") != "hello":
            raise Tampered("the worker's first message was not its greeting")
        if self.phases is not None:  # its start, and what it says its imports took
            from ..phases import reported

            took = time.perf_counter() - self.t0
            imports = min(reported(hello.get("took"), took) or 0.0, took)
            warm = reported(hello.get("warm"), imports) or 0.0  # a GPU measurer's warm-up
            context = reported(hello.get("context"), warm) or 0.0  # ... its CUDA context
            self.phases.moved("sandbox start", took - imports)
            self.phases.moved("imports", imports - warm)
            if warm:
                self.phases.moved("gpu warm-up", warm - context)
                self.phases.moved("gpu warm-up: context", context)

    def ask(
        self,
        header: dict,
        op: str,
        step: int | None = None,
        arrays: dict | None = None,
        expect: dict | None = None,
    ):
        """Send one request and read its one reply; Tampered if the reply does not fit.

        ``expect``: the arrays the reply may carry (name -> (dtype, shape), ``wire.recv``);
        none when not given.  A reply announcing more is refused before its data is read
        (WireError, which the caller treats as tampering)."""
        self.chan.send(header, arrays)
        reply, got = self.chan.recv(expect or {})
        if reply.get("op") != op or reply.get("step") != step:
            raise Tampered(
                f"expected the {op!r} reply to step {step}, got "
                f"{str(reply.get('op'))[:40]!r} for step {reply.get('step')!r}: "
                "something else wrote to the grader's pipe"
            )
        return reply, got

    def finish(self) -> None:
        try:
            deadline = self.chan.deadline if self.chan.deadline is not None else time.monotonic()
            self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass

    def settle(self, seconds: float = SETTLE_S) -> None:
        """Its pipes closed: give it ``seconds`` to end on its own, so that its own exit
        status (a SIGSEGV, not the SIGKILL of :meth:`stop`) is what :meth:`last_words` says."""
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        LIVE.discard(self)
        _kill(self.proc)  # the sandbox's first process: its PID namespace ends with it
        if self.cgroup is not None:
            self.cgroup.remove()
        with self.stopping:  # its job's thread and an interrupted run's stop: closed once
            fds, self.chan.rfd, self.chan.wfd = (self.chan.rfd, self.chan.wfd), -1, -1
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def last_words(self) -> str:
        rc = self.proc.returncode
        if rc:
            return _signal_name(rc)
        if rc == 0:
            return "the worker exited before grading was over (os._exit or sys.exit?)"
        try:
            tail = [l for l in log_tail(self.log_path).splitlines() if l.strip()]
        except OSError:
            tail = []
        return tail[-1][:200] if tail else ""


LOG_TAIL = 64 << 10  # bytes of a sandbox's log the grader reads: its end, never its 64 MB


def log_tail(path: Path) -> str:
    """The last :data:`LOG_TAIL` bytes of a log a sandboxed process wrote (what it writes is
    the submission's to choose: the grader never holds more of it than this)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - LOG_TAIL))
        return f.read(LOG_TAIL).decode(errors="replace")


# ---------------------------------------------------------------------------------------
# the worker process: limits, killing, exit codes


def _limits(timeout: float, memory_mb: int, procs=(), env=None):
    """preexec_fn: join the sandbox's cgroup (``procs``: its ``cgroup.procs`` files, opened
    here) and set the resource limits (POSIX only; best effort).

    Everything is prepared here, in the grader: the function runs in the child between
    ``fork`` and ``exec``, where another thread of the grader may have held the import lock
    or any other lock at the moment of the fork (a GPU grader's threads import and call CUDA
    all the time), so it only makes system calls - no import, no file opened, no text."""
    resource: Any
    try:
        import resource
    except ImportError:
        resource = None
    wanted = [] if resource is None else tree.rlimits(env or {}, int(2 * timeout) + 30, memory_mb)
    procs = tuple(procs)

    def apply():
        for fd in procs:
            try:
                os.write(fd, b"%d" % os.getpid())
            except OSError:
                pass
        for which, value in wanted:
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass

    return apply


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and anything it started
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
    proc.wait()


def _signal_name(rc) -> str:
    if rc is not None and rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}" if rc else ""
