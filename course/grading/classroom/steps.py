"""A submission's cells as the worker's steps (the trusted side: reading only; nothing of
the submission runs here).

For each exercise of the lesson's plan, the student's cell is found by the cell marker
``metadata.course.exercise``, then by cell id, then by the function name the check passes
(``def add(``); setup cells are the instructor's.  Reading is bounded, because it happens
in the grader's own process, outside any time limit of the submission's: a code cell is
parsed (``ast``) only when its text holds the name looked for, at most once for the whole
notebook whatever the number of exercises, and at most :data:`MAX_PARSED_TOTAL` characters
of one notebook are parsed in all.  A notebook that needs more (its markers lost, behind
megabytes of code that names its kernels) is ``invalid``, with a sentence that says how to
submit it (:class:`TooMuchToRead`).  Before, a markers-lost notebook behind 60 cells of
240 KB cost the grader 231 s of CPU (every cell parsed once per exercise).
"""

from __future__ import annotations

from . import notebook as nbk
from .intake import MAX_CELL_MB

MAX_CELL = MAX_CELL_MB << 20  # characters of an exercise cell sent to the worker
MAX_PARSED_TOTAL = 512 << 10  # characters of a notebook parsed here (a lesson: < 30 K, 1 s)


class TooMuchToRead(Exception):
    """Finding the exercise cells would parse more of the notebook than the grader allows;
    the message is the reason a student reads."""


class CellIndex:
    """A notebook's code cells, with what each defines and whether it calls a check, each
    worked out at most once, within one budget of characters parsed."""

    def __init__(self, cells: list[nbk.Cell], budget: int | None = None):
        self.code = [c for c in cells if c.kind == "code"]
        self.budget = MAX_PARSED_TOTAL if budget is None else budget
        self.parsed = 0
        self._defines: dict[int, list[str]] = {}
        self._checks: dict[int, bool] = {}

    def defines(self, cell: nbk.Cell, name: str) -> bool:
        """Whether the cell defines (or assigns) ``name`` at its top level
        (``notebook.defined_functions``); a cell whose text does not hold the name is not
        parsed, any other at most once."""
        if name not in cell.source:
            return False
        if cell.index not in self._defines:
            if len(cell.source) <= nbk.MAX_PARSED:  # larger cells are only searched (regex)
                self.parsed += len(cell.source)
                if self.parsed > self.budget:
                    raise TooMuchToRead(
                        f"the exercise cells of this notebook could not be found within "
                        f"the {self.budget:,} characters of code the grader reads to find "
                        "them (their cell markers were lost, and the other cells are "
                        "large): copy your answers into a fresh copy of the lesson's "
                        "notebook and submit that"
                    )
            self._defines[cell.index] = nbk.defined_functions(cell.source)
        return name in self._defines[cell.index]

    def checks(self, cell: nbk.Cell) -> bool:
        """Whether the cell calls ``course.check`` (a check cell is no exercise cell)."""
        if cell.index not in self._checks:
            self._checks[cell.index] = bool(nbk.check_calls(cell.source))
        return self._checks[cell.index]


def locate(index: CellIndex, ex: nbk.ExerciseCell) -> tuple[list[nbk.Cell], str]:
    """The student's cells for exercise ``ex``, and how they were found (each cell read at
    most once for the whole notebook: :class:`CellIndex`)."""
    by_marker = [c for c in index.code if c.exercise_tag == ex.name]
    if by_marker:
        return by_marker, "marker"
    by_id = [  # ids can be reused: it must define the function too
        c for c in index.code if ex.cell.id and c.id == ex.cell.id and index.defines(c, ex.function)
    ]
    if by_id:
        return by_id, "cell id"
    by_name = [c for c in index.code if index.defines(c, ex.function) and not index.checks(c)]
    return by_name, f"function name `{ex.function}`"


def make_steps(plan: nbk.Plan, nb: dict, g) -> list[dict]:
    """The worker's steps for this submission; missing/duplicated cells go into ``g`` (a
    ``batch.Graded``).  TooMuchToRead when finding the exercise cells would read more of
    the notebook than :data:`MAX_PARSED_TOTAL`."""
    cells = nbk.cells(nb)
    index = CellIndex(cells)
    steps, owners = [], {e.cell.index: e for e in plan.exercises.values()}
    for kind, cell in plan.steps:
        if kind == "setup":
            steps.append(
                {
                    "kind": "setup",
                    "label": f"setup cell {cell.index + 1}",
                    "source": cell.source,
                    "exercise": None,
                    "function": None,
                }
            )
            continue
        ex = owners.get(cell.index)
        if ex is None:  # a solution cell no check uses: the student's version, by id
            same = [c for c in cells if c.id and c.id == cell.id]
            if same:
                steps.append(
                    {
                        "kind": "solution",
                        "label": f"cell {same[-1].index + 1}",
                        "source": same[-1].source,
                        "exercise": None,
                        "function": None,
                    }
                )
            continue
        found, how = locate(index, ex)
        if not found:
            g.not_found.add(ex.name)
            g.reasons.append(
                f"{ex.name}: exercise cell not found (no cell marked "
                f"{ex.name!r} and none defining `{ex.function}`): was it deleted?"
            )
            continue
        if len(found) > 1:
            where = ", ".join(str(c.index + 1) for c in found)
            g.notes.append(
                f"{ex.name}: {len(found)} cells found by {how} (cells {where}); "
                f"graded the last one, cell {found[-1].index + 1}, as running the "
                "notebook top to bottom would"
            )
        elif how != "marker":
            g.notes.append(f"{ex.name}: cell found by {how} (its marker was lost)")
        mine = found[-1]
        if len(mine.source) > MAX_CELL:
            g.not_found.add(ex.name)
            g.reasons.append(
                f"{ex.name}: cell too large ({len(mine.source) / 2**20:.1f} MB; "
                f"limit {MAX_CELL >> 20} MB): not run"
            )
            continue
        steps.append(
            {
                "kind": "solution",
                "label": f"your {ex.name} cell (cell {mine.index + 1})",
                "source": mine.source,
                "exercise": ex.name,
                "function": ex.function,
            }
        )
    return steps
