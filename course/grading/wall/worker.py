"""One submission's student code, inside the grader's subprocess.

``python -m course.grading.wall.worker RFD WFD``: reads requests from the grader on pipe RFD and
answers on WFD (``wire.py``), one at a time, until told ``bye``:

- ``run``: execute one cell (an instructor's setup cell or the student's exercise cell) and
  say whether it failed and whether it defined the function the exercise needs;
  the defined kernel goes back as its *unit* (``unit.py``: source text and constant values);
- ``value``: send back the value of a name (the answer of a *predict* exercise).

**Why forging does not work.**  This process runs untrusted code, and nothing it says is a
verdict or a measurement.  It never launches a kernel for the grader, never sees the seed,
the inputs, the expected outputs, the cases or the ceilings.  What leaves it is data: a
unit the grader compiles for a real GPU and hands to the *measurer* (``measurer.py``), a
process that runs that kernel and nothing else.  A cell may monkeypatch ``course.check``
or ``Tune.measure_on``, write to these pipes, start threads or exit early: the patch stays
here, and the worst it can do is send a wrong unit (its cases fail) or break the
conversation (the grader calls that *tampered* and gives the exercise 0 points).  The
sandbox it runs in (``isolate.py``) keeps it from the grader, the measurer and other
students.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import traceback


class _FakeIPython:
    """Enough of IPython for cells that use ``%magics`` or ``!commands``: they do nothing."""

    def run_line_magic(self, *args, **kwargs):
        return None

    run_cell_magic = system = getoutput = run_line_magic


def _python_source(source: str) -> str:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - leave it to compile() to report
        return source


def run_step(label: str, source: str, ns: dict) -> str | None:
    """Execute one cell in ``ns``; None, or a one-line message for the student."""
    filename = f"<{label}>"
    source = _python_source(source)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        return f"syntax error on line {exc.lineno} of {label}: {exc.msg}" + (
            f": {exc.text.strip()}" if exc.text else ""
        )
    try:
        exec(code, ns)  # noqa: S102 - running the submission is the point
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, anything
        line = next(
            (
                ln
                for fr, ln in traceback.walk_tb(exc.__traceback__)
                if fr.f_code.co_filename == filename
            ),
            None,
        )
        where = f" (line {line})" if line else ""
        return f"{label} raised {type(exc).__name__}{where}: {str(exc)[:300]}"
    return None


def _defined(want, exercise, ns: dict) -> dict:
    """Does the cell define the exercise's function, and as what; a kernel goes back as
    its unit (source and constants: ``unit.py``), never as an object or a result."""
    if not want:
        return {"have": None}
    from course import exercises
    from course.grading.source.unit import UnitError, extract, not_a_kernel

    fn = ns.get(want)
    spec = exercises.get(exercise)
    if fn is None:
        return {"have": "missing"}
    if spec.kind == "predict":
        return {"have": "value"}
    if not_a_kernel(fn, spec):
        return {"have": "other"}
    try:
        return {"have": "kernel", "unit": extract(fn, spec.launch_names)}
    except UnitError as exc:
        return {"have": "kernel", "unit_error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - an odd object: say what
        return {"have": "kernel", "unit_error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def _value(name: str, ns: dict) -> dict:
    from course.grading.wall.wire import json_default

    if name not in ns:
        return {"defined": False}
    try:
        return {"defined": True, "value": json.loads(json.dumps(ns[name], default=json_default))}
    except (TypeError, ValueError):
        return {"defined": True, "unreadable": type(ns[name]).__name__}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import time

    t0 = time.perf_counter()
    from course.grading.wall.wire import Channel

    chan = Channel(int(argv[0]), int(argv[1]))
    import course  # chooses gpu/sim before numba loads

    chan.send({"op": "hello", "mode": course.MODE, "took": time.perf_counter() - t0})
    ns = {"__name__": "__main__", "get_ipython": _FakeIPython, "display": lambda *a, **k: None}
    while True:
        req, arrays = chan.recv()
        op = req.get("op")
        if op == "run":
            error = run_step(req["label"], req["source"], ns)
            chan.send(
                {
                    "op": "ran",
                    "step": req["step"],
                    "error": error,
                    **_defined(req.get("want"), req.get("exercise"), ns),
                }
            )
        elif op == "value":
            chan.send({"op": "value", "step": req["step"], **_value(req["name"], ns)})
        else:  # "bye"
            break
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # student threads (or a GPU kernel still running) must not keep us alive


if __name__ == "__main__":
    sys.exit(main())
