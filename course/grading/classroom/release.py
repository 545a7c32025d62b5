"""``python -m course release``: student copies of the instructor notebooks.

For every notebook in ``notebooks/`` (or those named with ``--notebooks``) it writes a copy
to ``--out`` (default ``release/``) in which
- each region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes
  ``# YOUR CODE HERE`` plus ``pass`` at the same indentation, so the notebook still runs;
- outputs and execution counts are cleared; cell ids are kept (or derived, stably);
- cells tagged ``instructor-only`` (or starting with ``### INSTRUCTOR ONLY``) are dropped;
- exercise cells carry ``metadata.course.exercise`` and cannot be deleted in JupyterLab,
  so the grader finds them again.
Unbalanced markers stop the release with a message naming the cell.

``--check`` then validates the release (see :func:`validate`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from ...platform.resources import INSTALLED, PACKAGE
from ...platform.resources import ROOT as REPO
from . import notebook as nbk
from . import student
from .student import strip_solutions  # noqa: F401 - re-exported (tests import it here)

RESULT_MARK = "@@COURSE-RELEASE-CHECK@@"


class ReleaseError(Exception):
    """A notebook that cannot be released (the message says which cell and why)."""


# ---------------------------------------------------------------------------------------
# making the student copy (student.py: the same function builds the wheel's copies)


def student_notebook(nb: dict, stem: str) -> dict:
    """The student copy of instructor notebook ``nb`` (a new dict; ``nb`` is untouched),
    nbgrader's points from the instructor's hidden files."""
    from ..hidden import points_for

    try:
        return student.student_notebook(nb, stem, points=points_for)
    except nbk.MarkerError as exc:
        raise ReleaseError(str(exc)) from None


def release(sources: list[Path], out: Path) -> list[Path]:
    """Write the student copy of every notebook in ``sources`` to ``out``; their paths."""
    copies = []
    for src in sources:  # all notebooks first: nothing is written if one is broken
        try:
            nb = nbk.load(src)
            if student.is_student_copy(nb):
                raise ReleaseError(
                    f"{src} is a student copy (no solutions): release from the "
                    "instructor notebooks (a checkout, or --instructor DIR)"
                )
            copies.append((src, student_notebook(nb, src.stem)))
        except nbk.NotebookError as exc:
            raise ReleaseError(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for src, nb in copies:
        dest = out / src.name
        nbk.save(nb, dest)
        written.append(dest)
    return written


# ---------------------------------------------------------------------------------------
# --check


def leaks(sources: list[Path], places: list[Path], markers: bool = True) -> list[str]:
    """Where solution text shows up in the files under ``places``: markers, or the body of
    an instructor solution region (compared line by line, ignoring spaces and comments).
    Bodies the instructor notebook shows outside any solution region (a lecture kernel that
    an exercise asks to rewrite or apply) and one- to three-line debug fixes are not
    secrets and are not reported."""
    bodies = []
    for src in sources:
        cells = nbk.cells(nbk.load(src))
        shown = [
            [_no_comment(l) for l in nbk.substantive(c.source.splitlines())]
            for c in cells
            if not c.has_solution
        ]
        for cell in cells:
            body = (
                [_no_comment(l) for l in nbk.substantive(nbk.solution_lines(cell))]
                if cell.has_solution
                else []
            )
            if nbk.GIVEN in cell.source and len(body) <= 3:
                continue  # a debug fix of a line or two: its text is common elsewhere
            if any(_contains(lines, body) for lines in shown):
                continue  # the lesson itself shows this text (lecture material): no secret
            if body:
                bodies.append((f"{src.stem} {cell.label}", body))
    found = []
    for place in places:
        files = (
            [place]
            if place.is_file()
            else sorted(p for p in place.rglob("*") if p.suffix in (".ipynb", ".py", ".md"))
        )
        for f in files:
            for where, text in _texts(f):
                if markers and (nbk.BEGIN in text or nbk.END in text):
                    found.append(f"{f}{where}: contains solution markers")
                lines = [_no_comment(l) for l in nbk.substantive(text.splitlines())]
                for origin, body in bodies:
                    if _contains(lines, body):
                        found.append(f"{f}{where}: contains the solution of {origin}")
    return found


def _texts(path: Path):
    if path.suffix == ".ipynb":
        try:
            for c in nbk.cells(nbk.load(path)):
                yield f" {c.label}", c.source
        except nbk.NotebookError:
            return
    else:
        try:
            yield "", path.read_text(errors="replace")
        except OSError:
            return


def _no_comment(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line) if "'" not in line and '"' not in line else line


def _contains(lines: list[str], body: list[str]) -> bool:
    n = len(body)
    return any(lines[i : i + n] == body for i in range(len(lines) - n + 1))


_INSTRUMENT = """\
import course, course.grading as _course_grading
_COURSE_RESULTS = []
def _course_check(exercise, fn, *args, _orig=_course_grading.check, **kw):
    kw["hidden"], kw["record"] = {hidden}, False
    result = _orig(exercise, fn, *args, **kw)
    _COURSE_RESULTS.append([exercise, bool(result.passed), repr(result)])
    return result
