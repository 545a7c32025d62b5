"""The course as a person uses it: JupyterLab + ipywidgets in headless Chromium (issue 10).

One ``jupyter lab`` (loopback, no token, everything under a temporary HOME) and one
headless Chromium (Debian's ``chromium``, driven by Playwright, which never downloads a
browser here) serve every notebook in NOTEBOOKS, then a student release of
STUDENT_NOTEBOOKS.  For each: Run > Run All Cells, then assert on the page:

- no cell shows an error (traceback), and every code cell ran;
- the `import course` cell's banner says the mode ("simulator" without a GPU);
- a SliderPanel renders (sliders + plot image, via JupyterLab's own ipywidgets 8 manager
  from jupyterlab_widgets: no labextension step), and pressing an arrow key on a slider
  handle re-runs the kernel and replaces the plot image;
- every ``course.check`` cell shows its HTML report: passed in the instructor notebook,
  failed in the student copy.

Screenshots of every notebook land in test-artifacts/browser/ (git-ignored).  The ones
for the README are refreshed with::

    COURSE_SCREENSHOTS=assets/screenshots .venv/bin/python -m pytest tests/test_browser.py

Without chromium the tests skip, unless $CI is set: then they fail (CI must install it).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from browser_helpers import (
    CHROMIUM_FLAGS,
    JupyterLab,
    error_outputs,
    find_chromium,
    notebook_json,
    open_notebook,
    prompts,
    run_all,
    stderr_outputs,
    visible_tracebacks,
)
from conftest import REPO

import course

# Lessons to open in the browser: a list edit adds one.  Missing notebooks are skipped.
NOTEBOOKS = ["00_start_here", "01_vector_add", "04_matmul"]
# Lessons whose student release (solutions removed) must show failing check reports.
STUDENT_NOTEBOOKS = ["01_vector_add"]

RUN_TIMEOUT_S = int(os.environ.get("COURSE_BROWSER_RUN_TIMEOUT", "150"))  # one Run All
SLIDER_TIMEOUT_S = 60  # one slider move: the kernel re-runs the variants
ARTIFACTS = REPO / "test-artifacts" / "browser"
SCREENSHOTS = os.environ.get("COURSE_SCREENSHOTS")  # e.g. assets/screenshots (README copies)
VIEWPORT = {"width": 1400, "height": 1100}
# Screenshots copied to $COURSE_SCREENSHOTS (for the README); all others stay artifacts.
README_SHOTS = [
    "00_start_here.png",
    "01_vector_add-panel.png",
    "04_matmul-panel.png",
]
MODE_WORD = course.platform.runtime.mode_label()  # "simulator" here, "GPU" on a GPU machine
CODE_CELL = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell"
CHECK_CALL = re.compile(r"""\bcheck\(\s*['"]([A-Za-z_]\w*)['"]""")

# One server + browser per process: under `pytest -n 2 --dist loadgroup` all run in one worker.
pytestmark = [pytest.mark.browser, pytest.mark.timeout(300), pytest.mark.xdist_group("browser")]


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _browser_or_skip() -> str:
    """Chromium's path; skip without it (fail instead under CI, which must install it)."""
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        missing = f"the playwright package is not importable ({exc}); pip install -e .[test]"
    chromium = find_chromium()
    if chromium is None:
        missing = missing or (
            "no chromium browser (/usr/bin/chromium): apt-get install -y chromium"
        )
    if missing:
        if _ci():
            pytest.fail(f"CI is set but {missing}; .ci/run must install it")
        pytest.skip(missing)
    return chromium


# ---------------------------------------------------------------------------------------
# student copy


def _strip_solutions(nb: dict) -> dict:
    """Minimal release: lines between the solution markers become ``pass``."""
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"]).splitlines(keepends=True)
        out, inside = [], False
        for line in src:
            if line.strip() == "### BEGIN SOLUTION":
                inside = True
                indent = line[: len(line) - len(line.lstrip())]
                out += [f"{indent}# YOUR CODE HERE\n", f"{indent}pass\n"]
            elif line.strip() == "### END SOLUTION":
                inside = False
            elif not inside:
                out.append(line)
        cell["source"] = "".join(out)
    return nb


def _student_copy(src: Path, dst: Path) -> str:
    """Write the student release of ``src`` to ``dst`` with the course's release tool
    (the minimal stripping above only where that tool does not exist); says which."""
    import importlib.util

    if importlib.util.find_spec("course.grading.classroom.release") is not None:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                "-m",
                "course",
                "release",
                "--src",
                str(src.parent),
                "--out",
                tmp,
                "--notebooks",
                src.stem,
            ]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            made = list(Path(tmp).rglob(src.name))
            assert r.returncode == 0 and made, (
                f"`{' '.join(cmd[1:])}` made no student copy "
                f"(rc {r.returncode}):\n{r.stderr[-2000:]}"
            )
            shutil.copy(made[0], dst)
            return "python -m course release"
    dst.write_text(json.dumps(_strip_solutions(json.loads(src.read_text())), indent=1))
    return "test-local solution stripping"


