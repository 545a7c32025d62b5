"""The student copy of an instructor notebook: solutions out, outputs cleared, cells marked.

Standard library only (and ``notebook.py``), so that ``setup.py`` can load this file by its
path while it builds a wheel - in a build environment that has no numpy or numba - and put
student copies, never the instructor notebooks, into the wheel.  ``release.py`` (the
instructor's ``python -m course release``) and ``distribute.py`` (``python -m course
notebooks``) make their copies with the same function.
"""

from __future__ import annotations

import copy

from . import notebook as nbk


def strip_solutions(cell: nbk.Cell) -> str:
    """The source of ``cell`` with every solution region replaced by a stub: the region's
    ``### GIVEN: ...`` lines when it has any (a debug exercise's bug, a predict exercise's
    empty answer), else ``# YOUR CODE HERE`` + ``pass``."""
    regions = nbk.solution_regions(cell)
    lines = cell.source.splitlines()
    out, pos = [], 0
    for a, b in regions:
        out += lines[pos:a]
        indent = lines[a][: len(lines[a]) - len(lines[a].lstrip())]
        given = [_given(l) for l in lines[a + 1 : b] if l.lstrip().startswith(nbk.GIVEN)]
        if given and cell.kind == "code":
            out += given
        elif cell.kind == "code":
            out += [f"{indent}{nbk.YOUR_CODE}", f"{indent}pass"]
        else:
            out.append(f"{indent}{nbk.YOUR_ANSWER}")
        pos = b + 1
    out += lines[pos:]
    return "\n".join(out)


def _given(line: str) -> str:
    """``    ### GIVEN:     step = 1`` -> ``    step = 1``: the text after the marker (less one
    space) is the student's line, indentation included."""
    rest = line.split(nbk.GIVEN, 1)[1]
    return rest[1:] if rest.startswith(" ") else rest


def nbgrader_meta(exercise: str, answer: bool, points=lambda name: 1.0) -> dict:
    """nbgrader's cell metadata (schema 3): the exercise cell is an autograded answer, its
    check cell a locked, graded test worth the exercise's points - so a course that already
    uses nbgrader can import the released notebooks."""
    meta = {
        "schema_version": 3,
        "solution": answer,
        "grade": not answer,
        "locked": not answer,
        "task": False,
        "grade_id": f"{exercise}" if answer else f"{exercise}-check",
    }
    if not answer:
        meta["points"] = points(exercise)
    return meta


def is_student_copy(nb: dict) -> bool:
    """True for a notebook this module wrote (its metadata says so)."""
    return (nb.get("metadata", {}).get("course") or {}).get("copy") == "student"


def student_notebook(nb: dict, stem: str, points=lambda name: 1.0) -> dict:
    """The student copy of instructor notebook ``nb`` (a new dict; ``nb`` is untouched).
    ``points(exercise)``: what nbgrader's metadata says each check is worth.  Raises
    :class:`notebook.MarkerError` (with the notebook's name) on unbalanced markers."""
    nb = copy.deepcopy(nb)
    cells = nbk.cells(nb)
    exercise_of: dict[int, str] = {}  # cell index -> exercise name
    for ex, (_fn, cell) in nbk.exercise_cells(cells).items():
        exercise_of.setdefault(cell.index, ex)
    kept = []
    for cell, raw in zip(cells, nb["cells"]):
        if cell.instructor_only:
            continue
        try:
            new_source = strip_solutions(cell) if cell.has_solution else cell.source
        except nbk.MarkerError as exc:
            raise nbk.MarkerError(f"{stem}.ipynb: {exc}") from None
        raw["source"] = new_source.splitlines(keepends=True)
        raw["id"] = cell.id or nbk.stable_id(stem, cell.index, cell.source)
        meta = raw.setdefault("metadata", {})
        for key in ("execution", "collapsed", "scrolled"):
            meta.pop(key, None)
        if cell.kind == "code":
            raw["outputs"], raw["execution_count"] = [], None
        if cell.index in exercise_of:
            meta["course"] = {"exercise": exercise_of[cell.index]}
            meta["deletable"] = False
            meta["nbgrader"] = nbgrader_meta(exercise_of[cell.index], True, points)
        checks = nbk.check_calls(cell.source) if cell.kind == "code" else []
        if checks:
            meta["deletable"] = False
            meta["nbgrader"] = nbgrader_meta(checks[0][0], False, points)
        kept.append(raw)
    nb["cells"] = kept
    nb["nbformat"], nb["nbformat_minor"] = 4, max(5, int(nb.get("nbformat_minor", 5)))
    nb.setdefault("metadata", {})["course"] = {"lesson": stem, "copy": "student"}
    return nb
