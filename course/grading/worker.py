"""One submission's student code, inside the grader's subprocess.

``python -m course.grading.worker RFD WFD``: reads requests from the grader on pipe RFD and
answers on WFD (``wire.py``), one at a time, until told ``bye``:

- ``run``: execute one cell (an instructor's setup cell or the student's exercise cell) and
  say whether it failed and whether it defined the function the exercise needs;
- ``launch``: launch the student's kernel on the guarded buffers that came with the request
  and send them back (``launch.py``);
- ``value``: send back the value of a name (the answer of a *predict* exercise);
- ``measure``: time or trace one launch of a *tune* exercise and send back the raw figures.

**Why forging does not work.**  This process runs untrusted code, and nothing it says is a
verdict.  It never sees the seed, the expected outputs, the number of cases or the hidden
case files: the grader (``session.py``) makes each case's inputs, sends them here only to be
launched on, and compares what comes back with a reference it keeps to itself.  A cell may
monkeypatch ``course.check``, write to these pipes, start threads or exit early: the worst
it can do is send back wrong arrays (a failed case) or break the conversation (the grader
calls that *tampered* and gives the exercise 0 points).
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
        return (f"syntax error on line {exc.lineno} of {label}: {exc.msg}"
                + (f": {exc.text.strip()}" if exc.text else ""))
    try:
        exec(code, ns)  # noqa: S102 - running the submission is the point
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, anything
        line = next((ln for fr, ln in traceback.walk_tb(exc.__traceback__)
                     if fr.f_code.co_filename == filename), None)
        where = f" (line {line})" if line else ""
        return f"{label} raised {type(exc).__name__}{where}: {str(exc)[:300]}"
    return None


def _launch(req: dict, arrays: dict, ns: dict):
    from course import exercises
    from course.exercises import Case
    from course.grading.launch import run_launch

    spec = exercises.get(req["exercise"])
    c = req["case"]
    case = Case(c["name"], c["params"], tuple(c["grid"]), tuple(c["block"]),
                c.get("shared_bytes", 0), c.get("repeats", 1))
    shapes = {k: tuple(v) for k, v in req["shapes"].items()}
    return run_launch(spec, ns.get(req["function"]), case, arrays, req["scalars"], shapes,
                      req["time_limit"], req["race_hunt"])


def _value(name: str, ns: dict) -> dict:
    from course.grading.wire import _plain

    if name not in ns:
        return {"defined": False}
    try:
        return {"defined": True, "value": json.loads(json.dumps(ns[name], default=_plain))}
    except (TypeError, ValueError):
        return {"defined": True, "unreadable": type(ns[name]).__name__}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from course.grading.wire import Channel

    chan = Channel(int(argv[0]), int(argv[1]))
    import course  # chooses gpu/sim before numba loads
    from course.grading.check import not_a_kernel

    chan.send({"op": "hello", "mode": course.MODE})
    ns = {"__name__": "__main__", "get_ipython": _FakeIPython,
          "display": lambda *a, **k: None}
    while True:
        req, arrays = chan.recv()
        op = req.get("op")
        if op == "run":
            error = run_step(req["label"], req["source"], ns)
            want = req.get("want")
            have = None
            if want:
                from course import exercises

                fn = ns.get(want)
                spec = exercises.get(req["exercise"])
                have = ("missing" if fn is None else "value" if spec.kind == "predict" else
                        "kernel" if not not_a_kernel(fn, spec) else "other")
            chan.send({"op": "ran", "step": req["step"], "error": error, "have": have})
        elif op == "launch":
            returned, error, timed_out = _launch(req, arrays, ns)
            chan.send({"op": "launched", "step": req["step"], "error": error,
                       "timed_out": timed_out}, returned)
        elif op == "measure":
            from course import exercises

            try:
                figures = exercises.get(req["exercise"]).measure_figures(ns.get(req["function"]))
                chan.send({"op": "measured", "step": req["step"], "figures": figures})
            except Exception as exc:  # noqa: BLE001 - reported as a failed target
                chan.send({"op": "measured", "step": req["step"],
                           "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        elif op == "value":
            chan.send({"op": "value", "step": req["step"], **_value(req["name"], ns)})
        else:  # "bye"
            break
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # student threads (or a GPU kernel still running) must not keep us alive


if __name__ == "__main__":
    sys.exit(main())