# ---------------------------------------------------------------------------------------
# fixtures: one server and one browser for the module


@pytest.fixture(scope="module")
def lab():
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="course-browser-"))
    root, home = tmp / "root", tmp / "home"
    (root / "notebooks").mkdir(parents=True)
    (root / "student").mkdir()
    for name in ("assets", "data"):  # what notebooks may read beside them (../assets/...)
        if (REPO / name).exists():
            (root / name).symlink_to(REPO / name)
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):  # copies: Lab never saves ours
        shutil.copy(nb, root / "notebooks" / nb.name)
    how = {}
    for name in STUDENT_NOTEBOOKS:
        src = REPO / "notebooks" / f"{name}.ipynb"
        if src.exists():
            how[name] = _student_copy(src, root / "student" / src.name)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # under -n N, one server per worker
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    # `import course` (conftest) set NUMBA_ENABLE_CUDASIM for this process; a person's
    # kernel chooses by itself, so pass the variable on only if it was set before that.
    chosen = not course.platform.runtime.MODE_REASON.startswith("NUMBA_ENABLE_CUDASIM")
    log = ARTIFACTS / f"jupyter-lab{'-' + worker if worker else ''}.log"
    server = JupyterLab(root, home, log, drop_env=("NUMBA_ENABLE_CUDASIM",) if chosen else ())
    pw = browser = None
    atexit.register(server.stop)  # a second guard; stop() is a no-op once stopped
    try:
        server.start()
        pw = sync_playwright().start()
        browser = pw.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            env={**os.environ, "HOME": str(home)},
        )
        server.browser, server.student_how = browser, how
        yield server
    finally:
        if browser is not None:
            browser.close()
        if pw is not None:
            pw.stop()
        server.stop()  # by PID (process group), also when a test failed
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# what a person does and sees


def _code_sources(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _shot(page, tag: str, kind: str, cell=None) -> None:
    """Screenshot the viewport (``cell`` scrolled to the top) as <tag>[-kind].png."""
    if cell is not None:
        cell.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
    name = f"{tag}{'-' + kind if kind else ''}.png"
    page.screenshot(path=str(ARTIFACTS / name))
    if SCREENSHOTS and name in README_SHOTS:
        dest = (REPO / SCREENSHOTS) if not os.path.isabs(SCREENSHOTS) else Path(SCREENSHOTS)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(ARTIFACTS / name, dest / name)


def _full_shot(page, tag: str) -> None:
    """The whole notebook in one tall image (artifact only)."""
    height = page.evaluate(
        "() => { const s = document.querySelector("
        "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');"
        " return s ? s.scrollHeight : 0; }"
    )
    if height:
        page.set_viewport_size({"width": VIEWPORT["width"], "height": min(height + 200, 12000)})
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / f"{tag}-full.png"))
        page.set_viewport_size(VIEWPORT)


def _panel_problem(panel) -> str | None:
    """The panel's status line when it shows an exception or an invalid setting."""
    text = " ".join(panel.locator(".widget-html").all_inner_texts())
    m = re.search(r"(Not a valid setting.*|\b\w*(Error|Exception): .*)", text)
    return m.group(0)[:500] if m else None


def _move_slider_and_see_new_plot(page, tag: str) -> str:
    """Keyboard on a slider handle (a tile-size one if there is one) -> a new plot image."""
    labels = [t.strip() for t in page.locator(".widget-slider .widget-label").all_inner_texts()]
    assert labels, "no slider rendered"
    name = next((l for l in labels if "tile" in l.lower()), labels[0])
    slider = (
        page.locator(".widget-slider")
        .filter(
            has=page.locator(".widget-label", has_text=re.compile(rf"^\s*{re.escape(name)}\s*$"))
        )
        .first
    )
    panel = slider.locator("xpath=ancestor::div[contains(@class, 'widget-vbox')][1]")
    img = panel.locator("img.widget-image").first
    handle = slider.locator(".noUi-handle").first
    readout = slider.locator(".widget-readout")
    img.scroll_into_view_if_needed()
    before_src, before_png, before_value = (
        img.get_attribute("src"),
        img.screenshot(),
        readout.inner_text(),
    )
    at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
    handle.focus()
    page.keyboard.press("ArrowLeft" if at_max else "ArrowRight")
    t0 = time.time()
    try:
        page.wait_for_function(
            "([img, src]) => img.getAttribute('src') !== src && img.complete"
            " && img.naturalWidth > 0",
            arg=[img.element_handle(), before_src],
            timeout=SLIDER_TIMEOUT_S * 1000,
        )
    except Exception as exc:  # noqa: BLE001 - turn playwright's timeout into a clear failure
        raise AssertionError(
            f"{tag}: moving slider {name} ({before_value} -> "
            f"{readout.inner_text()}) did not change the plot image "
            f"within {SLIDER_TIMEOUT_S} s"
        ) from exc
    after_value = readout.inner_text()
    assert after_value != before_value, f"{tag}: slider {name} did not move"
    problem = _panel_problem(panel)
    assert not problem, f"{tag}: after {name} {before_value} -> {after_value}: {problem}"
    assert img.screenshot() != before_png, f"{tag}: plot image src changed, pixels did not"
    return f"{name}: {before_value} -> {after_value}, new plot in {time.time() - t0:.1f} s"


