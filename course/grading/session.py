"""Grading one submission: the trusted side of the conversation with ``worker.py``.

The grader's own process keeps everything a verdict depends on: the seed, every case's
inputs and float64 reference, the list of cases (public and hidden) and the comparison
(``judge.py``).  The worker, a fresh process that runs the student's cells, gets one request
at a time over a pipe this side owns:

    run cell i  ->  "ran" (did it fail? does it define the exercise's function?)
    launch      ->  the same guarded buffers, after the student's kernel ran on them
    value name  ->  the student's answer (predict exercises)

and the verdict is computed here from what came back.  Whatever the worker sends out of turn,
malformed, with other arrays or shapes than were sent, or not at all, ends the conversation:
a reply that does not fit is *tampering* (the exercise in progress gets 0 points and the
instructor a note), silence past the time limit is a *timeout*, a dead worker a *crash*.
The events this returns are written by this side only, so a student cannot add, drop or
repeat a case.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import exercises as _ex
from .check import measure_failed, run_cases
from .launch import TIME_LIMIT_S
from .report import CaseResult
from .wire import Channel, WireError

from ..resources import IMPORT_ROOT as REPO


class Tampered(Exception):
    """The worker said something the protocol does not allow."""


@dataclass
class Outcome:
    """What grading one submission produced (all of it decided on this side)."""

    events: list = field(default_factory=list)    # mode/start/cell_error/exercise/tampered
    status: str = "graded"                        # graded | timeout | crashed | tampered
    last: str = ""                                # last words of a crashed worker


def grade_steps(steps: list[dict], seed: int, timeout: float, memory_mb: int,
                case_time_limit: float | None, *, mode: str, isolation=None) -> Outcome:
    """Run ``steps`` (from ``batch.make_steps``) in a worker and judge every exercise."""
    out = Outcome()
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        worker = _Worker(Path(tmp), deadline, memory_mb, timeout, isolation)
        try:
            hello, _ = worker.chan.recv()
            if hello.get("op") != "hello":
                raise Tampered("the worker's first message was not its greeting")
            out.events.append({"event": "mode", "mode": mode})
            for n, step in enumerate(steps):
                _run_step(worker, n, step, seed, case_time_limit or TIME_LIMIT_S[mode], out,
                          mode)
            worker.chan.send({"op": "bye"})
            worker.finish()
            out.events.append({"event": "done"})
        except WireError as exc:
            if not (exc.timed_out or exc.closed):
                _tampered(out, str(exc))
            else:
                out.status = "timeout" if exc.timed_out else "crashed"
            worker.stop()
            out.last = worker.last_words()
        except Tampered as exc:
            _tampered(out, str(exc))
        finally:
            worker.stop()
    return out


def _tampered(out: Outcome, message: str) -> None:
    out.status = "tampered"
    current = next((e["exercise"] for e in reversed(out.events) if e["event"] == "start"), None)
    out.events.append({"event": "tampered", "exercise": current, "message": message})


def _run_step(worker, n: int, step: dict, seed: int, limit: float, out: Outcome,
              mode: str) -> None:
    ex = step.get("exercise")
    out.events.append({"event": "start", "label": step["label"], "exercise": ex})
    reply, _ = worker.ask({"op": "run", "step": n, "label": step["label"],
                        "source": step["source"], "want": step.get("function"),
                        "exercise": ex}, "ran", n)
    error = reply.get("error")
    if error is not None and not isinstance(error, str):
        raise Tampered("a cell's error message was not text")
    if error:
        out.events.append({"event": "cell_error", "label": step["label"], "kind": step["kind"],
                           "exercise": ex, "message": error[:500]})
    if not ex:
        return
    spec, fn = _ex.get(ex), step["function"]
    have = reply.get("have")
    if have not in ("kernel", "value", "missing", "other"):
        raise Tampered(f"the worker did not say whether `{fn}` is defined")
    if have == "missing":
        out.events.append({"event": "exercise", "name": ex, "cases": [], "error": (
            f"your {ex} cell does not define `{fn}`" if not error else
            f"`{fn}` was not defined because the cell failed: {error}")})
        return
    if spec.kind == "predict":
        cases, err = _judge_answer(worker, n, spec, fn), ""
    elif have != "kernel":
        cases, err = [], (f"`{fn}` is not a CUDA kernel: decorate it with @cuda.jit "
                          f"(expected {spec.signature})")
    else:
        cases = run_cases(spec, fn, seed, True, limit, launch=_remote_launch(worker, n))
        err = ""
        if spec.kind == "tune" and cases and all(c.passed for c in cases):
            cases.append(_judge_measure(worker, n, spec, fn, mode))
    out.events.append({"event": "exercise", "name": ex, "error": err, "cases": [
        {"name": c.name, "launch": c.launch, "hidden": c.hidden, "passed": c.passed,
         "message": c.message} for c in cases]})


def _remote_launch(worker, n: int):
    """A ``launch`` for ``check.run_cases`` that has the worker run the kernel on the
    judge's buffers; whatever comes back that was not sent is tampering."""
    def launch(spec, fn, case, buffers, scalars, shapes, limit, race_hunt):
        header = {"op": "launch", "step": n, "exercise": spec.name, "function": fn,
                  "case": {"name": case.name, "params": case.params, "grid": case.grid,
                           "block": case.block, "shared_bytes": case.shared_bytes},
                  "shapes": shapes, "scalars": scalars, "time_limit": limit,
                  "race_hunt": race_hunt}
        reply, arrays = worker.ask(header, "launched", n, buffers)
        error = reply.get("error")
        if error:
            if not isinstance(error, str):
                raise Tampered("a launch error was not text")
            return {}, error[:1000], reply.get("timed_out") is True
        if set(arrays) != set(buffers) or any(
                arrays[k].shape != v.shape or arrays[k].dtype != v.dtype
                for k, v in buffers.items()):
            raise Tampered("a launch sent back other arrays than it was given")
        return arrays, None, False
    return launch


