"""One submission, inside the grader's subprocess: ``python -m course.grading.worker JOB``.

``batch.py`` (the trusted parent) has already read the notebook and chosen what to run;
JOB is a JSON file with the steps, in notebook order:

    {"steps": [{"kind": "setup" | "solution", "label": "...", "source": "...",
                "exercise": "vector_add" | null, "function": "add" | null}, ...],
     "seed": 123, "case_time_limit": null, "results": "/tmp/.../results.jsonl"}

Setup steps are the instructor's cells; solution steps are the student's cells.  Each
exercise is checked (public + hidden cases) right after its cell ran, and every event is
appended to the results file at once, so what finished before a crash or a hang survives.
This process runs untrusted code: the parent limits its time and resources, nothing more.
"""
from __future__ import annotations

import json
import linecache
import os
import sys
import traceback


class _Events:
    def __init__(self, path):
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open on purpose

    def __call__(self, event: str, **data) -> None:
        self._f.write(json.dumps({"event": event, **data}) + "\n")
        self._f.flush()


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


def run_step(step: dict, ns: dict, n: int) -> str | None:
    """Execute one cell in ``ns``; None, or a one-line message for the student."""
    filename = f"<{step['label']}>"
    source = _python_source(step["source"])
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        return (f"syntax error on line {exc.lineno} of {step['label']}: {exc.msg}"
                + (f": {exc.text.strip()}" if exc.text else ""))
    try:
        exec(code, ns)  # noqa: S102 - running the submission is the point
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, anything
        line = next((ln for fr, ln in traceback.walk_tb(exc.__traceback__)
                     if fr.f_code.co_filename == filename), None)
        where = f" (line {line})" if line else ""
        return f"{step['label']} raised {type(exc).__name__}{where}: {str(exc)[:300]}"
    return None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as f:
        job = json.load(f)
    emit = _Events(job["results"])

    import course  # chooses gpu/sim before numba loads
    from course.grading.check import check  # bound before student code runs

    emit("mode", mode=course.MODE)
    ns = {"__name__": "__main__", "get_ipython": _FakeIPython,
          "display": lambda *a, **k: None}
    for n, step in enumerate(job["steps"]):
        emit("start", label=step["label"], exercise=step.get("exercise"))
        error = run_step(step, ns, n)
        if error:
            emit("cell_error", label=step["label"], kind=step["kind"],
                 exercise=step.get("exercise"), message=error)
        ex, fn_name = step.get("exercise"), step.get("function")
        if not ex:
            continue
        fn = ns.get(fn_name)
        if fn is None:
            emit("exercise", name=ex, cases=[], error=(
                f"your {ex} cell does not define `{fn_name}`" if not error else
                f"`{fn_name}` was not defined because the cell failed: {error}"))
            continue
        result = check(ex, fn, hidden=True, seed=job["seed"],
                       time_limit=job.get("case_time_limit"), record=False)
        emit("exercise", name=ex, error=result.error, elapsed_s=round(result.elapsed_s, 2),
             cases=[{"name": c.name, "launch": c.launch, "hidden": c.hidden,
                     "passed": c.passed, "message": c.message} for c in result.cases])
    emit("done")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # student threads (or a GPU kernel still running) must not keep us alive


if __name__ == "__main__":
    sys.exit(main())
