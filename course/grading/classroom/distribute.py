"""Getting the notebooks to students: copies out of an installed package, and Colab cells.

``python -m course notebooks --to DIR`` writes the student copies of the lessons (from the
checkout or an installed wheel, ``course/platform/resources.py``; solutions never leave the
checkout) into a folder a student can open, and ``--restore LESSON`` brings one back;
``python -m course colab [--write]`` prints the README's Open-in-Colab link and sets every
notebook's first cell to the Colab install cell (``course/platform/hosting.py``); the link
opens ``colab/open_course.ipynb`` (:func:`colab_start_notebook`), which writes the student
copies into the student's Google Drive - a link to a lesson notebook of the repository
would open the instructor's, solutions included.  Both
write notebooks, so they live here beside the notebook reader, not in the platform layer.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path

from ...platform.hosting import (
    BRANCH,
    COLAB_START,
    REPOSITORY,
    colab_cell,
    colab_table,
    requirement,
)
from ...platform.resources import path
from . import notebook as nbk
from . import student
from .lesson_names import UnknownLesson, find_lesson, lesson_named  # noqa: F401 - re-exported


def lesson_copy(src: Path) -> dict:
    """The student copy of the lesson notebook at ``src`` (already one in a wheel)."""
    nb = nbk.load(src)
    if student.is_student_copy(nb):
        return nb
    from .release import student_notebook

    return student_notebook(nb, src.stem)


def copy_notebooks(dest: Path, force: bool = False) -> list[Path]:
    """Write the student copy of every lesson (and the figures they link to, ``../assets``)
    into ``dest``: never a solution, from a checkout or an installed wheel alike.

    Existing files are kept unless ``force``: a student's work is never overwritten.
    """
    dest = Path(dest)
    sources = lessons()
    _not_the_source(dest)
    (dest / "notebooks").mkdir(parents=True, exist_ok=True)
    (dest / "assets").mkdir(parents=True, exist_ok=True)
    written = []
    for src in sources:
        target = dest / "notebooks" / src.name
        if target.exists() and not force:
            continue
        nbk.save(lesson_copy(src), target)
        written.append(target)
    for fig in sorted(path("assets").glob("*.png")):
        target = dest / "assets" / fig.name
        if force or not target.exists():
            shutil.copyfile(fig, target)
    return written


def _not_the_source(dest: Path) -> None:
    """Refuse to write over the lessons' own folder (the instructor notebooks of a
    checkout): student copies go somewhere else."""
    if (Path(dest) / "notebooks").resolve() == path("notebooks").resolve():
        raise OSError(
            f"{Path(dest) / 'notebooks'} holds the course's own notebooks (with "
            "the solutions, in a checkout): write the student copies elsewhere, "
            "e.g. --to ~/course-notebooks"
        )


def lessons() -> list[Path]:
    """The course's lesson notebooks (the checkout's, or the installed package's)."""
    sources = sorted(path("notebooks").glob("*.ipynb"))
    if not sources:
        raise FileNotFoundError(f"no notebooks found in {path('notebooks')}")
    return sources


def restore(dest: Path, name: str, now: float | None = None) -> tuple[Path, Path | None]:
    """Bring back the fresh student copy of one lesson in ``dest/notebooks``; the notebook
    that was there is kept beside it as ``<lesson>.broken-<YYYY-MM-DDTHHMM>.ipynb``.
    Returns (the restored notebook, where the old one went or None)."""
    src = find_lesson(name, lessons(), "--restore")
    _not_the_source(dest)
    folder = Path(dest) / "notebooks"
    folder.mkdir(parents=True, exist_ok=True)
    target, kept = folder / src.name, None
    if target.exists():
        stamp = time.strftime("%Y-%m-%dT%H%M", time.localtime(now))
        kept = folder / f"{src.stem}.broken-{stamp}.ipynb"
        n = 2
        while kept.exists():  # twice in one minute: both kept
            kept = folder / f"{src.stem}.broken-{stamp}-{n}.ipynb"
            n += 1
        os.replace(target, kept)
    nbk.save(lesson_copy(src), target)
    return target, kept


