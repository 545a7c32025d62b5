"""Reading a submission: in a reader process, off the service's event loop, with a deadline.

``POST /api/submissions`` answers who you are, the rate, your queue, your judge time and
your storage (``app.py``) from the request alone; only then is the submission *read*:
its file parsed and its kernel's unit made without running it (``fromfile.py``), or the
unit it sent checked as data (``course.grading.source.unit.validate``).  That reading is bounded
by the input's size (explicit depth and count limits in ``fromfile`` and
``grading/source/values.py``), and it still happens elsewhere:

- in one of :data:`READERS` reader processes (``python -m course.leaderboard.reading``,
  started once and kept: the imports take seconds, a read milliseconds), which get no
  leaderboard secret in their environment, and which run in the grading sandbox where the
  service has one (``serve`` without ``--isolation none``): no database, no token file, no
  other process, no socket;
- the request and the answer are JSON over the reader's own pipes (``grading/wall/wire.py``:
  sizes checked, never unpickled), and the answer must come within :data:`READ_S`, else
  the reader is killed (a fresh one starts for the next submission) and the request gets
  ``503``: a reader that needed that long is the course's bug, logged;
- the event loop waits for none of it (a thread waits on the pipe), so ``/api/health`` and
  every other request answer while any submission is being read.

What the reader answers: the source and unit to store (the unit is what is judged), or the
``4xx`` and course sentence that refuse it (:func:`read`).
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time

from .limits import Refused

READERS = 2  # reader processes (each reads one submission at a time)
READ_S = 10.0  # one submission's read, at most (a read takes milliseconds)
START_S = 120.0  # a reader's start (numba's imports), at most
MAX_SOURCE = 64 << 10  # characters of a submitted file
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")  # "Trojan Source"
MAX_MESSAGE = 8 << 20  # bytes of JSON in a request to a reader, or its answer
log = logging.getLogger("course.leaderboard")


# ---------------------------------------------------------------------------------------
# in the reader process


def read(request: dict) -> tuple[str, dict]:
    """(source, unit) of a submission, checked: with a unit (``course.submit``), the unit
    is what is judged, so the source stored is the unit's (a ``"source"`` that differs is
    refused); a file is read as data (``fromfile.py``: nothing run) and its kernel's unit
    is what is judged.  Refused (4xx, one sentence) otherwise."""
    from .fromfile import FileError, unit_of_file

    source, function, unit = request.get("source"), request.get("function"), request.get("unit")
    if unit is not None:
        unit = _check_unit(unit, function)
        if source is None:
            source = unit["source"]
        elif source != unit["source"]:
            raise Refused(
                422,
                '"source" is not the unit\'s source, and the unit is what is '
                "judged: send the unit's source (course.submit does)",
            )
    shape(source, function)
    assert isinstance(source, str) and isinstance(function, str)
    try:
        tree = ast.parse(source)
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
        jitted = bool(defs) and any("jit" in ast.unparse(d) for d in defs[-1].decorator_list)
    except SyntaxError as exc:
        raise Refused(422, f"the source does not compile: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, deep nesting
        raise Refused(
            422, f"the source cannot be read as Python ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    if not defs:
        raise Refused(422, f"the source defines no function `{function}` at its top level")
    if not jitted:
        raise Refused(422, f"`{function}` is not decorated with @cuda.jit")
    if unit is None:  # a file: read as data, never run; its unit is what is judged
        try:
            unit = unit_of_file(source, function, tuple(request.get("extra_names") or ()))
        except FileError as exc:
            raise Refused(422, f"this file cannot be judged: {exc}") from None
    return source, unit


def shape(source, function) -> None:
    """Refused unless the fields have the types and sizes a submission has (cheap: the
    service asks this before any reading)."""
    if not isinstance(source, str) or not isinstance(function, str) or not source.strip():
        raise Refused(
            400, '"source" (the file\'s text) and "function" (the kernel\'s name) must be strings'
        )
    if len(source) > MAX_SOURCE:
        raise Refused(413, f"the source is {len(source):,} characters; the limit is {MAX_SOURCE:,}")
    if not function.isidentifier():
        raise Refused(422, f"{function[:80]!r} is not a Python function name")
    bidi = BIDI.search(source)
    if bidi:
        line = source.count("\n", 0, bidi.start()) + 1
        raise Refused(
            422,
            f"line {line} of the source holds the Unicode direction control U+"
            f"{ord(bidi.group()):04X}, which makes code read differently from how it runs "
            "(the service shows your source to others): remove it",
        )


def _check_unit(unit, function) -> dict:
    """The unit, checked as data (``course.grading.source.unit``), else Refused (422)."""
    from ..grading.source.decorator import UnitError
    from ..grading.source.unit import parse, validate

    try:
        validate(unit)
        parse(unit["source"], unit["name"])
    except UnitError as exc:  # every malformed unit is the sender's, said in a sentence
        raise Refused(422, f"the kernel unit cannot be used: {str(exc)[:300]}") from None
    if unit["name"] != function:
        raise Refused(422, 'the unit\'s function is not the one named in "function"')
    return unit


def _answer(request: dict) -> dict:
    try:
        source, unit = read(request)
    except Refused as exc:
        return {"refused": [exc.status, exc.message]}
    except Exception as exc:  # noqa: BLE001 - the course's bug: logged, said, nothing stored
        from ..grading.classroom.verdicts import course_failure

        return {"failed": course_failure("reading this submission", exc)}
    if request.get("unit") is not None:
        return {"unit": None}  # the unit the request sent is the one to store
    size = len(json.dumps(unit))  # a file's unit: device functions counted per call path
    if size > MAX_MESSAGE - 1024:
        return {
            "refused": [
                413,
                f"the kernel's unit is {size:,} bytes (each device function counted once "
                f"per call path); the limit is {MAX_MESSAGE - 1024:,}",
            ]
        }
    return {"unit": unit}


def _serve(rfd: int, wfd: int) -> None:
    """The reader's loop: a request in, an answer out, until the service closes the pipe."""
    import numba.cuda  # noqa: F401 - the imports a read needs, once, before "ready"

    from ..grading.source import unit  # noqa: F401
    from ..grading.wall.wire import Channel, WireError
    from . import fromfile  # noqa: F401

    ch = Channel(rfd, wfd)
    ch.max_header = MAX_MESSAGE
    ch.send({"ready": True})
    while True:
        try:
            request, _ = ch.recv()
        except WireError:
            return  # the service closed the pipe, or is gone
        ch.send(_answer(request))


