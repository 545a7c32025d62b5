"""Notebooks are committed without outputs and execute top to bottom headless (simulator)."""

import json
import os
import time
from pathlib import Path

import nbformat
import pytest
from conftest import REPO
from nbclient import NotebookClient

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
TIME_LIMIT_S = int(os.environ.get("COURSE_NOTEBOOK_TIMEOUT", "600"))


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
@pytest.mark.parametrize("path", EXECUTED_HERE, ids=lambda p: p.stem)
def test_notebook_executes_headless(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=TIME_LIMIT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    t0 = time.time()
    client.execute()  # raises CellExecutionError on the first cell that errors
    elapsed = time.time() - t0
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
