"""The compile gate: a kernel must compile for a real GPU before any case runs.

numba's CUDA simulator runs a kernel as Python, so it accepts bodies no GPU compiler does: a
``dict``, a ``list``, ``str(x)``, whole-slice arithmetic.  A laptop check would then pass a
kernel that fails on the class GPU.  So every kernel unit (``unit.py``) a check, the grader
or the leaderboard receives is first compiled with numba-cuda's real compiler (NVVM, from
the ``numba-cuda[cu12]`` wheels; no GPU or driver needed) to PTX for :data:`TARGETS`, with
the argument types of the exercise's first launch.  A kernel that does not compile fails
the check with one sentence: numba's reason and the line.

The compiler runs in a separate process with the simulator off (``python -m
course.grading.wall.gate``).  When a class is graded (and on the leaderboard) it is a process of
the submission's own, started inside the sandbox (``isolate.py``) with the submission's
deadline, memory and CPU limits, and it never parses a signature with ``eval``
(``signature.py``) nor runs a name outside the kernel API (``allowed.py``): nothing it reads
is worth stealing, and a slow compile fails that submission alone.  In a notebook it is
started on first use and kept; results are cached by unit and argument types, so
re-running a check costs nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..messages import launch_mismatch, why_not

if TYPE_CHECKING:
    from .child import Child

TARGETS = ((7, 5), (9, 0))  # a T4-class GPU and the H100/H200
COMPILE_TIMEOUT_S = 120.0


class GateUnavailable(Exception):
    """The real compiler could not be started (no NVVM in this install)."""


class GateFailed(Exception):
    """The compiler process did not answer for this unit (it ran out of the submission's
    time, or died); the message is the sentence for the student."""


# ---------------------------------------------------------------------------------------
# argument types of a launch, captured without running anything


class _Capture:
    """Stands in for a kernel: ``spec.launch`` configures and calls it; nothing runs."""

    def __init__(self, fn):
        self.py_func = getattr(fn, "py_func", None)
        self.calls = []

    def __getitem__(self, config):
        return self

    def __call__(self, *args):
        self.calls.append(tuple(describe(a) for a in args))


def launch_types(spec, fn, case, views) -> list:
    """The argument types ``spec.launch`` passes to ``fn`` for ``case`` (each distinct call)."""
    cap = _Capture(fn)
    spec.launch(cap, case, views)
    distinct = {json.dumps(c): c for c in cap.calls}
    return list(distinct.values())


def describe(value):
    """A launch argument as data the compiler process turns into a numba type."""
    if hasattr(value, "dtype") and hasattr(value, "shape") and len(value.shape) > 0:
        return ["array", value.dtype.str, len(value.shape), _layout(value)]
    if isinstance(value, bool):
        return ["scalar", "?"]
    if isinstance(value, int):
        return ["scalar", "<i8"]
    if isinstance(value, float):
        return ["scalar", "<f8"]
    if isinstance(value, complex):
        return ["scalar", "<c16"]
    if hasattr(value, "dtype"):  # a numpy scalar
        return ["scalar", value.dtype.str]
    raise TypeError(f"cannot describe a launch argument of type {type(value).__name__}")


def _layout(a) -> str:
    for probe in ("is_c_contiguous", "is_f_contiguous"):
        f = getattr(a, probe, None)
        if callable(f) and f():
            return "C" if probe == "is_c_contiguous" else "F"
    flags = getattr(a, "flags", None) or getattr(getattr(a, "_ary", None), "flags", None)
    if flags is not None:
        return "C" if flags["C_CONTIGUOUS"] else "F" if flags["F_CONTIGUOUS"] else "A"
    return "A"


# ---------------------------------------------------------------------------------------
# the client: a compiler process, started in the sandbox when a class is graded


class Gate:
    """Compiles units in a child process with the simulator off; caches every answer.

    ``start``: () -> a started :class:`child.Child` running this module.  The grader starts
    one per submission inside the sandbox, with the submission's deadline (``session.py``):
    a slow compile costs that submission alone.  A notebook's gate (:func:`gate`) runs
    unsandboxed - there a student can only fool themselves - with a limit per compile.
    After any failure the process is stopped and the next unit gets a fresh one."""

    def __init__(self, start=None, per_compile_s: float | None = None):
        self._start, self._per_compile_s = start or _start_local, per_compile_s
        self._child: Child | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, str | None] = {}

    def check(self, unit: dict, arg_types: list) -> str | None:
        """None when ``unit`` compiles for every target with each of ``arg_types``; else
        one sentence saying why not.  Raises GateUnavailable if there is no compiler."""
        from ..source.unit import key

        k = key(unit, arg_types, TARGETS)
        if k in self._cache:
            return self._cache[k]
        with self._lock:
            reply = self._ask(
                {"op": "compile", "unit": unit, "calls": arg_types, "targets": TARGETS}
            )
        if reply.get("unavailable"):
            raise GateUnavailable(str(reply["unavailable"])[:300])
        if reply.get("retry"):
            raise GateFailed(reply["error"])
        error = reply.get("error")
        self._cache[k] = error
        return error

    def _ask(self, request: dict) -> dict:
        from .child import Tampered
        from .wire import WireError

        try:
            if self._child is None:
                self._child = self._start()
                self._deadline()
                self._child.greeted()
            self._deadline()
            reply, _ = self._child.ask(request, "compiled")
            if not (reply.get("error") is None or isinstance(reply.get("error"), str)):
                raise Tampered("the compiler's answer is not a sentence")
            return reply
        except (WireError, Tampered, OSError) as exc:
            last = self._child.last_words() if self._child is not None else ""
            self.close()  # restarted after any failure
            if getattr(exc, "timed_out", False):
                return {
                    "retry": True,
                    "error": (
                        "not judged: compiling it ran past the time limit (an enormous unrolled "
                        "loop or a deep chain of inlined device functions?)"
                    ),
                }
            return {
                "retry": True,
                "error": f"the compiler process failed ({exc}"
                + (f"; {last}" if last else "")
                + ")",
            }

    def _deadline(self) -> None:
        # a notebook's gate: a limit per compile
        if self._per_compile_s is not None and self._child is not None:
            self._child.chan.deadline = time.monotonic() + self._per_compile_s

    def close(self) -> None:
        if self._child is not None:
            self._child.stop()
            self._child = None


COMPILER_ENV = {"NUMBA_ENABLE_CUDASIM": "0"}  # the real compiler, whatever the mode


def start_sandboxed(
    tmp: Path,
    deadline: float,
    memory_mb: int,
    timeout: float,
    isolation,
    sandbox_mb: int | None = None,
):
    """A compiler process for one submission: in the sandbox (``isolate.py``) when there
    is one, its time inside the submission's ``deadline``."""
    from .child import Child

    return Child(
        "course.grading.wall.gate",
        Path(tempfile.mkdtemp(prefix="gate-", dir=tmp)) / "g",
        deadline,
        memory_mb,
        timeout,
        isolation,
        sandbox_mb,
        env_extra=COMPILER_ENV,
    )


