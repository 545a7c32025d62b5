"""Notebooks are committed without outputs and execute top to bottom headless (simulator)."""

import json
import os
import time
import warnings
from pathlib import Path

import nbformat
import pytest
from conftest import REPO
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
TIME_LIMIT_S = int(os.environ.get("COURSE_NOTEBOOK_TIMEOUT", "600"))
# A cell still running after CELL_LIMIT_S is interrupted (before pytest-timeout ends the test
# with nothing but the client's own stack), and from STACKS_AFTER_S on the kernel writes
# every thread's stack to a file each STACKS_AFTER_S: a hung cell is named and shown.
CELL_LIMIT_S = min(TIME_LIMIT_S, 360)
STACKS_AFTER_S = 240


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{path.name} cell {i} has outputs: clear them"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has a count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_colab_cell_then_import_course_first(path):
    """Cell 1: the Colab install cell (the same in every notebook); cell 2: `import course`."""
    from course.platform.hosting import COLAB_CELL

    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]) == COLAB_CELL, (
        f"{path.name}: the first code cell must be course.platform.hosting.COLAB_CELL (python -m course colab --write)"
    )
    first = "".join(code[1]["source"]).strip().splitlines()
    imports = [l for l in first if l.startswith(("import ", "from "))]
    assert imports and imports[0] == "import course", f"{path.name}: `import course` must be first"


# Each notebook runs once: lesson 01 from the installed wheel (tests/test_wheel.py, which also
# proves a pip install outside the checkout works), and the notebooks the browser test runs
# with Run All (tests/test_browser.py: no cell may show an error, every cell must have run;
# under CI a missing Chromium fails that test rather than skipping it) there.
from test_browser import NOTEBOOKS as RUN_IN_THE_BROWSER  # noqa: E402

EXECUTED_HERE = [
    p for p in NOTEBOOKS if p.stem != "01_vector_add" and p.stem not in RUN_IN_THE_BROWSER
]


@pytest.mark.notebook
@pytest.mark.timeout(2 * CELL_LIMIT_S + 300)  # a stuck cell, then the notebook once more
@pytest.mark.parametrize("path", EXECUTED_HERE, ids=lambda p: p.stem)
def test_notebook_executes_headless(path, tmp_path):
    try:
        nb, elapsed = _execute(path, tmp_path / "first")
    except _Stuck as stuck:
        # A cell that never ends is a bug to find (the stacks say where), but one hang in
        # many runs must not hide whether the notebook works: it runs once more, and the
        # hang stays in the test report as a warning.
        warnings.warn(f"{path.name} hung once and ran again: {stuck}", stacklevel=1)
        nb, elapsed = _execute(path, tmp_path / "again")
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, errors
    print(f"{path.name}: {elapsed:.1f} s")
    out = os.environ.get("COURSE_NOTEBOOK_OUT")  # keep executed copies (e.g. GPU runs)
    nbformat.write(nb, (Path(out) if out else tmp_path) / path.name)


class _Stuck(AssertionError):
    """A cell ran past CELL_LIMIT_S and was interrupted."""


def _execute(path: Path, folder: Path):
    """(the executed notebook, seconds); :class:`_Stuck` when a cell ran past CELL_LIMIT_S,
    AssertionError when one failed, each with the kernel's stacks if it ran that long."""
    folder.mkdir(parents=True)
    nb = nbformat.read(path, as_version=4)
    stacks = folder / "kernel-stacks.txt"
    nb.cells.insert(0, nbformat.v4.new_code_cell(_stack_dumps(stacks)))
    client = NotebookClient(
        nb,
        timeout=CELL_LIMIT_S,
        interrupt_on_timeout=True,  # the interrupted cell's traceback shows where it was
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    t0 = time.time()
    try:
        client.execute()  # raises CellExecutionError on the first cell that errors
    except Exception as exc:
        elapsed = time.time() - t0
        dump = stacks.read_text()[-12000:] if stacks.exists() else ""
        why = f"{path.name} failed after {elapsed:.0f} s: {exc}" + (
            f"\n--- the kernel's threads, every {STACKS_AFTER_S} s ---\n{dump}" if dump else ""
        )
        stuck = getattr(exc, "ename", "") == "KeyboardInterrupt" or isinstance(
            exc, CellTimeoutError
        )
        raise (_Stuck if stuck else AssertionError)(why) from exc
    elapsed = time.time() - t0
    del nb.cells[0]
    return nb, elapsed


def _stack_dumps(file) -> str:
    """The cell the test runs first: the kernel dumps every thread's stack into ``file``
    each STACKS_AFTER_S seconds (a notebook that runs that long is slow or stuck)."""
    return (
        "import faulthandler\n"
        f"_course_stacks = open({str(file)!r}, 'w')\n"
        f"faulthandler.dump_traceback_later({STACKS_AFTER_S}, repeat=True, file=_course_stacks)"
    )