def _run_notebook(lab, rel: str, tag: str, *, student: bool) -> None:
    src = lab.root / rel
    codes = _code_sources(src)
    has_panel = any("SliderPanel(" in c for c in codes)
    checks = [m.group(1) for c in codes for m in CHECK_CALL.finditer(c)]
    mine = re.compile(rf"{re.escape(tag)}(-(full|panel|check|failed))?\.(png|ipynb)")
    for stale in ARTIFACTS.glob(f"{tag}*"):  # this notebook's files from an earlier run
        if mine.fullmatch(stale.name):
            stale.unlink(missing_ok=True)
    page = lab.browser.new_page(viewport=VIEWPORT)
    t_start = time.time()
    try:
        open_notebook(page, lab, rel, workspace=tag)
        page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
        t_open = time.time()
        seconds = run_all(page, lab, rel, RUN_TIMEOUT_S)
        print(
            f"{rel}: page + kernel ready in {time.time() - t_open - seconds:.1f} s, "
            f"Run All took {seconds:.1f} s"
        )
        nb = notebook_json(page)
        (ARTIFACTS / f"{tag}.ipynb").write_text(json.dumps(nb, indent=1))
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        _shot(page, tag, "", page.locator(".jp-Cell").first)
        _full_shot(page, tag)

        errors = error_outputs(nb) + visible_tracebacks(page)
        assert not errors, f"{rel}: cells show errors:\n" + "\n".join(errors)
        for text in stderr_outputs(page):
            print(f"{rel}: stderr shown in a cell: {text[:300]}")
        ps = prompts(page)
        assert all(re.fullmatch(r"\[\d+\]:", p) for p in ps), f"{rel}: cells not run: {ps}"

        # code cell 1 is the Colab install cell (silent here); cell 2 imports course
        first_out = page.locator(CODE_CELL).nth(1).locator(".jp-OutputArea").inner_text()
        assert MODE_WORD in first_out, f"{rel}: banner does not say {MODE_WORD!r}: {first_out!r}"

        if has_panel:
            sliders = page.locator(".widget-vbox .widget-slider .noUi-handle")
            assert sliders.count() >= 1, f"{rel}: a SliderPanel cell rendered no slider"
            img = page.locator(".widget-vbox img.widget-image").first
            assert img.is_visible() and img.evaluate("i => i.naturalWidth > 0"), (
                f"{rel}: the panel's plot image is not shown"
            )
            assert MODE_WORD in page.locator(".widget-vbox").first.inner_text(), (
                f"{rel}: the panel's mode line does not say {MODE_WORD!r}"
            )
            for i in range(page.locator(".widget-vbox").count()):
                problem = _panel_problem(page.locator(".widget-vbox").nth(i))
                assert not problem, f"{rel}: slider panel {i} shows: {problem}"
            print(f"{rel}: {_move_slider_and_see_new_plot(page, tag)}")
            _shot(
                page,
                tag,
                "panel",
                page.locator(".jp-Cell").filter(has=page.locator(".widget-vbox")).first,
            )

        reports = page.locator(".jp-OutputArea .course-check")
        assert reports.count() == len(checks), (
            f"{rel}: {len(checks)} check cells ({checks}) but {reports.count()} reports shown"
        )
        if checks:
            passed = [reports.nth(i).get_attribute("data-passed") for i in range(len(checks))]
            want = "false" if student else "true"
            assert passed == [want] * len(checks), (
                f"{rel}: check reports {dict(zip(checks, passed))}, expected all {want}"
            )
            check_cell = page.locator(".jp-Cell").filter(has=reports.first).first
            exercise_cell = check_cell.locator("xpath=preceding-sibling::div[1]")
            _shot(page, tag, "check", exercise_cell if exercise_cell.count() else check_cell)
    except BaseException:
        try:
            page.screenshot(path=str(ARTIFACTS / f"{tag}-failed.png"))
        except Exception:  # noqa: BLE001 - the page may be gone; the assertion matters
            pass
        raise
    finally:
        page.close()
        lab.shutdown_kernels()
        print(f"{rel}: {time.time() - t_start:.1f} s in all")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_in_jupyterlab(lab, name):
    if not (REPO / "notebooks" / f"{name}.ipynb").exists():
        pytest.skip(f"notebooks/{name}.ipynb does not exist (yet)")
    _run_notebook(lab, f"notebooks/{name}.ipynb", name, student=False)


@pytest.mark.parametrize("name", STUDENT_NOTEBOOKS)
def test_student_release_in_jupyterlab(lab, name):
    if not (REPO / "notebooks" / f"{name}.ipynb").exists():
        pytest.skip(f"notebooks/{name}.ipynb does not exist (yet)")
    print(f"student copy made with: {lab.student_how[name]}")
    _run_notebook(lab, f"student/{name}.ipynb", f"{name}-student", student=True)
