"""Warm sandboxes: the grader's side of the zygotes (``zygote.py``).

Starting a grading child cold costs a Python interpreter, ``import course`` and numba, and
for the compile gate the compiler's first load: about a second each, three children per
submission.  With :class:`Forks` on an :class:`isolate.Isolation` (``grade`` turns it on;
``--cold`` keeps every child cold, as before), ``child.Child`` asks a zygote instead: one
per kind (``run``: worker and measurer; ``gate``: the compiler), started once per grading
process with the children's own environment, tried once with the sandbox's probe
(``probe.PROBE``, plus no capability left) before its first real fork.  A zygote that
cannot start, or whose probe fails, is not used again: its children start cold, and the
run says so once.

A fork is watched here through a pidfd (:class:`Forked`: what ``child.Child`` needs of a
``subprocess.Popen``), killed through it, and reaped by its zygote, which keeps the pid
until then.  Nothing a fork says reaches a zygote: the zygote reads only this side's
requests.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .child import PYTHON
from .tree import simulated

START_S = 180.0  # a zygote's imports (and compiler warm-up) on a busy machine
ANSWER_S = 30.0  # one reply of a zygote
MAX_REPLY = 4096
KINDS = ("run", "gate")  # a worker's and measurer's zygote, the compile gate's
# a zygote must stay one thread to fork safely: numpy's BLAS starts a pool at import
# unless told not to (its forks then keep one BLAS thread, as a job slot should)
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class ZygoteError(Exception):
    """A zygote did not start, or did not answer as it must."""


class Forked:
    """A forked sandbox, as ``child.Child`` uses a ``subprocess.Popen``: ``pid``, ``poll``,
    ``wait``, ``kill``, ``returncode`` (negative: killed by that signal)."""

    def __init__(self, zygote: Zygote, pid: int):
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None
        self.pidfd = os.pidfd_open(pid)
        self.reaping = threading.Lock()  # a job's thread and an interrupted run's stop

    def _ended(self, timeout: float | None) -> bool:
        fd = self.pidfd
        if fd < 0:
            return True
        try:
            return bool(select.select([fd], [], [], timeout)[0])
        except (OSError, ValueError):  # reaped and closed by another thread meanwhile
            return True

    def poll(self):
        if self.returncode is None and self._ended(0):
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None):
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(f"sandbox {self.pid}", timeout or 0)
            self._reap()
        return self.returncode

    def kill(self) -> None:
        with self.reaping:
            if self.returncode is None and self.pidfd >= 0:
                try:
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _reap(self) -> None:
        """Its exit status from the zygote and its pidfd closed: once, whichever thread
        comes first (a stopped run's zygote gone: killed)."""
        with self.reaping:
            if self.pidfd < 0:
                return
            try:
                status = self.zygote.ask({"op": "reap", "pid": self.pid}).get("status")
            except (ZygoteError, OSError, ValueError):
                status = None
            self.returncode = status if isinstance(status, int) else -signal.SIGKILL
            os.close(self.pidfd)
            self.pidfd = -1


class Zygote:
    """One zygote process (``python -m course.grading.wall.zygote SOCK KIND``) and our end of
    its socket; every request and its reply under one lock."""

    def __init__(self, kind: str, env: dict, folder: Path):
        self.kind, self.lock = kind, threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock, self.buf = ours, b""
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / f"zygote-{kind}.log"
        try:
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(
                    [
                        PYTHON,
                        "-m",
                        "course.grading.wall.zygote",
                        str(theirs.fileno()),
                        kind,
                    ],
                    cwd=folder,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    pass_fds=(theirs.fileno(),),
                )
        finally:
            theirs.close()
        ready = self._line(START_S)
        if not ready.get("ready"):
            self.close()
            raise ZygoteError(str(ready.get("error") or "it did not start")[:300])

    def _line(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or len(self.buf) > MAX_REPLY:
                raise ZygoteError(f"the {self.kind} zygote did not answer")
            self.sock.settimeout(left)
            try:
                got = self.sock.recv(MAX_REPLY)
            except OSError as exc:
                raise ZygoteError(f"the {self.kind} zygote did not answer ({exc})") from None
            if not got:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-1:]
                raise ZygoteError(
                    f"the {self.kind} zygote ended" + (f": {tail[0][:200]}" if tail else "")
                )
            self.buf += got
        line, self.buf = self.buf.split(b"\n", 1)
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise ZygoteError(f"the {self.kind} zygote's answer is not an object")
        return reply

    def ask(self, request: dict, fds: tuple[int, ...] = ()) -> dict:
        with self.lock:
            socket.send_fds(self.sock, [json.dumps(request).encode()], list(fds))
            return self._line(ANSWER_S)

    def spawn(self, request: dict, fds: tuple[int, ...]) -> Forked:
        reply = self.ask({"op": "spawn", **request}, fds)
        if not isinstance(reply.get("pid"), int):
            raise ZygoteError(str(reply.get("error") or "no pid")[:300])
        return Forked(self, reply["pid"])

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            try:
                self.proc.kill()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass


class Forks:
    """The zygotes of one grading process, started on first use, one per kind; ``spawn``
    returns a :class:`Forked`, or None where the child must start cold."""

    def __init__(self, isolation, log=print, imports: tuple = ()):
        self.isolation, self.log = isolation, log
        self.imports = imports  # modules the ``run`` zygote imports for its forks
        self.zygotes: dict[str, Zygote | None] = {}
        self.lock = threading.Lock()  # the zygotes dict
        self.starting = {k: threading.Lock() for k in KINDS}  # one start per kind at a time
        self.said: list[str] = []
        self.closed = False
        self.ended = threading.Event()  # set by close: the zygotes' starting threads end

    def zygote(self, kind: str, env: dict) -> Zygote | None:
        with self.starting[kind]:  # the other kind's start goes on meanwhile
            with self.lock:
                if kind in self.zygotes:
                    return self.zygotes[kind]
            z = self._start(kind, env)
            with self.lock:
                if self.closed:  # the run ended while it started
                    if z is not None:
                        z.close()
                    return None
                self.zygotes[kind] = z
            return z

    def prestart(self, envs: dict) -> None:
        """Start the zygotes of ``envs`` (kind -> the children's environment) now, in the
        background, while the grader does its own start-up (the GPU's ceilings)."""

        def keep(kind: str, env: dict) -> None:
            self.zygote(kind, env)
            self.ended.wait()  # a zygote dies with the thread that started it (PDEATHSIG)

        for kind, env in envs.items():
            threading.Thread(target=keep, args=(kind, env), daemon=True).start()

    def _start(self, kind: str, env: dict) -> Zygote | None:
        folder = Path(self.isolation.run_dir) / "zygotes"
        own = {"COURSE_SANDBOX_PROBE_PLANTED": "planted", **ONE_THREAD}
        if kind == KINDS[0] and self.imports:
            from .zygote import WARM_IMPORTS

            own[WARM_IMPORTS] = ",".join(self.imports)
        try:  # variables only the zygote has: its forks must not see them (the probe)
            z = Zygote(kind, dict(env, **own), folder)
        except (ZygoteError, OSError) as exc:
            self._say(f"warm sandboxes ({kind}): off, its children start cold ({exc})")
            return None
        why = self._probe(z, env)
        if why:
            z.close()
            self._say(f"warm sandboxes ({kind}): off, its children start cold (the probe: {why})")
            return None
        return z

    def _probe(self, z: Zygote, env: dict) -> str:
        """Why a fork of ``z`` is not the sandbox it must be (``probe.PROBE``), or ''."""
        from ...platform.resources import PACKAGE

        with (
            tempfile.TemporaryDirectory(prefix="cp-") as outside,
            socket.socket(socket.AF_UNIX) as listener,
        ):
            secret, sock = Path(outside) / "secret", Path(outside) / "s"
            secret.write_text("x")
            listener.bind(str(sock))
            listener.listen(4)
            log = Path(outside) / "log"
            args = [str(secret), str(sock), str(PACKAGE), self.isolation.scratch]
            try:
                proc = self.spawn(z, "probe", env, log, [], 60, 0, probe=args)
                rc = proc.wait(60)
            except (ZygoteError, OSError, subprocess.TimeoutExpired) as exc:
                return str(exc)[:200]
            if rc != 0:
                lines = log.read_text(errors="replace").strip().splitlines()
                return lines[-1][:200] if lines else f"exit code {rc}"
        return ""

    def spawn(
        self,
        z: Zygote,
        module: str,
        env: dict,
        log: Path,
        procs: list[int],
        cpu_s: int,
        memory_mb: int,
        pipes: tuple[int, int] | None = None,
        probe: list[str] | None = None,
    ) -> Forked:
        """A fork of ``z`` running ``module``'s main on ``pipes`` (request read end, reply
        write end), its output in ``log``, in the cgroup whose ``procs`` files are given."""
        plan = self.isolation.tree_plan(env)
        with open(log, "ab") as out:
            owned: tuple[int, ...] = os.pipe() if pipes is None else ()  # the probe's: unused
            try:
                fds = (*(pipes or owned), out.fileno(), *procs)
                return z.spawn(
                    {
                        "module": module,
                        "plan": plan,
                        "cpu_s": cpu_s,
                        "memory_mb": memory_mb,
                        "user_namespace": self.isolation.user_namespace,
                        "probe": probe,
                    },
                    fds,
                )
            finally:
                for fd in owned:
                    os.close(fd)

    def child(self, module, env, log, procs, cpu_s, memory_mb, pipes) -> Forked | None:
        """``child.Child``'s way in: a fork running ``module``, or None (start it cold)."""
        from .zygote import MODULES

        if module not in MODULES:  # a process a zygote does not start (``counter.py``)
            return None
        kind = KINDS[1] if module == "course.grading.wall.gate" else KINDS[0]
        if kind == KINDS[0] and simulated(env) != simulated(os.environ):
            return None  # numba's mode is the zygote's (the grader's): the other one starts cold
        z = self.zygote(kind, env)
        if z is None:
            return None
        try:
            return self.spawn(z, module, env, log, procs, cpu_s, memory_mb, pipes)
        except (ZygoteError, OSError) as exc:
            self._say(f"warm sandboxes ({kind}): a fork failed, starting cold ({exc})")
            return None

    def _say(self, line: str) -> None:
        if line not in self.said:
            self.said.append(line)
            self.log(f"note: {line}")

    def close(self) -> None:
        self.ended.set()
        with self.lock:
            self.closed = True
            for z in self.zygotes.values():
                if z is not None:
                    z.close()
            self.zygotes.clear()
