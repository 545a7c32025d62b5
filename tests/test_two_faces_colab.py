"""The Colab route gives a student the student copies, never the instructor's notebooks.

A Colab link to ``notebooks/NN.ipynb`` of the repository opens the instructor notebook,
solutions included.  The README's one link opens ``colab/open_course.ipynb`` instead, which
installs the course and writes the student copies into the student's Google Drive.  Colab
itself is not here: its cell runs with a stand-in ``google.colab``.
"""

import json
import re
import subprocess
import sys
import types

import pytest
from conftest import REPO

from course.grading.classroom import distribute, student
from course.grading.classroom import notebook as nbk
from course.platform import hosting

SOLUTION = "### BEGIN SOLUTION"
URL = re.compile(r"https?://[^\s)\"'<>\]]+")
GITHUB = re.compile(
    r"(?:colab\.research\.google\.com/github|github\.com)/([\w.-]+/[\w.-]+)"
    r"/blob/([\w.-]+)/([^\s)\"'#?]+)"
)


def _texts():
    """Every text a student may follow a link from: both READMEs, every notebook of the
    repository (the lessons' Colab cells included), the start notebook, the link that
    ``python -m course colab`` prints."""
    yield "README.md", (REPO / "README.md").read_text()
    yield "instructor/README.md", (REPO / "instructor" / "README.md").read_text()
    for p in sorted(REPO.glob("notebooks/*.ipynb")) + sorted(REPO.glob("colab/*.ipynb")):
        yield p.relative_to(REPO).as_posix(), p.read_text()
    nbs = sorted((REPO / "notebooks").glob("*.ipynb"))
    yield "python -m course colab", hosting.colab_table(nbs)
    yield "COLAB_CELL", hosting.COLAB_CELL


def test_no_link_or_route_points_a_student_at_a_solution():
    opened = []
    for where, text in _texts():
        for url in URL.findall(text):
            m = GITHUB.search(url)
            if m and m.group(1) == hosting.REPOSITORY:
                target = REPO / m.group(3)
                assert target.is_file(), f"{where}: {url} opens {m.group(3)}, not in the repository"
                assert SOLUTION not in target.read_text(), (
                    f"{where}: {url} opens {m.group(3)}, which holds the solutions"
                )
                opened.append(m.group(3))
            assert not re.search(r"/notebooks/\d\d_\w+\.ipynb", url), (
                f"{where}: {url} opens a lesson notebook of the repository (the instructor's)"
            )
    assert hosting.COLAB_START in opened, "the README links the Colab start notebook"


def test_the_committed_start_notebook_is_the_generated_one():
    committed = json.loads((REPO / hosting.COLAB_START).read_text())
    assert committed == distribute.colab_start_notebook(), (
        "colab/open_course.ipynb is stale: run python -m course colab --write"
    )
    assert SOLUTION not in json.dumps(committed) and not nbk.exercise_cells(nbk.cells(committed))
    fork = json.dumps(distribute.colab_start_notebook("me/fork", "dev"))
    assert "me/fork@dev" in fork and hosting.REPOSITORY not in fork


def test_the_start_cell_installs_the_course_and_writes_student_copies_to_drive(
    tmp_path, monkeypatch, capsys
):
    drive = tmp_path / "drive" / "MyDrive" / "numba-course"
    calls, mounts = [], []

    def fake_run(cmd, **kw):  # pip is recorded; `course notebooks` really runs
        calls.append(cmd)
        if cmd[1:4] == ["-m", "course", "notebooks"]:
            assert distribute.notebooks_main(cmd[4:]) == 0
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    google = types.ModuleType("google")
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mounts.append)
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    nb = distribute.colab_start_notebook()
    (code,) = [c for c in nb["cells"] if c["cell_type"] == "code"]
    source = "".join(code["source"]).replace(distribute.DRIVE_FOLDER, str(drive))
    exec(compile(source, "open_course", "exec"), {})
    assert calls[0][:4] == [sys.executable, "-m", "pip", "install"]
    assert calls[0][-1] == hosting.requirement()
    assert mounts == ["/content/drive"]
    written = sorted((drive / "notebooks").glob("*.ipynb"))
    assert [p.name for p in written] == sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    for p in written:
        assert SOLUTION not in p.read_text() and student.is_student_copy(nbk.load(p)), p.name
    lines = [l for l in capsys.readouterr().out.splitlines() if "Google Drive" in l]
    assert (
        len(lines) == len(written)
        and "File > Open notebook > Google Drive > numba-course/notebooks/01_vector_add.ipynb"
        in lines[1]
    )


def test_drive_links_open_each_lesson_by_its_drive_id(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_vector_add.ipynb").write_text("{}")
    monkeypatch.setattr(distribute.os, "getxattr", lambda p, name: b"1AbC", raising=False)
    got = distribute.drive_links(tmp_path, show=lambda line: None)
    assert got == [("01_vector_add", "https://colab.research.google.com/drive/1AbC")]
    shown = []
    distribute.drive_links(tmp_path / "empty", show=shown.append)
    assert shown and "no notebooks" in shown[0]


@pytest.mark.parametrize("doc", ["README.md", "instructor/README.md"])
def test_the_readmes_say_the_colab_link_gives_student_copies(doc):
    text = " ".join((REPO / doc).read_text().split())
    assert "colab/open_course.ipynb" in text and "student copies" in text
