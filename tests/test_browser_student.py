"""A student's laptop, in the browser (issue 48): a fresh student install (``python -m
course notebooks --to DIR``, no answer key), JupyterLab in headless Chromium, simulator mode.

- lessons 01, 04 and 07: Run All; each slider panel says its plot is the GPU's record (card
  and date), a slider moved redraws the plot from the record, and no cell shows an error;
- lesson 01's predict_launch answered right, then wrong: the check records the answer for
  grading (never "failed") and the experiment right after it sets the answers beside what
  it counts (5 of 5 agree, then 4 of 5).

Screenshots land in test-artifacts/browser/; with ``COURSE_SCREENSHOTS=assets/screenshots``
the README's copies are refreshed.  Same tier and Chromium as tests/test_browser.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import test_browser
from browser_helpers import (
    CHROMIUM_FLAGS,
    JupyterLab,
    error_outputs,
    notebook_json,
    open_notebook,
    prompts,
    run_all,
    visible_tracebacks,
)
from conftest import REPO
from test_browser import VIEWPORT, _browser_or_skip, _move_slider_and_see_new_plot

import course

# A slider move in the simulator redraws from the record, and the simulator counts one small
# launch of the new shape (lesson 04: about 7 s on an idle core); allow for a busy machine.
test_browser.SLIDER_TIMEOUT_S = 300

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(1500),
    pytest.mark.xdist_group("browser"),
    pytest.mark.skipif(course.MODE == "gpu", reason="what a laptop without a GPU shows"),
]

LESSONS = ["01_vector_add", "04_matmul", "07_covariance_pca"]
RUN_TIMEOUT_S = int(os.environ.get("COURSE_BROWSER_RUN_TIMEOUT", "900"))
ARTIFACTS = REPO / "test-artifacts" / "browser"
SCREENSHOTS = os.environ.get("COURSE_SCREENSHOTS")
RIGHT = "{'blocks': 3907, 'threads': 1000192, 'idle': 192, 'grid2d_threads': 72, 'grid2d_idle': 17}"
WRONG = "{'blocks': 3907, 'threads': 1000192, 'idle': 192, 'grid2d_threads': 72, 'grid2d_idle': 16}"


@pytest.fixture(scope="module")
def lab():
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="course-student-"))
    root, home, nokey = tmp / "course", tmp / "home", tmp / "no-answer-key"
    nokey.mkdir()
    made = subprocess.run(
        [sys.executable, "-m", "course", "notebooks", "--to", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    os.environ["COURSE_HIDDEN_DIR"] = str(nokey)  # a student's install has no key
    server = JupyterLab(
        root, home, ARTIFACTS / "jupyter-lab-student.log", drop_env=("NUMBA_ENABLE_CUDASIM",)
    )
    pw = browser = None
    try:
        server.start()
        pw = sync_playwright().start()
        browser = pw.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            env={**os.environ, "HOME": str(home)},
        )
        server.browser = browser
        yield server
    finally:
        os.environ.pop("COURSE_HIDDEN_DIR", None)
        if browser is not None:
            browser.close()
        if pw is not None:
            pw.stop()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _shot(page, name: str, cell=None, above: int = 0) -> None:
    """Screenshot the viewport with ``cell`` at its top (``above`` pixels of what precedes
    it still in view)."""
    if cell is not None:
        cell.evaluate(
            "(el, above) => { el.scrollIntoView({block: 'start'});"
            " const s = el.closest('.jp-WindowedPanel-outer'); if (s) s.scrollTop -= above; }",
            above,
        )
        page.wait_for_timeout(400)
    page.screenshot(path=str(ARTIFACTS / name))
    if SCREENSHOTS:
        dest = REPO / SCREENSHOTS
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(ARTIFACTS / name, dest / name)


def _cell_index(nb: dict, needle: str) -> int:
    found = [i for i, c in enumerate(nb["cells"]) if needle in "".join(c["source"])]
    assert len(found) == 1, (needle, found)
    return found[0]


def _run_cells(page, first: int, count: int, timeout_s: float = 120) -> None:
    """Run cells first .. first + count - 1 (Shift+Enter on each, as a person would)."""
    last = page.evaluate(
        "i => window.jupyterapp.shell.currentWidget.content.widgets[i].model"
        ".sharedModel.execution_count",
        first + count - 1,
    )
    page.evaluate(
        """([first, count]) => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = first;
            for (let k = 0; k < count; k++)
                window.jupyterapp.commands.execute('notebook:run-cell-and-select-next');
        }""",
        [first, count],
    )
    page.wait_for_function(
        """([i, before]) => { const c = window.jupyterapp.shell.currentWidget.content
               .widgets[i].model.sharedModel.execution_count;
             return c !== null && c !== before; }""",
        arg=[first + count - 1, last],
        timeout=timeout_s * 1000,
    )
    page.wait_for_timeout(500)


def _answer(page, nb: dict, text: str) -> None:
    i = _cell_index(nb, "answer_launch = {")
    page.evaluate(
        "([i, src]) => window.jupyterapp.shell.currentWidget.content.widgets[i].model"
        ".sharedModel.setSource(src)",
        [i, f"answer_launch = {text}"],
    )
    _run_cells(page, i, 3)  # the answer, the check, the experiment


def _open_and_run(lab, name: str, workspace: str):
    page = lab.browser.new_page(viewport=VIEWPORT)
    rel = f"notebooks/{name}.ipynb"
    open_notebook(page, lab, rel, workspace=workspace)  # a fresh one: the file browser closed
    page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
    seconds = run_all(page, lab, rel, RUN_TIMEOUT_S)
    print(f"{rel}: Run All took {seconds:.1f} s")
    nb = notebook_json(page)
    errors = error_outputs(nb) + visible_tracebacks(page)
    assert not errors, f"{rel}: cells show errors:\n" + "\n".join(errors)
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts(page)), prompts(page)
    return page, nb


@pytest.mark.parametrize("name", LESSONS)
def test_a_panel_redraws_from_the_gpu_record(lab, name):
    page, nb = _open_and_run(lab, name, f"student-{name}")
    try:
        panel = page.locator(".widget-vbox").first
        said = panel.inner_text()
        assert "simulator" in said and re.search(r"recorded on NVIDIA H\d00", said), said
        assert "CPU time is not a speed" in said
        moved = _move_slider_and_see_new_plot(page, f"student-{name}")
        print(f"{name}: {moved}")
        status = panel.locator(".widget-html").all_inner_texts()
        assert any("on the GPU" in t and "recorded on NVIDIA" in t for t in status), status
        _shot(page, f"{name}-panel.png", panel, above=160)  # the end of the cell's code
        if name == "01_vector_add":
            table = page.locator(".jp-Cell").filter(has_text="Vector add: recorded on").first
            assert "98765" not in table.inner_text()
            _shot(page, "01_vector_add-table.png", table)
    finally:
        page.close()
        lab.shutdown_kernels()


def test_predict_launch_right_then_wrong(lab):
    page, nb = _open_and_run(lab, "01_vector_add", "student-predict")
    try:
        i = _cell_index(nb, 'course.check("predict_launch"')
        for text, agree, name in ((RIGHT, 5, "right"), (WRONG, 4, "wrong")):
            t0 = time.time()
            _answer(page, nb, text)
            cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
            report = cells.nth(i).locator(".course-check")
            assert report.get_attribute("data-answered") == "true", report.inner_text()
            assert report.get_attribute("data-passed") == "false"
            said = report.inner_text()
            assert "recorded for grading" in said and said.count("\tanswered") == 5, said
            assert "\tfail" not in said and "0/5" not in said, said
            compared = cells.nth(i + 1).locator(".course-compare")
            assert compared.get_attribute("data-agree") == str(agree), compared.inner_text()
            print(f"predict_launch {name}: {time.time() - t0:.1f} s, {compared.inner_text()[:80]}")
            page.set_viewport_size({"width": VIEWPORT["width"], "height": 1400})  # + the table
            _shot(page, f"01_vector_add-predict-{name}.png", cells.nth(i), above=50)
            page.set_viewport_size(VIEWPORT)
    finally:
        page.close()
        lab.shutdown_kernels()