course.check = _course_grading.check = _course_check
"""
_REPORT = 'import json as _json; print("{mark}" + _json.dumps(_COURSE_RESULTS))'


def execute(path: Path, hidden: bool, timeout: int, cwd: Path) -> tuple[list, list[str]]:
    """Run a notebook headless with every ``course.check`` recorded (``hidden=True``:
    with hidden cases).  Returns ([exercise, passed, report] per check, errors)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(_INSTRUMENT.format(hidden=hidden)))
    nb.cells.append(nbformat.v4.new_code_cell(_REPORT.format(mark=RESULT_MARK)))
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    try:
        client.execute()
    except Exception as exc:  # noqa: BLE001 - a dead kernel or a cell timeout
        return [], [
            f"{path.name}: execution stopped: {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
        ]
    errors, results = [], None
    for i, cell in enumerate(nb.cells[1:-1]):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                label = nbk.Cell(i, cell.cell_type, cell.source, cell.get("id", "")).label
                errors.append(
                    f"{path.name} {label}: an error escaped the cell: "
                    f"{o.get('ename')}: {str(o.get('evalue'))[:300]}"
                )
    for o in nb.cells[-1].get("outputs", []):
        text = o.get("text", "")
        if RESULT_MARK in text:
            results = json.loads(text.split(RESULT_MARK, 1)[1])
    if results is None:
        errors.append(f"{path.name}: the check results could not be read back")
    return results or [], errors


def package_leaks(sources: list[Path]) -> list[str]:
    """Exercise solutions the ``course`` package itself holds: an exercise must never ask for
    a kernel the package (every student's copy of it) already contains.  The lecture's
    kernels stay; change the exercise."""
    return [
        f"{leak} - the `course` package that every student installs holds this "
        "exercise's answer: change the exercise so that it asks for a kernel the package "
        "does not contain (keep the lecture's kernel)"
        for leak in leaks(sources, [PACKAGE], markers=False)
    ]


