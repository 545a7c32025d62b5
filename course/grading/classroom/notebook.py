"""Reading notebooks for release and grading: cells, solution markers, check calls.

Plain JSON, no Jupyter import, so the grader can read an untrusted (even broken) notebook
without running anything.  Vocabulary used by release.py and batch.py:

- a *solution cell* holds ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` (nbgrader's markers);
- a *check cell* calls ``course.check("<exercise>", <function>)``;
- the *exercise cell* of an exercise is the solution cell that defines that function;
- *setup cells* are the ones the grader runs before the exercise cells (see :func:`plan`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
INSTRUCTOR_ONLY_TAG = "instructor-only"
INSTRUCTOR_ONLY_MARK = "### INSTRUCTOR ONLY"
SETUP_TAG = "setup"
YOUR_CODE = "# YOUR CODE HERE"
YOUR_ANSWER = "YOUR ANSWER HERE"
GIVEN = "### GIVEN:"  # inside a solution region: a line the student copy gets instead

# course.check("vector_add", add ...) or check('vector_add', add ...)
CHECK_CALL = re.compile(r"""\bcheck\(\s*['"]([A-Za-z_]\w*)['"]\s*,\s*([A-Za-z_]\w*)""")
_DEF = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(", re.M)


MAX_CELLS = 5000  # cells of one notebook (the lessons have under 150)
MAX_PARSED = 256 << 10  # characters of a cell the grader's own process parses (ast)
# Bytes of JSON structure (``{ [ , :``) in one notebook, counted before it is parsed: every
# value json.loads makes follows one of them, so they bound the objects a parse creates
# (about 100 bytes each at most: 1.8 GB for 63 MB of ``[{},{},...]`` without this bound,
# under 50 MB with it).  The course's 13 notebooks with every output saved hold 370 to
# 6,984 (at most 803 ``{``/``[``); printed output adds its commas and colons.
MAX_STRUCTURE = 500_000


class NotebookError(Exception):
    """A notebook that cannot be read (not JSON, not a notebook)."""


class MarkerError(Exception):
    """Unbalanced or nested solution markers; the message names the cell and line."""


@dataclass
class Cell:
    """One cell, with the facts release and grading need."""

    index: int  # position in the notebook (0-based)
    kind: str  # "code" | "markdown" | "raw"
    source: str
    id: str = ""
    tags: tuple = ()
    meta: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """How messages name the cell: number as Jupyter shows it, id, first line."""
        first = next((l.strip() for l in self.source.splitlines() if l.strip()), "(empty)")
        return f"cell {self.index + 1} (id {self.id or '?'}: {first[:50]!r})"

    @property
    def exercise_tag(self) -> str | None:
        """The exercise a release marked this cell with (cell metadata), if any."""
        course_meta = self.meta.get("course") if isinstance(self.meta, dict) else None
        name = course_meta.get("exercise") if isinstance(course_meta, dict) else None
        return name if isinstance(name, str) else None

    @property
    def has_solution(self) -> bool:
        return BEGIN in self.source or END in self.source

    @property
    def instructor_only(self) -> bool:
        return INSTRUCTOR_ONLY_TAG in self.tags or self.source.lstrip().startswith(
            INSTRUCTOR_ONLY_MARK
        )


def source_text(src) -> str:
    """A cell's source as one string (notebooks store str or a list of lines)."""
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def load(path) -> dict:
    """The notebook at ``path`` as JSON; NotebookError with a readable reason otherwise."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise NotebookError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    return loads(raw, path.name)


def loads(raw: bytes, name: str) -> dict:
    """A notebook from its bytes (``name`` for messages); NotebookError otherwise.

    What a parse may cost is bounded before it runs (:func:`structure`); nesting deeper
    than Python's recursion limit (1,000) stops json.loads itself (RecursionError)."""
    count = structure(raw)
    if count > MAX_STRUCTURE:
        raise NotebookError(
            f"{name} holds {count:,} JSON brackets, commas and colons (limit "
            f"{MAX_STRUCTURE:,}; the course's notebooks with all outputs saved hold under "
            "7,000): it was not parsed; clear its outputs (Edit > Clear All Outputs), "
            "save and submit again"
        )
    try:
        nb = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        raise NotebookError(
            f"{name} is not valid JSON ({str(exc)[:200]}); was it saved "
            "completely? Re-download it from Jupyter"
        ) from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError(f"{name} is JSON but not a notebook (no list of cells)")
    if len(nb["cells"]) > MAX_CELLS:
        raise NotebookError(f"{name} has {len(nb['cells']):,} cells (limit {MAX_CELLS:,})")
    return nb


def structure(raw: bytes) -> int:
    """How many ``{``, ``[``, ``,`` and ``:`` bytes ``raw`` holds (inside strings too: an
    upper bound of the values a parse makes), counted without parsing."""
    return sum(raw.count(c) for c in (b"{", b"[", b",", b":"))


def save(nb: dict, path) -> None:
    """Write ``nb`` as Jupyter does (one-space indent, UTF-8, a final newline)."""
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def cells(nb: dict) -> list[Cell]:
    """Every cell of ``nb`` as :class:`Cell` (broken entries become empty raw cells)."""
    out = []
    for i, c in enumerate(nb.get("cells", [])):
        if not isinstance(c, dict):
            out.append(Cell(i, "raw", ""))
            continue
        meta: dict = c["metadata"] if isinstance(c.get("metadata"), dict) else {}
        tags: list = meta["tags"] if isinstance(meta.get("tags"), list) else []
        out.append(
            Cell(
                i,
                str(c.get("cell_type", "raw")),
                source_text(c.get("source", "")),
                str(c.get("id", "") or ""),
                tuple(str(t) for t in tags),
                meta,
            )
        )
    return out


def stable_id(stem: str, index: int, source: str) -> str:
    """A deterministic cell id for cells that have none (nbformat < 4.5)."""
    return hashlib.sha1(f"{stem}:{index}:{source[:200]}".encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------------------
# solution regions


def solution_regions(cell: Cell) -> list[tuple[int, int]]:
    """(begin line, end line) pairs, 0-based and inclusive; MarkerError if unbalanced."""
    regions, start = [], None
    for n, line in enumerate(cell.source.splitlines()):
        if BEGIN in line:
            if start is not None:
                raise MarkerError(
                    f"{cell.label}: `{BEGIN}` on line {n + 1} before the "
                    f"`{END}` of the one on line {start + 1}"
                )
            start = n
        elif END in line:
            if start is None:
                raise MarkerError(
                    f"{cell.label}: `{END}` on line {n + 1} without a `{BEGIN}` before it"
                )
            regions.append((start, n))
            start = None
    if start is not None:
        raise MarkerError(f"{cell.label}: `{BEGIN}` on line {start + 1} is never closed by `{END}`")
    return regions


def solution_lines(cell: Cell) -> list[str]:
    """The lines inside the solution regions of ``cell`` (markers excluded)."""
    lines = cell.source.splitlines()
    return [l for a, b in solution_regions(cell) for l in lines[a + 1 : b]]


def substantive(lines) -> list[str]:
    """Lines with leading/trailing space removed, minus blanks, comments and `pass`."""
    out = []
    for l in lines:
        s = l.strip()
        if s and not s.startswith("#") and s != "pass":
            out.append(s)
    return out


# ---------------------------------------------------------------------------------------
# what a cell defines and checks


def check_calls(source: str) -> list[tuple[str, str]]:
    """(exercise, function name) for every ``course.check("name", fn)`` in ``source``."""
    return CHECK_CALL.findall(source)


def defined_functions(source: str) -> list[str]:
    """Names of top-level functions defined by ``source``, and of names it assigns (a
    predict exercise's answer dict); regex fallback for functions if it won't parse, or is
    too large to parse here (the grader's own process: ``ast.parse`` takes hundreds of
    times a source's size in memory)."""
    if len(source) > MAX_PARSED:
        return _DEF.findall(source)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _DEF.findall(source)
    out = []
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(n.name)
        elif isinstance(n, ast.Assign):
            out += [t.id for t in n.targets if isinstance(t, ast.Name)]
    return out


def is_definitions_only(source: str) -> bool:
    """True when a cell only imports, assigns and defines (no bare calls, loops, plots).

    Such cells are cheap and side-effect free enough for the grader to run as set-up.
    """
    if len(source) > MAX_PARSED:
        return False
    try:
        tree = ast.parse(_strip_magics(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    allowed = (
        ast.Import,
        ast.ImportFrom,
        ast.Assign,
        ast.AnnAssign,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
    )
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring or a lone constant
        if not isinstance(node, allowed):
            return False
    return True


def _strip_magics(source: str) -> str:
    return "\n".join("" if l.lstrip().startswith(("%", "!")) else l for l in source.splitlines())


# ---------------------------------------------------------------------------------------
# the grading plan of an instructor notebook


@dataclass
class ExerciseCell:
    """Where an exercise lives in an instructor notebook (its spec: ``course.exercises``)."""

    name: str
    function: str  # the function the check cell passes, e.g. "add"
    cell: Cell  # the instructor's exercise cell


@dataclass
class Plan:
    """What the grader runs for one lesson: setup cells and exercise cells, in order."""

    lesson: str
    steps: list  # [("setup", Cell) | ("solution", Cell)], notebook order
    exercises: dict  # name -> ExerciseCell, in notebook order

    @property
    def setup(self) -> list[Cell]:
        return [c for kind, c in self.steps if kind == "setup"]


def exercise_cells(cells: list[Cell]) -> dict:
    """exercise -> (function, its exercise cell): for each ``check("ex", fn)`` call, the last
    solution cell *before the check* that defines ``fn`` (several exercises of one lesson
    may name their kernel alike, e.g. lesson 02's three ``reduce`` kernels)."""
    out = {}
    for check_cell in cells:
        if check_cell.kind != "code":
            continue
        for ex, fn in check_calls(check_cell.source):
            owners = [
                c
                for c in cells
                if c.kind == "code"
                and c.has_solution
                and c.index <= check_cell.index
                and fn in defined_functions(c.source)
            ]
            if owners and ex not in out:
                out[ex] = (fn, owners[-1])
    return out


def is_colab_cell(source: str) -> bool:
    """The Colab install cell (``course.platform.hosting.colab_cell``): not part of any grading."""
    return source.lstrip().startswith("# On Google Colab only") and "google.colab" in source


def plan(path) -> Plan:
    """The grading plan of the instructor notebook at ``path``.

    Exercise cells: solution cells that define a function some check cell passes.
    Setup cells: code cells tagged ``setup``; when none is tagged, the first code cell (the
    ``import course`` cell; the Colab install cell before it is never run) and every code
    cell before the last solution cell that only imports, assigns and defines (so demos,
    plots and benchmarks are skipped).  Check cells are never run: the grader calls the
    checks.
    """
    path = Path(path)
    nb = load(path)
    all_cells = [
        c
        for c in cells(nb)
        if c.kind == "code" and not c.instructor_only and not is_colab_cell(c.source)
    ]
    solution = [c for c in all_cells if c.has_solution]
    for c in solution:
        solution_regions(c)  # MarkerError early
    exercises = {
        ex: ExerciseCell(ex, fn, cell) for ex, (fn, cell) in exercise_cells(all_cells).items()
    }
    tagged = any(SETUP_TAG in c.tags for c in all_cells)
    last = max((c.index for c in solution), default=-1)
    steps = []
    for c in all_cells:
        if c.has_solution:
            steps.append(("solution", c))
        elif check_calls(c.source):
            continue
        elif (
            (SETUP_TAG in c.tags)
            if tagged
            else (c is all_cells[0] or (c.index < last and is_definitions_only(c.source)))
        ):
            steps.append(("setup", c))
    return Plan(path.stem, steps, exercises)
