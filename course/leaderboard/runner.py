"""One submission, judged: the grader's judge and measurer, unchanged.

A submission arrives as one of three kinds of data:

- a **unit** (what ``course.submit`` sends from a notebook: the kernel's source, its jit
  options and the constants it uses; ``course/grading/source/unit.py``) - nothing to run but the
  kernel, so it goes straight to the compile gate and the measurer;
- a **course kernel**'s name (the instructor entering one of the course's own kernels,
  ``course/exercises/entries.py``): the measurer runs the course's kernel and launch, with
  nothing to gate;
- a **source file** and a function name (``python -m course submit``, or any HTTP client):
  the service reads it as data (``fromfile.py``) and stores its kernel's unit beside it,
  so it arrives here as a unit.  Only a row stored before that (a file, no unit) still
  runs in the grading worker's sandbox, which sends back the function's unit.

Then: the compile gate (numba-cuda's real compiler, sm_75 and sm_90), the board's tests
(the exercise's public and hidden cases) and, when they all pass, the timed launch at the
board's shape with this GPU's measuring lock held (one timed launch per GPU at a time), its
outputs judged.  The figures come from the measurer, which ran nothing but the gated kernel:
a forged timer in the source file stays in the worker.  In the simulator there is no time:
the tests run and the submission is marked "not timed".
"""

from __future__ import annotations

import platform
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..exercises.outcome import split_timed
from ..platform import runtime
from .client import ms_text

TIMEOUT_S = 300  # one submission, all of it
MEMORY_MB = {"sim": 16384, "gpu": 0}  # address-space limit (CUDA's cuInit needs none);
#                                         the sandbox's cgroup still caps real memory


def environment() -> tuple[str, dict]:
    """(device name, versions) written beside every result."""
    from importlib.metadata import PackageNotFoundError, version

    def v(pkg):
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    return runtime.device_name(), {
        "numba-cuda": v("numba-cuda"),
        "numba": v("numba"),
        "numpy": v("numpy"),
        "python": platform.python_version(),
    }


def judge_submission(
    board: str,
    payload: dict,
    on_stage=None,
    isolation=None,
    timeout: float = TIMEOUT_S,
    seed: int | None = None,
    case_time_limit: float | None = None,
) -> dict:
    """The verdict of one submission: ``{"status": done|rejected|error, "passed",
    "message", "mean_ms", "std_ms", "best_ms", "median_ms", "runs", "cases", "device",
    "versions", "mode", "figures"}``.  Never raises for anything the submission does."""
    from ..exercises import get
    from ..grading.classroom.prepare import ceilings_once
    from ..grading.judging import session
    from ..grading.judging.report import case_events
    from ..grading.judging.settings import GradeSettings

    seed = secrets.randbits(32) if seed is None else seed
    device, versions = environment()
    base = {"device": device, "versions": versions, "mode": runtime.MODE}
    try:
        spec = get(board)
        settings = GradeSettings(
            seed=seed,
            mode=runtime.MODE,
            memory_mb=MEMORY_MB[runtime.MODE],
            timeout=max(timeout, spec.time_budget_s),  # a slow seed board asks for more
            case_time_limit=case_time_limit,
            isolation=isolation,
            ceilings=ceilings_once(runtime.MODE),
        )
        judge: Callable[..., tuple[str, list]]
        if payload.get("course_kernel"):  # nothing to run but the kernel: no worker
            judge, what = session.judge_entry, payload["course_kernel"]
        else:
            judge, what = session.judge_unit, payload.get("unit")
        if what is not None:
            error, results = judge(spec, what, settings, on_stage=on_stage)
            cases = case_events(results)
        else:
            error, cases = _from_source(session, board, payload, settings, on_stage)
    except Exception as exc:  # noqa: BLE001 - whose fault it is, said; the service goes on
        from ..grading.classroom import verdicts

        if verdicts.is_fault(exc):  # something the submission sent: its fault
            return dict(
                base,
                status=verdicts.REJECTED,
                passed=False,
                message=verdicts.rejected_sentence(exc),
            )
        return dict(
            base,
            status=verdicts.ERROR,
            passed=None,
            message=verdicts.course_failure("the leaderboard's judge", exc),
        )
    return dict(base, **verdict(error, cases))


def _from_source(session, board, payload, settings, on_stage) -> tuple[str, list]:
    from ..grading.judging.report import CellError, Judged, case_events

    step = {
        "label": "your file",
        "kind": "code",
        "source": payload["source"],
        "function": payload["function"],
        "exercise": board,
    }
    out = session.grade_steps([step], settings, on_stage=on_stage)
    if out.status != "graded":
        why = {
            "timeout": f"it ran past the time limit ({settings.timeout:.0f} s in all)",
            "crashed": "the process running your file died"
            + (f" ({out.last})" if out.last else ""),
            "tampered": "your file wrote to the judge's pipe",
        }[out.status]
        return f"not judged: {why}", []
    cell = next((e for e in out.events if isinstance(e, CellError)), None)
    ex = next((e for e in out.events if isinstance(e, Judged)), None)
    if ex is None:
        return f"your file raised an error: {cell.message if cell else 'unknown'}", []
    return ex.error, case_events(ex.cases)


def verdict(error: str, cases: list[dict]) -> dict:
    """The leaderboard's reading of the judge's case results (``report.case_events``)."""
    tests, timed = split_timed(cases)
    passed_tests = sum(c["passed"] for c in tests)
    cases_out = [{k: c[k] for k in ("name", "passed", "hidden", "message")} for c in tests]
    if error:
        return {"status": "rejected", "passed": False, "message": error, "cases": cases_out}
    if not tests or passed_tests < len(tests):
        first = next((c for c in tests if not c["passed"]), None)
        hung = any(c.get("timed_out") for c in tests)
        msg = (
            f"tests: {passed_tests} of {len(tests)} passed"
            + (f"; first failure: {first['name']}: {first['message']}" if first else "")
            + (
                "; the kernel hit the time limit"
                if hung and "time limit" not in (first["message"] if first else "")
                else ""
            )
        )
        return {"status": "rejected", "passed": False, "message": msg, "cases": cases_out}
    out = {"status": "done", "passed": True, "cases": cases_out}
    f = (timed.get("figures") or {}) if timed is not None else {}
    if timed is not None and not timed["passed"] and not f:
        return dict(
            out,
            status="rejected",
            passed=False,
            message=f"tests passed, but the timed launch failed: {timed['message']}",
        )
    if "mean_ms" in f:
        out.update(
            mean_ms=f["mean_ms"],
            std_ms=f.get("std_ms"),
            best_ms=f.get("ms"),
            median_ms=f.get("median_ms"),
            runs=int(f.get("runs", 0)),
            message=f"tests passed ({len(tests)} of {len(tests)}); {ms_text(f['mean_ms'])} "
            f"± {f.get('std_ms', 0):.2g} ms over {int(f.get('runs', 0))} runs",
        )
    else:
        out.update(
            figures=f,
            message=f"tests passed ({len(tests)} of {len(tests)}); not "
            "timed (simulator: no GPU here, so no time and no rank)"
            + (f"; simulated figure: {timed['message']}" if timed and timed["message"] else ""),
        )
    return out


def sandbox(hide: list) -> tuple[object, str]:
    """The grading sandbox for a service's workers (the database folder hidden)."""
    from ..grading.wall.isolate import for_grading

    run_dir = Path(tempfile.mkdtemp(prefix="course-leaderboard-run-"))
    return for_grading(hide, run_dir)