def validate(sources: list[Path], copies: list[Path], timeout: int = 600, log=print) -> list[str]:
    """Problems with a release (empty list: it is fine).

    1. No solution markers and no instructor solution body anywhere in the release, nor
       in the ``course`` package (:func:`package_leaks`).
    2. Every exercise checked in a notebook exists; exercises with hidden-case files are
       announced to students (course.grading.hidden.ANNOUNCED).
    3. Each instructor notebook runs headless and passes every check, hidden cases included.
    4. Each student copy runs headless without an error escaping a cell, and every check in
       it fails (a check that passes on an empty solution is broken, or leaks a solution).
    """
    from ... import exercises
    from .. import hidden

    problems = leaks(sources, sorted({c.parent for c in copies})) + package_leaks(sources)
    known = exercises.all_exercises()
    for src in sources:
        for c in nbk.cells(nbk.load(src)):
            for ex, _fn in nbk.check_calls(c.source):
                if ex not in known:
                    problems.append(f"{src.name} {c.label}: checks unknown exercise {ex!r}")
                elif (
                    hidden.file_for(ex)
                    and known[ex].kind != "predict"
                    and not hidden.announced(known[ex])
                ):
                    problems.append(
                        f"{ex} has hidden cases ({hidden.file_for(ex)}) but students "
                        "are not told: add it to ANNOUNCED in "
                        "course/grading/hidden.py"
                    )
    with tempfile.TemporaryDirectory(prefix="course-release-check-") as tmp:
        old = os.environ.get("COURSE_PROGRESS_FILE")
        os.environ["COURSE_PROGRESS_FILE"] = str(Path(tmp) / "progress.json")
        try:
            for src, copy_ in zip(sources, copies):
                for path, is_instructor in ((src, True), (copy_, False)):
                    t0 = time.perf_counter()
                    results, errors = execute(
                        path, hidden=is_instructor, timeout=timeout, cwd=src.parent
                    )
                    who = "instructor" if is_instructor else "student"
                    problems += [f"{who} copy: {e}" for e in errors]
                    for ex, passed, report in results:
                        if is_instructor and not passed:
                            problems.append(
                                f"instructor {src.name}: check {ex!r} fails "
                                f"(public + hidden cases):\n{report}"
                            )
                        if not is_instructor and passed:
                            problems.append(
                                f"student {copy_.name}: check {ex!r} passes on "
                                "the empty solution: the check is broken or the "
                                "solution leaked"
                            )
                    checked = {r[0] for r in results}
                    expected = {
                        ex for c in nbk.cells(nbk.load(src)) for ex, _ in nbk.check_calls(c.source)
                    }
                    for ex in sorted(expected - checked):
                        problems.append(f"{who} {path.name}: check {ex!r} never ran")
                    log(
                        f"  {who:<10} {path.name}: {len(results)} checks, "
                        f"{len(errors)} errors, {time.perf_counter() - t0:.1f} s"
                    )
        finally:
            if old is None:
                os.environ.pop("COURSE_PROGRESS_FILE", None)
            else:
                os.environ["COURSE_PROGRESS_FILE"] = old
    return problems


# ---------------------------------------------------------------------------------------
# command line


def find_sources(src_dir: Path, names: list[str] | None) -> list[Path]:
    """The instructor notebooks to release: all of ``src_dir``, or those named."""
    if not names:
        return sorted(src_dir.glob("*.ipynb"))
    from .lesson_names import UnknownLesson, find_lesson

    every = sorted(src_dir.glob("*.ipynb"))
    try:  # 01, 1, vector_add or 01_vector_add, as everywhere
        return [find_lesson(name, every, "--notebooks") for name in names]
    except UnknownLesson as exc:
        raise ReleaseError(f"{exc}, in {src_dir}") from None


def main(argv=None) -> int:
    """``python -m course release [--out DIR] [--notebooks NAME ...] [--check]``"""
    ap = argparse.ArgumentParser(
        prog="python -m course release",
        description="Write student copies of the instructor notebooks.",
    )
    ap.add_argument(
        "--instructor",
        type=Path,
        metavar="DIR",
        help="the instructor folder (notebooks/ with solutions, instructor/hidden/; "
        "default: this checkout)",
    )
    ap.add_argument(
        "--src",
        type=Path,
        help="instructor notebooks (default: notebooks/ of the instructor folder)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=Path("release") if INSTALLED else REPO / "release",
        help="where the student copies go (default: release/)",
    )
    ap.add_argument(
        "--notebooks",
        nargs="+",
        metavar="NAME",
        help="only these notebooks, e.g. 01_vector_add (default: all)",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="validate: instructor copies pass all checks (hidden too), student "
        "copies run and fail every check, no solution text in the release",
    )
    ap.add_argument(
        "--timeout",
        type=int,
        default=600,
        help="--check: seconds a notebook cell may run (default 600)",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    from .. import hidden

    try:
        if args.instructor:
            hidden.use_instructor(args.instructor)
        args.src = args.src or hidden.notebooks_dir()
        if not args.src.is_dir():
            raise ReleaseError(f"no folder {args.src} (the instructor notebooks)")
        sources = find_sources(args.src, args.notebooks)
        if not sources:
            raise ReleaseError(f"no notebooks in {args.src}")
        copies = release(sources, args.out)
    except (ReleaseError, nbk.MarkerError, hidden.InstructorFolderError) as exc:
        print(f"release refused: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(copies)} student notebook(s) to {args.out}")
    if not args.check:
        return 0
    print("checking the release (runs every notebook twice, headless)...")
    problems = validate(sources, copies, timeout=args.timeout)
    took = time.perf_counter() - t0
    if problems:
        print(f"release check FAILED ({len(problems)} problem(s), {took:.0f} s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print(f"release check passed ({took:.0f} s)")
    return 0
