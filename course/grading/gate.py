"""The compile gate: a kernel must compile for a real GPU before any case runs.

numba's CUDA simulator runs a kernel as Python, so it accepts bodies no GPU compiler does: a
``dict``, a ``list``, ``str(x)``, whole-slice arithmetic.  A laptop check would then pass a
kernel that fails on the class GPU.  So every kernel unit (``unit.py``) a check, the grader
or the leaderboard receives is first compiled with numba-cuda's real compiler (NVVM, from
the ``numba-cuda[cu12]`` wheels; no GPU or driver needed) to PTX for :data:`TARGETS`, with
the argument types of the exercise's first launch.  A kernel that does not compile fails
the check with one sentence: numba's reason and the line.

The compiler runs in a separate process with the simulator off (``python -m
course.grading.gate``), started on first use and kept for the session; results are cached
by unit and argument types, so re-running a check costs nothing.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

TARGETS = ((7, 5), (9, 0))       # a T4-class GPU and the H100/H200
COMPILE_TIMEOUT_S = 120.0


class GateUnavailable(Exception):
    """The real compiler could not be started (no NVVM in this install)."""


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
    if hasattr(value, "dtype"):                      # a numpy scalar
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
# the client: one compiler process per process that checks

class Gate:
    """Compiles units in a child process with the simulator off; caches every answer."""

    def __init__(self):
        self._proc = None
        self._lock = threading.Lock()
        self._cache: dict[str, str | None] = {}

    def check(self, unit: dict, arg_types: list) -> str | None:
        """None when ``unit`` compiles for every target with each of ``arg_types``; else
        one sentence saying why not.  Raises GateUnavailable if there is no compiler."""
        from .unit import key

        k = key(unit, arg_types, TARGETS)
        if k in self._cache:
            return self._cache[k]
        with self._lock:
            reply = self._ask({"unit": unit, "calls": arg_types, "targets": TARGETS})
        if "unavailable" in reply:
            raise GateUnavailable(reply["unavailable"])
        error = reply.get("error")
        self._cache[k] = error
        return error

    def _ask(self, request: dict) -> dict:
        for attempt in (1, 2):
            proc = self._start()
            try:
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
                line = _readline(proc, COMPILE_TIMEOUT_S)
                return json.loads(line)
            except (OSError, ValueError, TimeoutError) as exc:
                self.close()
                if attempt == 2:
                    if isinstance(exc, TimeoutError):
                        return {"error": f"the kernel took longer than {COMPILE_TIMEOUT_S:g} "
                                         "s to compile (an enormous unrolled loop?)"}
                    raise GateUnavailable(f"the compiler process failed: {exc}") from None
        raise AssertionError("unreachable")

    def _start(self):
        if self._proc is None or self._proc.poll() is not None:
            env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONDONTWRITEBYTECODE="1")
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "course.grading.gate"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        return self._proc

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.kill()
                self._proc.wait(5)
            except OSError:
                pass
            self._proc = None


def _readline(proc, timeout: float) -> str:
    box = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive() or not box or not box[0]:
        raise TimeoutError("no answer from the compiler process") if t.is_alive() \
            else OSError("the compiler process ended")
    return box[0]


_GATE: list[Gate] = []


def gate() -> Gate:
    """This process's compile gate (started on first use)."""
    if not _GATE:
        _GATE.append(Gate())
    return _GATE[0]


# ---------------------------------------------------------------------------------------
# the compiler process

HINTS = (   # what the compiler's words usually mean for a student's kernel
    (("array_allocate", "_ol_array_allocate", "array_empty"),
     "arithmetic on whole arrays or slices allocates a new array, which a kernel cannot: "
     "work element by element"),
    (("NRT required", "DictType", "ListType", "unicode_type", "reflected list"),
     "a kernel cannot make Python objects (dict, list, str): only numbers, arrays and "
     "cuda.local/cuda.shared arrays"),
    (("function zeros", "function empty", "function ones", "function full",
      "function arange", "function array>", "function copy"),
     "a kernel cannot allocate numpy arrays: for a small array of each thread's own use "
     "cuda.local.array(SIZE, numba.float32) with a constant SIZE (cuda.shared.array for one "
     "the block shares); make a big array on the host and pass it in"),
)


def why_not(exc: BaseException, unit: dict) -> str:
    """numba's error as one sentence: its reason, the construct it could not type, a hint,
    and the kernel's line where numba names one."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    skip = ("Failed in ", "During:", "File ", "^", "Enable logging", "This error may",
            "For more information", "- Resolution", "raise ", "next(", "Rewrite ", ">>>")
    reason = next((l for l in lines if not l.startswith(skip)), type(exc).__name__)
    construct = next((l[3:].strip() for l in lines if l.startswith(">>>")), "")
    hint = next((h for words, h in HINTS if any(w in text for w in words)), "")
    where = ""
    m = re.search(r'File "<kernel [^>]*>", line (\d+)', text)
    loc = getattr(getattr(exc, "loc", None), "line", None)
    if m or isinstance(loc, int):
        n = int(m.group(1)) if m else loc
        src = unit["source"].splitlines()
        i = n - unit["firstline"]
        code = src[i].strip() if 0 <= i < len(src) else ""
        where = f" (line {n}" + (f": `{code}`" if code else "") + ")"
    return (f"{type(exc).__name__}: {reason[:300]}" + (f" {construct[:200]}" if construct
                                                        else "")
            + where + (f" - {hint}" if hint else ""))


def _compile(req: dict) -> dict:
    import numpy as np
    from numba import cuda
    from numba.core import types as nbtypes
    from numba.np.numpy_support import from_dtype

    from .unit import UnitError, rebuild

    unit = req["unit"]
    try:
        fn = rebuild(unit)
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
            sig = unit["signature"] or tuple(typ(d) for d in call)
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


def main() -> int:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    import warnings

    warnings.simplefilter("ignore")
    try:
        from numba import cuda
        from numba.cuda import dispatcher

        dispatcher.get_current_device = lambda: _TARGET

        cuda.compile_ptx(lambda x: None, "void(float32[::1])", cc=TARGETS[0])
        ready = None
    except Exception as exc:  # noqa: BLE001 - no NVVM: say so on every request
        ready = f"{type(exc).__name__}: {str(exc)[:300]}"
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = {"unavailable": ready} if ready else _compile(req)
        except Exception as exc:  # noqa: BLE001
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