def _judge_measure(worker, n: int, spec, fn: str, mode: str) -> CaseResult:
    """A tune exercise's figure: measured in the worker (it must run the kernel), judged
    here against the target.  The figure is the one number a student process reports
    about itself; correctness, which it cannot fake, was judged above."""
    reply, _ = worker.ask({"op": "measure", "step": n, "exercise": spec.name,
                           "function": fn}, "measured", n)
    if reply.get("error") is not None:
        return measure_failed(str(reply["error"]))
    figures = reply.get("figures")
    if not isinstance(figures, dict):
        raise Tampered("a measurement came back without figures")
    return spec.judge_figures(figures, mode)


def _judge_answer(worker, n: int, spec, name: str) -> list:
    reply, _ = worker.ask({"op": "value", "step": n, "name": name}, "value", n)
    if reply.get("defined") is not True:
        raise Tampered("the worker lost a name it said was defined")
    if "unreadable" in reply:
        res = CaseResult("your answer", "-")
        res.fail(f"`{name}` holds a {reply['unreadable']}, not a number, a string or a list")
        return [res]
    return spec.judge_answer(reply.get("value"), hidden=True)


class _Worker:
    """The worker process and our ends of its two pipes."""

    def __init__(self, tmp: Path, deadline: float, memory_mb: int, timeout: float, isolation):
        req_r, req_w = os.pipe()       # we write requests, it reads
        rep_r, rep_w = os.pipe()       # it writes replies, we read
        env = dict(os.environ, COURSE_PROGRESS_FILE=str(tmp / "progress.json"),
                   COURSE_HIDDEN_DIR=str(tmp / "no-hidden-cases"), PYTHONDONTWRITEBYTECODE="1",
                   MPLBACKEND="Agg", MPLCONFIGDIR=str(tmp / "mpl"))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "course.grading.worker", str(req_r), str(rep_w)]
        if isolation is not None:
            cmd = isolation.wrap(cmd)
        (tmp / "cwd").mkdir()
        self.log_path = tmp / "log.txt"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=tmp / "cwd", env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, start_new_session=True, pass_fds=(req_r, rep_w),
                preexec_fn=_limits(timeout, memory_mb) if os.name == "posix" else None)
        os.close(req_r)
        os.close(rep_w)
        self.chan = Channel(rep_r, req_w, deadline)

    def ask(self, header: dict, op: str, step: int, arrays: dict | None = None):
        """Send one request and read its one reply; Tampered if the reply does not fit."""
        self.chan.send(header, arrays)
        reply, got = self.chan.recv()
        if reply.get("op") != op or reply.get("step") != step:
            raise Tampered(f"expected the worker's {op!r} reply to step {step + 1}, got "
                           f"{str(reply.get('op'))[:40]!r} for step {reply.get('step')!r}: "
                           "something else wrote to the grader's pipe")
        return reply, got

    def finish(self) -> None:
        try:
            self.proc.wait(timeout=max(1.0, self.chan.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        _kill(self.proc)      # the worker's whole process group, children it started too
        for fd in (self.chan.rfd, self.chan.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.chan.rfd = self.chan.wfd = -1

    def last_words(self) -> str:
        rc = self.proc.returncode
        crash = _signal_name(rc) if rc else ""
        try:
            tail = [l for l in self.log_path.read_text(errors="replace").splitlines()
                    if l.strip()]
        except OSError:
            tail = []
        if crash:
            return crash
        if rc == 0:
            return "the worker exited before grading was over (os._exit or sys.exit?)"
        return tail[-1][:200] if tail else ""


# ---------------------------------------------------------------------------------------
# the worker process: limits, killing, exit codes

def _limits(timeout: float, memory_mb: int):
    """preexec_fn: resource limits for the worker (POSIX only; best effort)."""
    def apply():
        try:
            import resource
        except ImportError:
            return
        wanted = [(resource.RLIMIT_CORE, 0),
                  (resource.RLIMIT_CPU, int(2 * timeout) + 30),
                  (resource.RLIMIT_FSIZE, 512 << 20)]
        if memory_mb:
            wanted.append((resource.RLIMIT_AS, memory_mb << 20))
        for which, value in wanted:
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass
    return apply


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # the worker and anything it started
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