# ---------------------------------------------------------------------------------------
# in the service


class Reader:
    """One reader process and the service's end of its pipes."""

    def __init__(self, isolation=None):
        from ..grading.wall.child import PYTHON
        from ..grading.wall.wire import Channel

        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_LEADERBOARD")}
        cmd = [PYTHON, "-m", "course.leaderboard.reading", str(to_child), str(from_child)]
        if isolation is not None:  # the grading sandbox: no database, tokens, /proc or env
            from pathlib import Path

            from ..grading.wall.child import child_env

            env = child_env(Path(isolation.scratch))
            cmd = isolation.wrap(cmd, env)
        self.proc = subprocess.Popen(
            cmd,
            pass_fds=(to_child, from_child),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        os.close(to_child)
        os.close(from_child)
        self.channel = Channel(to_parent, from_parent, deadline=time.monotonic() + START_S)
        self.channel.max_header = MAX_MESSAGE
        try:
            hello, _ = self.channel.recv()
            if hello.get("ready") is not True:
                raise RuntimeError("the reader did not start")
        except BaseException:
            self.close()
            raise

    def ask(self, request: dict, within: float) -> dict:
        self.channel.deadline = time.monotonic() + within
        self.channel.send(request)
        reply, _ = self.channel.recv()
        return reply

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for fd in (self.channel.rfd, self.channel.wfd):
            try:
                os.close(fd)
            except OSError:
                pass


class Readers:
    """Up to ``count`` reader processes, each reading one submission at a time."""

    def __init__(self, count: int = READERS, read_s: float = READ_S, isolation=None):
        self.read_s, self.isolation = read_s, isolation  # isolation: the grading sandbox
        self._free: list[Reader | None] = [None] * count
        self._cond = threading.Condition()

    def warm(self) -> None:
        """Start the reader processes now, side by side, and return when they are up (the
        service calls this before it answers: no submission waits for numba's imports)."""
        taken = [self._take(START_S) for _ in range(len(self._free))]
        started: list = [None] * len(taken)

        def start(k: int) -> None:
            try:
                started[k] = taken[k] if taken[k] is not None else Reader(self.isolation)
            except Exception as exc:  # noqa: BLE001 - the first submission starts one
                log.error("a submission reader did not start: %s: %s", type(exc).__name__, exc)

        threads = [threading.Thread(target=start, args=(k,)) for k in range(len(taken))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for reader in started:
            self._give(reader)

    async def read(self, request: dict) -> tuple[str, dict]:
        """(source, unit) the reader answered for ``request`` (``{"source", "function",
        "unit", "extra_names"}``), else Refused; the event loop never waits for it."""
        reply = await asyncio.to_thread(self._read, request)
        if "refused" in reply:
            status, message = reply["refused"]
            raise Refused(int(status), str(message)[:2000])
        if "failed" in reply:
            raise Refused(500, str(reply["failed"])[:2000])
        unit = request["unit"] if reply.get("unit") is None else reply["unit"]
        source = request["source"] if request.get("source") is not None else unit["source"]
        if not isinstance(source, str) or not isinstance(unit, dict):
            raise Refused(500, "the leaderboard's reader answered nonsense; tell your instructor")
        return source, unit

    def _read(self, request: dict) -> dict:
        from ..grading.wall.wire import WireError

        reader = self._take(self.read_s)
        try:
            if reader is None:
                reader = Reader(self.isolation)
            reply = reader.ask(request, self.read_s)
        except (WireError, OSError, RuntimeError) as exc:
            if reader is not None:
                reader.close()
            reader = None
            log.error("reading a submission failed: %s: %s", type(exc).__name__, exc)
            return {
                "refused": [
                    503,
                    "the leaderboard could not read this submission in time "
                    f"({self.read_s:g} s; {str(exc)[:80]}); try again in a minute, and "
                    "tell your instructor if it persists",
                ]
            }
        finally:
            self._give(reader)
        return reply

    def _take(self, within: float) -> Reader | None:
        """A free slot's reader (None: start one); Refused (503) when none is free."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._free, timeout=within):
                raise Refused(
                    503,
                    "the leaderboard is reading many submissions at once; try again in a minute",
                    {"Retry-After": "30"},
                )
            return self._free.pop()

    def _give(self, reader: Reader | None) -> None:
        with self._cond:
            self._free.append(reader)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            for reader in self._free:
                if reader is not None:
                    reader.close()
            self._free = [None] * len(self._free)


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