def _start_local():
    from .child import Child

    tmp = Path(tempfile.mkdtemp(prefix="course-gate-"))
    atexit.register(shutil.rmtree, tmp, True)
    return Child(
        "course.grading.wall.gate",
        tmp / "g",
        time.monotonic() + COMPILE_TIMEOUT_S,
        LOCAL_MEMORY_MB,
        LOCAL_CPU_S,
        None,
        env_extra=COMPILER_ENV,
    )


LOCAL_CPU_S = 3600.0  # a notebook's gate process: CPU seconds before it is restarted
LOCAL_MEMORY_MB = 8192  # ... and its address space (the compiler needs about 1 GB)

_GATE: list[Gate] = []


def gate() -> Gate:
    """This process's compile gate for ``course.check`` (started on first use)."""
    if not _GATE:
        _GATE.append(Gate(per_compile_s=COMPILE_TIMEOUT_S))
    return _GATE[0]


# ---------------------------------------------------------------------------------------
# the compiler process


def _compile(req: dict) -> dict:
    import numpy as np
    from numba import cuda
    from numba.core import types as nbtypes
    from numba.np.numpy_support import from_dtype

    from ..source.signature import parse as parse_signature
    from ..source.unit import UnitError, rebuild

    unit = req["unit"]
    try:
        fn = rebuild(unit, lazy=True)  # the signature, if any, is compiled below
    except UnitError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - defining it failed: report, do not die
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    opts = unit["options"]
    kw = {k: opts[k] for k in ("fastmath", "debug", "lineinfo", "opt") if k in opts}
    device = bool(opts.get("device", False))

    def typ(d):
        if d[0] == "array":
            return nbtypes.Array(from_dtype(np.dtype(d[1])), int(d[2]), d[3])
        return from_dtype(np.dtype(d[1]))

    try:
        for call in req["calls"]:
            sig: Any = (
                parse_signature(unit["signature"])
                if unit["signature"]
                else tuple(typ(d) for d in call)
            )
            if unit["signature"] and (why := launch_mismatch(sig.args, [typ(d) for d in call])):
                return {
                    "error": f"its signature {unit['signature']!r} does not fit the "
                    f"exercise's launch: {why}"
                }
            for cc in req["targets"]:
                _TARGET.compute_capability = tuple(cc)
                cuda.compile_ptx(fn.py_func, sig, device=device, cc=tuple(cc), **kw)
    except Exception as exc:  # noqa: BLE001 - TypingError, LoweringError, anything
        return {"error": why_not(exc, unit)}
    return {"error": None}


class _Target:
    """What numba asks the current device for while it compiles a device function: here
    the target being compiled for (there may be no GPU and no driver at all)."""

    compute_capability = TARGETS[0]


_TARGET = _Target()


_WARM: list[str | None] = []  # this process's warm-up, once: None, or why no compiler


def warm() -> str | None:
    """Load the real compiler (the simulator off) by compiling the course's one-line
    kernel, once per process (a zygote does it before it forks: ``zygote.py``); None, or
    why there is no compiler."""
    if _WARM:
        return _WARM[0]
    import warnings

    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    warnings.simplefilter("ignore")
    try:
        from numba import cuda
        from numba.cuda import dispatcher

        dispatcher.get_current_device = lambda: _TARGET

        cuda.compile_ptx(lambda x: None, "void(float32[::1])", cc=TARGETS[0])
        ready = None
    except Exception as exc:  # noqa: BLE001 - no NVVM: say so on every request
        ready = f"{type(exc).__name__}: {str(exc)[:300]}"
    _WARM.append(ready)
    return ready


def main(argv=None) -> int:
    """The compiler process: a greeting, then one ``compiled`` reply per ``compile``
    request, over the two pipes its parent passed (``wire.py``)."""
    argv = sys.argv[1:] if argv is None else argv
    t0 = time.perf_counter()
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    from .wire import Channel

    chan = Channel(int(argv[0]), int(argv[1]))
    ready = warm()
    chan.send({"op": "hello", "took": time.perf_counter() - t0})
    while True:
        req, _ = chan.recv()
        if req.get("op") != "compile":
            break
        try:
            reply = {"unavailable": ready} if ready else _compile(req)
        except Exception as exc:  # noqa: BLE001
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        chan.send({"op": "compiled", **reply})
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