def notebooks_main(argv=None) -> int:
    """``python -m course notebooks --to DIR [--force | --restore LESSON]``"""
    ap = argparse.ArgumentParser(
        prog="python -m course notebooks",
        description="Write the student copies of the course's notebooks (from this checkout "
        "or the installed package; never a solution) into a folder to open with "
        "Jupyter.  The instructor notebooks stay in the checkout: open them there "
        "(jupyter lab notebooks/).",
    )
    ap.add_argument("--to", type=Path, required=True, help="folder to write (created)")
    ap.add_argument(
        "--student",
        action="store_true",
        help="student copies (the default, and the only kind; kept for old scripts)",
    )
    ap.add_argument(
        "--force",
        action="store_true",
        help="overwrite every notebook already there (your work in them is lost)",
    )
    ap.add_argument(
        "--restore",
        metavar="LESSON",
        help="bring back one lesson's fresh copy, e.g. 01 or 01_vector_add; the "
        "notebook it replaces is kept beside it (.broken-<time>.ipynb)",
    )
    opts = ap.parse_args(argv)
    if opts.restore and opts.force:
        ap.error(
            "--restore brings back one lesson and keeps the old one; --force overwrites "
            "all: give one of them"
        )
    try:
        if opts.restore:
            target, kept = restore(opts.to, opts.restore)
            print(
                f"restored {target}"
                + (f"; the notebook it replaced is kept as {kept}" if kept else "")
            )
            return 0
        written = copy_notebooks(opts.to, force=opts.force)
    except (OSError, UnknownLesson, nbk.NotebookError) as exc:
        print(f"notebooks: {exc}", file=sys.stderr)
        return 2
    kept = sum((opts.to / "notebooks" / s.name).exists() for s in lessons()) - len(written)
    print(
        f"{len(written)} notebook(s) written to {opts.to / 'notebooks'}"
        + (f", {kept} already there kept (use --restore LESSON for one fresh copy)" if kept else "")
        + f"; open them with: {open_command(opts.to / 'notebooks')}"
    )
    return 0


def open_command(folder: Path) -> str:
    """The command that opens ``folder`` in JupyterLab from this Python's own environment
    (a venv's ``jupyter`` need not be on PATH), with ``--allow-root`` where JupyterLab
    would otherwise refuse to start."""
    exe = Path(sys.executable).with_name("jupyter")
    jupyter = str(exe) if exe.exists() else "jupyter"
    root = os.name == "posix" and os.geteuid() == 0
    return f"{jupyter} lab {folder}" + (" --allow-root" if root else "")


def set_colab_cell(path: Path, cell: str) -> bool:
    """Make ``cell`` the first code cell of the notebook at ``path``; True if it changed."""
    nb = nbk.load(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    lines = cell.splitlines(keepends=True)
    if code and nbk.is_colab_cell("".join(code[0]["source"])):
        if "".join(code[0]["source"]) == cell:
            return False
        code[0]["source"] = lines
    else:
        first = nb["cells"].index(code[0]) if code else len(nb["cells"])
        nb["cells"].insert(
            first,
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "colab-install",
                "metadata": {},
                "outputs": [],
                "source": lines,
            },
        )
    nbk.save(nb, path)
    return True


# ---------------------------------------------------------------------------------------
# Colab: the start notebook writes the student copies into the student's Google Drive

DRIVE_FOLDER = "/content/drive/MyDrive/numba-course"


