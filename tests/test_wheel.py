"""A built wheel is the student distribution, and a working course outside the checkout.

The wheel is built from a copy of the project's files, installed with pip into a fresh
virtual environment in a temporary folder (its dependencies are this environment's, seen
through a plain path entry, so nothing is downloaded and no editable install leaks in),
and then, from a folder that is not the checkout: the faces and the committed profiles are
found inside the installed package, ``python -m course notebooks`` copies the lessons out as
student copies, lesson 01's student copy runs top to bottom headless - with its exercise
cells answered, its checks pass - and a check runs the hidden cases of a folder the
instructor names.  This is the suite's only run of lesson 01 (test_notebooks.py leaves it to
this test), and its only wheel build: the JupyterHub image's build context (the wheel alone,
.dockerignore) is listed and scanned from the same build.
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

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # the built wheel, installed and run

SOURCES = [
    "pyproject.toml",
    "setup.py",
    "README.md",
    "course",
    "notebooks",
    "data",
    "instructor",
    "assets",
]


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


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves modules
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(
                p,
                src / name,
                ignore=shutil.ignore_patterns(
                    "__pycache__", "*.egg-info", "screenshots", "*.db", "checks"
                ),
            )
        else:
            shutil.copy(p, src / name)
    _sh(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", tmp / "dist", src],
        timeout=300,
    )
    wheel = next((tmp / "dist").glob("course-*.whl"))
    venv = tmp / "venv"
    _sh([sys.executable, "-m", "venv", "--without-pip", venv], timeout=120)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _sh(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            py,
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            wheel,
        ],
        timeout=300,
    )
    purelib = _sh([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    with open(os.path.join(purelib, "_course_test_deps.pth"), "w") as f:
        f.write("\n".join(_dependency_lines()) + "\n")
    work = tmp / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        COURSE_PROGRESS_FILE=str(tmp / "progress.json"), NUMBA_ENABLE_CUDASIM="1", MPLBACKEND="Agg"
    )
    # the compile gate's NVRTC/NVVM come from this environment's nvidia wheels, which the
    # .pth above puts on sys.path but not where their loader looks: say where they are
    libs = [str(p) for d in site.getsitepackages() for p in Path(d).glob("nvidia/*/lib")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")])
    return py, work, env, wheel


def test_wheel_carries_the_course_files(installed):
    import zipfile

    _py, _work, _env, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in [
        "course/_files/notebooks/01_vector_add.ipynb",
        "course/_files/data/faces/lfw_faces_25x25.npy",
        "course/_files/assets/profiles/nvidia-h100-80gb-hbm3-breakdown.json",
        "course/_files/assets/reduction-trees.png",
        "course/_files/assets/sliders/01_vector_add-grid_stride--nvidia-h200-2026-11-28.json",
        "course/_files/assets/benchmarks/vector_add-nvidia-h200-2026-11-22.json",
        "course/platform/resources.py",
        "course/grading/classroom/student.py",
        "course/leaderboard/templates/board.html",
    ]:
        assert must in names, must
    assert not [n for n in names if "/instructor/" in n or "_files/instructor" in n]


# -- the student distribution: what it must never hold ------------------------------------


def _solution_free(files: dict[str, str]) -> list[str]:
    """Problems with a distribution given as {name: text}: a solution region in a notebook,
    a hidden-case file or answer key (its code), an instructor solution body anywhere."""
    import tempfile

    from course.grading.classroom import notebook as nbk
    from course.grading.classroom.release import leaks

    sources = sorted((REPO / "notebooks").glob("*.ipynb"))
    problems = []
    # a hidden file's secret is its data: the lines of its functions that hold numbers
    hidden = {
        p.name: [
            l.strip()
            for l in p.read_text().split("\ndef ", 1)[-1].splitlines()
            if len(l.strip()) > 12
            and not l.strip().startswith("#")
            and any(ch.isdigit() for ch in l)
        ]
        for p in (REPO / "instructor" / "hidden").glob("*.py")
    }
    for name, text in files.items():
        if name.endswith(".ipynb") and (nbk.BEGIN in text or nbk.END in text):
            problems.append(f"{name}: a solution region")
        lines = {l.strip() for l in text.splitlines()}
        for h, body in hidden.items():
            if body and sum(l in lines for l in body) >= max(2, len(body) // 2):
                problems.append(f"{name}: the code of instructor/hidden/{h}")
    with tempfile.TemporaryDirectory() as t:
        for name, text in files.items():
            if name.endswith((".py", ".ipynb", ".md")):
                (Path(t) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(t) / name).write_text(text)
        problems += leaks(sources, [Path(t)], markers=False)
    return problems


def _wheel_texts(wheel) -> dict[str, str]:
    import zipfile

    z = zipfile.ZipFile(wheel)
    return {
        n: z.read(n).decode("utf-8", "replace")
        for n in z.namelist()
        if n.endswith((".py", ".ipynb", ".md", ".json", ".txt", "METADATA"))
    }


def _build_context(root: Path) -> list[str]:
    """The files ``docker build`` sends from ``root`` under its .dockerignore (Docker's rules:
    a pattern matches a path or a folder above it, ``!`` lets a path back in, the last
    matching pattern decides)."""
    import fnmatch

    rules = [
        l.strip()
        for l in (root / ".dockerignore").read_text().splitlines()
        if l.strip() and not l.lstrip().startswith("#")
    ]
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(root).as_posix()
        parts = rel.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        keep = True
        for rule in rules:
            pattern = rule.lstrip("!").rstrip("/")
            if any(
                fnmatch.fnmatch(x, pattern) and x.count("/") == pattern.count("/") for x in prefixes
            ):
                keep = rule.startswith("!")
        if keep:
            out.append(rel)
    return out


def test_the_wheel_holds_no_solution_hidden_case_or_key(installed):
    _py, _work, _env, wheel = installed
    texts = _wheel_texts(wheel)
    assert any(n.endswith("01_vector_add.ipynb") for n in texts)
    assert _solution_free(texts) == []


def test_the_scan_finds_what_it_looks_for():
    """The scan can fail: an instructor notebook, a hidden file and the lecture's add (the
    old exercise answer, had the exercise not changed) are each reported."""
    nb = (REPO / "notebooks" / "01_vector_add.ipynb").read_text()
    hidden = (REPO / "instructor" / "hidden" / "matrix_add.py").read_text()
    found = _solution_free({"a/01_vector_add.ipynb": nb, "b/matrix_add.py": hidden})
    assert any("solution region" in f for f in found), found
    assert any("instructor/hidden/matrix_add.py" in f for f in found), found
    reversed_add = (
        "    index = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
        "    stride = cuda.blockDim.x * cuda.gridDim.x\n"
        "    for i in range(index, n, stride):\n"
        "        y[i] = x[n - 1 - i] + y[i]\n"
    )
    assert _solution_free({"course/k.py": reversed_add}), "an exercise answer in course/"


def test_the_jupyterhub_build_context_is_the_student_wheel_alone(installed, tmp_path):
    _py, _work, _env, wheel = installed
    root = tmp_path / "context"
    shutil.copytree(
        REPO,
        root,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".whl",
            "__pycache__",
            "*.egg-info",
            "assets",
            "data",
            "tests",
            "dist",
            ".course-*",
        ),
    )
    (root / "dist").mkdir()
    shutil.copy(wheel, root / "dist" / wheel.name)
    context = _build_context(root)
    assert context == [f"dist/{wheel.name}"], context
    texts = {}
    for rel in context:
        texts.update({f"{rel}!{n}": t for n, t in _wheel_texts(root / rel).items()})
    assert _solution_free(texts) == []


def test_installed_course_finds_its_files_in_the_package(installed):
    py, work, env, _ = installed
    script = textwrap.dedent("""
        import json, course
        from course.platform import resources, data
        from course.grading import hidden
        from course.exercises import profiling
        from course.show import records
        from course.show import reported
        rec = records.load("01_vector_add/grid_stride")
        print(json.dumps({"record": rec and rec.label, "report": reported.report("vector_add")["file"],
            "file": course.__file__, "installed": resources.INSTALLED, "root": str(resources.ROOT),
            "faces": data.real_faces().shape, "hidden": str(hidden.file_for("vector_add")),
            "profile": profiling.PROFILES.is_dir()}))
    """)
    out = json.loads(_sh([py, "-c", script], cwd=work, env=env, timeout=300).splitlines()[-1])
    assert "site-packages" in out["file"] and str(REPO) not in out["file"]
    assert out["installed"] and out["root"].endswith(os.path.join("course", "_files"))
    assert out["faces"] == [100, 25, 25]
    assert out["hidden"] == "None" and out["profile"]  # no hidden case in a wheel
    assert out["record"] == "recorded on NVIDIA H200, 2026-11-28"  # a panel's GPU grid
    assert out["report"].startswith("vector_add-nvidia-")  # a table's GPU report


def _answered(student_nb: Path) -> None:
    """Put the instructor's solution into each exercise cell of a student copy (what a
    student who solved the lesson has), matched by cell id."""
    nb = json.loads(student_nb.read_text())
    mine = {
        c.get("id"): c["source"]
        for c in json.loads((REPO / "notebooks" / student_nb.name).read_text())["cells"]
    }
    for c in nb["cells"]:
        if c["cell_type"] == "code" and c["metadata"].get("course", {}).get("exercise"):
            src = "".join(mine[c["id"]])
            c["source"] = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith("###"))
    student_nb.write_text(json.dumps(nb))


def test_lesson_01_runs_from_the_installed_package(installed):
    py, work, env, _ = installed
    said = _sh(
        [py, "-m", "course", "notebooks", "--to", work / "course"], cwd=work, env=env, timeout=120
    )
    n = len(list((REPO / "notebooks").glob("*.ipynb")))
    assert f"{n} notebook(s) written" in said
    assert (work / "course" / "assets" / "reduction-trees.png").exists()
    copies = {p.name: p.read_text() for p in (work / "course" / "notebooks").glob("*.ipynb")}
    assert len(copies) == n and _solution_free(copies) == []  # the defaults: no solution
    assert "# YOUR CODE HERE" in copies["01_vector_add.ipynb"]
    again = _sh(
        [py, "-m", "course", "notebooks", "--to", work / "course"], cwd=work, env=env, timeout=120
    )
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
        # a student's copy has no answer key: its predict check says so, and only that fails
        print("PASSES", sum(t.count("PASS") for t in texts), "FAILS",
              sum(t.count("FAIL ") for t in texts if "no answer key" not in t),
              "NOKEY", sum("no answer key" in t for t in texts))
        print("BANNER", [t for t in texts if t.startswith("Mode:")][:1])
    """)
    nb_dir = work / "course" / "notebooks"
    _answered(nb_dir / "01_vector_add.ipynb")
    out = _sh(
        [py, "-c", script, nb_dir / "01_vector_add.ipynb", nb_dir], cwd=work, env=env, timeout=900
    )
    line = next(l for l in out.splitlines() if l.startswith("PASSES"))
    assert int(line.split()[1]) >= 5 and line.split()[3] == "0", out[-2000:]
    assert line.split()[5] == "1", out[-2000:]  # predict_launch: no key here


def test_a_check_with_hidden_cases_runs_from_the_installed_package(installed):
    py, work, env, _ = installed
    script = textwrap.dedent("""
        import course
        from numba import cuda

        @cuda.jit
        def add(n, x, y):
            for i in range(cuda.grid(1), n, cuda.gridsize(1)):
                y[i] = x[n - 1 - i] + y[i]

        r = course.check("vector_add", add, hidden=True, record=False)
        print("RESULT", r.passed, len(r.hidden))
    """)
    (work / "check_add.py").write_text(script)  # a file: the check reads the kernel's source
    for instructor, expect in ((None, 0), (REPO, 6)):
        e = dict(env, **({"COURSE_INSTRUCTOR_DIR": str(instructor)} if instructor else {}))
        out = _sh([py, "check_add.py"], cwd=work, env=e, timeout=600)
        _, passed, n_hidden = next(l for l in out.splitlines() if l.startswith("RESULT")).split()
        assert passed == "True" and int(n_hidden) == expect, (instructor, out[-1000:])
