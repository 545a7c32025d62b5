"""A built wheel is a working course outside the checkout (JupyterHub images, Colab, pip).

The wheel is built from a copy of the project's files, installed with pip into a fresh
virtual environment in a temporary folder (its dependencies are this environment's, seen
through a plain path entry, so nothing is downloaded and no editable install leaks in),
and then, from a folder that is not the checkout: the faces, the hidden cases and the
committed profiles are found inside the installed package, ``python -m course notebooks``
copies the lessons out, lesson 01 runs top to bottom headless with its checks passing, and
a check with the hidden cases runs.  This is the suite's only run of lesson 01
(test_notebooks.py leaves it to this test).
"""
import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

SOURCES = ["pyproject.toml", "setup.py", "README.md", "course", "notebooks", "data",
           "instructor", "assets"]


def _sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _dependency_lines():
    """This environment's site-packages and its .pth hooks (numba-cuda's redirector of
    ``numba.cuda``), except the editable install of the checkout's ``course``."""
    lines = []
    for d in (p for p in site.getsitepackages() if os.path.isdir(p)):
        lines.append(d)
        for pth in sorted(Path(d).glob("*.pth")):
            if pth.name.startswith("__editable__") or "course" in pth.name:
                continue
            for line in pth.read_text().splitlines():
                if line.startswith(("import ", "import\t")):
                    lines.append(line)
                elif line.strip() and not line.startswith("#"):
                    lines.append(os.path.join(d, line.strip()))
    return lines


@pytest.fixture(scope="session")   # once per worker, even if xdist interleaves modules
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.egg-info", "screenshots", "benchmarks", "checks"))
        else:
            shutil.copy(p, src / name)
    _sh([sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", tmp / "dist", src],
        timeout=300)
    wheel = next((tmp / "dist").glob("course-*.whl"))
    venv = tmp / "venv"
    _sh([sys.executable, "-m", "venv", "--without-pip", venv], timeout=120)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _sh([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index",
         "-q", wheel], timeout=300)
    purelib = _sh([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    with open(os.path.join(purelib, "_course_test_deps.pth"), "w") as f:
        f.write("\n".join(_dependency_lines()) + "\n")
    work = tmp / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(COURSE_PROGRESS_FILE=str(tmp / "progress.json"), NUMBA_ENABLE_CUDASIM="1",
               MPLBACKEND="Agg")
    # the compile gate's NVRTC/NVVM come from this environment's nvidia wheels, which the
    # .pth above puts on sys.path but not where their loader looks: say where they are
    libs = [str(p) for d in site.getsitepackages() for p in Path(d).glob("nvidia/*/lib")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")])
    return py, work, env, wheel


def test_wheel_carries_the_course_files(installed):
    import zipfile

    _py, _work, _env, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ["course/_files/notebooks/01_vector_add.ipynb",
                 "course/_files/data/faces/lfw_faces_25x25.npy",
                 "course/_files/instructor/hidden/vector_add.py",
                 "course/_files/assets/profiles/nvidia-h100-80gb-hbm3-breakdown.json",
                 "course/_files/assets/reduction-trees.png", "course/platform/resources.py"]:
        assert must in names, must


def test_installed_course_finds_its_files_in_the_package(installed):
    py, work, env, _ = installed
    script = textwrap.dedent("""
        import json, course
        from course.platform import resources, data
        from course.grading import hidden
        from course.exercises import profiling
        print(json.dumps({
            "file": course.__file__, "installed": resources.INSTALLED, "root": str(resources.ROOT),
            "faces": data.real_faces().shape, "hidden": str(hidden.file_for("vector_add")),
            "profile": profiling.PROFILES.is_dir()}))
    """)
    out = json.loads(_sh([py, "-c", script], cwd=work, env=env, timeout=300).splitlines()[-1])
    assert "site-packages" in out["file"] and str(REPO) not in out["file"]
    assert out["installed"] and out["root"].endswith(os.path.join("course", "_files"))
    assert out["faces"] == [100, 25, 25]
    assert out["hidden"].startswith(out["root"]) and out["profile"]


def test_lesson_01_runs_from_the_installed_package(installed):
    py, work, env, _ = installed
    said = _sh([py, "-m", "course", "notebooks", "--to", work / "course"], cwd=work, env=env,
               timeout=120)
    n = len(list((REPO / "notebooks").glob("*.ipynb")))
    assert f"{n} notebook(s) written" in said
    assert (work / "course" / "assets" / "reduction-trees.png").exists()
    again = _sh([py, "-m", "course", "notebooks", "--to", work / "course"], cwd=work, env=env,
                timeout=120)
    assert "0 notebook(s) written" in again and f"{n} already there kept" in again
    script = textwrap.dedent("""
        import sys, nbformat
        from nbclient import NotebookClient
        path = sys.argv[1]
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=900, kernel_name="python3",
                       resources={"metadata": {"path": sys.argv[2]}}).execute()
        texts = [o.get("data", {}).get("text/plain", "") + o.get("text", "")
                 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for c in nb.cells for o in c.get("outputs", [])
                    if o.get("output_type") == "error"]
        print("PASSES", sum(t.count("PASS") for t in texts), "FAILS", sum(t.count("FAIL ") for t in texts))
        print("BANNER", [t for t in texts if t.startswith("Mode:")][:1])
    """)
    nb_dir = work / "course" / "notebooks"
    out = _sh([py, "-c", script, nb_dir / "01_vector_add.ipynb", nb_dir], cwd=work, env=env,
              timeout=900)
    line = next(l for l in out.splitlines() if l.startswith("PASSES"))
    assert int(line.split()[1]) >= 6 and line.split()[3] == "0", out[-2000:]


def test_a_check_with_hidden_cases_runs_from_the_installed_package(installed):
    py, work, env, _ = installed
    script = textwrap.dedent("""
        import course
        from numba import cuda

        @cuda.jit
        def add(n, x, y):
            for i in range(cuda.grid(1), n, cuda.gridsize(1)):
                y[i] = x[i] + y[i]

        r = course.check("vector_add", add, hidden=True, record=False)
        print("RESULT", r.passed, len(r.hidden))
    """)
    (work / "check_add.py").write_text(script)     # a file: the check reads the kernel's source
    out = _sh([py, "check_add.py"], cwd=work, env=env, timeout=600)
    _, passed, n_hidden = next(l for l in out.splitlines() if l.startswith("RESULT")).split()
    assert passed == "True" and int(n_hidden) > 0