def colab_start_notebook(repo: str = REPOSITORY, branch: str = BRANCH) -> dict:
    """``colab/open_course.ipynb``: what the README's Colab link opens.  It holds no
    exercise; run on Colab, it installs the course from ``repo``, mounts Google Drive,
    writes the student copies there (``python -m course notebooks``: never a solution, and
    never over a notebook already there) and links each one (:func:`drive_links`)."""
    intro = (
        "# Open the course on Google Colab\n\n"
        "Run the cell below (Runtime > Run all). It installs the course (about a minute), asks "
        "for your Google Drive, and writes **your own copy** of every lesson there, in "
        "`MyDrive/numba-course/notebooks/`, with every exercise open. Then it links each "
        "lesson: open one, and it runs on Colab's GPU (Runtime > Change runtime type > GPU) or "
        "in the simulator.\n\n"
        "Running it again keeps your work: notebooks already in the folder are never "
        "overwritten. To start one lesson afresh (yours is kept beside it), run "
        "`!python -m course notebooks --to /content/drive/MyDrive/numba-course --restore 01`."
    )
    code = (
        "# Install the course, then write your copies of the lessons into Google Drive.\n"
        "import subprocess, sys\n"
        'subprocess.run([sys.executable, "-m", "pip", "install", "-q",\n'
        f'                "{requirement(repo, branch)}"], check=True)\n'
        "from google.colab import drive\n"
        'drive.mount("/content/drive")\n'
        f'FOLDER = "{DRIVE_FOLDER}"\n'
        'subprocess.run([sys.executable, "-m", "course", "notebooks", "--to", FOLDER],\n'
        "               check=True)\n"
        "from course.grading.classroom.distribute import drive_links\n"
        "drive_links(FOLDER)"
    )
    cells = [
        {
            "cell_type": "markdown",
            "id": "intro",
            "metadata": {},
            "source": intro.splitlines(keepends=True),
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "open-course",
            "metadata": {},
            "outputs": [],
            "source": code.splitlines(keepends=True),
        },
    ]
    return {
        "cells": cells,
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "accelerator": "GPU",
            "colab": {"provenance": []},
            "course": {"copy": "colab-start"},
        },
    }


def drive_links(folder, show=print) -> list[tuple[str, str]]:
    """(lesson, where to open it) for every student notebook in ``folder/notebooks``: a
    Colab link when Google Drive's mount tells the file's id, else the menu path.  Each is
    handed to ``show`` as one line."""
    out = []
    nbs = sorted((Path(folder) / "notebooks").glob("*.ipynb"))
    for nb in nbs:
        try:
            file_id = os.getxattr(nb, "user.drive.id").decode()
        except (OSError, AttributeError):  # not on Drive's mount, or not synced yet
            file_id = ""
        where = (
            f"https://colab.research.google.com/drive/{file_id}"
            if file_id
            else f"File > Open notebook > Google Drive > {nb.relative_to(Path(folder).parent)}"
        )
        out.append((nb.stem, where))
        show(f"{nb.stem:<26} {where}")
    if not nbs:
        show(f"no notebooks in {Path(folder) / 'notebooks'}")
    return out


def colab_main(argv=None) -> int:
    """``python -m course colab [--repo OWNER/NAME] [--branch B] [--write]``"""
    ap = argparse.ArgumentParser(
        prog="python -m course colab",
        description="Print the README's 'Open in Colab' link (to "
        f"{COLAB_START}, which writes the student copies "
        "into Google Drive); with --write, set every "
        "notebook's Colab cell and write that notebook.",
    )
    ap.add_argument("--repo", default=REPOSITORY, help=f"OWNER/NAME (default {REPOSITORY})")
    ap.add_argument("--branch", default=BRANCH)
    ap.add_argument(
        "--write",
        action="store_true",
        help="rewrite the first code cell of notebooks/*.ipynb for this repo",
    )
    opts = ap.parse_args(argv)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", opts.repo):
        print(f"colab: --repo must be OWNER/NAME, not {opts.repo!r}", file=sys.stderr)
        return 2
    notebooks = sorted(path("notebooks").glob("*.ipynb"))
    if opts.write:
        cell = colab_cell(opts.repo, opts.branch)
        changed = [p.name for p in notebooks if set_colab_cell(p, cell)]
        start = path("notebooks").parent / COLAB_START
        start.parent.mkdir(parents=True, exist_ok=True)
        nbk.save(colab_start_notebook(opts.repo, opts.branch), start)
        print(
            f"Colab cell set in {len(changed)} notebook(s); {COLAB_START} written", file=sys.stderr
        )
    print(colab_table(notebooks, opts.repo, opts.branch))
    return 0
