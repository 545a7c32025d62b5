"""Where the course runs: a laptop, a class's JupyterHub (perhaps on a MIG slice), Colab.

- :func:`place` names the host for the banner: Google Colab, JupyterHub, or nothing.
- A MIG slice of an H100 is a smaller GPU (2g.20gb: 32 SMs, ~20 GiB).  The driver hands the
  course the slice itself, so the SM count and memory that :mod:`runtime` reads are the
  slice's; :func:`mig_profile` names it and :func:`lecture_fits` picks the sizes: the
  lecture sizes where :data:`LECTURE_NEEDS_GIB` fits, the small sizes otherwise
  (``COURSE_SIZE=lecture`` forces them).
- Google Colab: every notebook opens with :data:`COLAB_CELL`, which installs the course from
  its repository there (and nowhere else) and turns on ipywidgets 8; the course then reads
  its data from the installed package (:mod:`course.platform.resources`), not from the repository's
  folders.  A Colab link opens :data:`COLAB_START`, never a lesson notebook (those hold the
  solutions): it writes the student copies into the student's Google Drive.  ``python -m
  course colab`` prints the README's "Open in Colab" link, and with ``--repo OWNER/NAME
  --write`` points a fork's notebooks and start notebook at the fork.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# The repository the Colab cell installs from and the README's Colab links open.
REPOSITORY = "numba-course/numba-cuda-course"
BRANCH = "main"

# GPU memory the lecture sizes need: the largest peak of any notebook at lecture sizes on
# an H100 (lesson 06, 12.9 GiB: the faces, their copies and the peers' pools; see
# assets/benchmarks/notebook-memory-*.md), plus 1 GiB of headroom.  An H100 MIG 2g.20gb
# slice holds it; a 1g.10gb slice runs every lesson at the small sizes.
LECTURE_NEEDS_GIB = 14.0
# Notebooks newer than the last measured report, with the arithmetic that bounds their need
# until a GPU run measures them (python -m course.bench.notebook_memory).
NOT_YET_MEASURED_GIB: dict[str, tuple[float, str]] = {}  # all 13 measured (2026-11-25)


def on_colab() -> bool:
    """True inside Google Colab (its module is loaded, or its runtime's variable is set)."""
    return "google.colab" in sys.modules or bool(os.environ.get("COLAB_RELEASE_TAG"))


def on_jupyterhub() -> bool:
    """True in a single-user server started by JupyterHub."""
    return bool(os.environ.get("JUPYTERHUB_USER") or os.environ.get("JUPYTERHUB_API_URL"))


def place() -> str:
    """'Google Colab', 'JupyterHub' or '' (a laptop, a workstation, CI)."""
    return "Google Colab" if on_colab() else "JupyterHub" if on_jupyterhub() else ""


def mig_profile(name: str) -> str:
    """'NVIDIA H100 80GB HBM3 MIG 1g.10gb' -> '1g.10gb'; '' for a whole GPU."""
    m = re.search(r"\bMIG\s+(\d+g\.\d+gb(?:\+\w+)?)", str(name or ""), re.I)
    return m.group(1) if m else ""


def lecture_fits(memory_gib: float) -> bool:
    """Do the lecture sizes fit a GPU with ``memory_gib``? (0 = unknown: assume they do)."""
    return not memory_gib or memory_gib >= LECTURE_NEEDS_GIB


def sizes_note(memory_gib: float) -> str:
    """Why the sizes are small on a GPU of ``memory_gib`` ('' when they are the lecture's)."""
    if os.environ.get("COURSE_SIZE", "").strip() or lecture_fits(memory_gib):
        return ""
    return (
        f" (this GPU has {memory_gib:.1f} GiB, the lecture sizes need "
        f"{LECTURE_NEEDS_GIB:g} GiB: small sizes; COURSE_SIZE=lecture forces them)"
    )


# ---------------------------------------------------------------------------------------
# Google Colab


def requirement(repo: str = REPOSITORY, branch: str = BRANCH) -> str:
    """What pip installs on Colab: the course at ``repo``'s ``branch``, with its pins
    (numba-cuda[cu12] brings NVVM/NVRTC for Colab's CUDA 12 driver; numpy < 2.5)."""
    return f"course @ git+https://github.com/{repo}@{branch}"


def colab_cell(repo: str = REPOSITORY, branch: str = BRANCH) -> str:
    """The first code cell of every notebook (it does nothing outside Colab)."""
    return (
        "# On Google Colab only (elsewhere this cell does nothing): install the course, about\n"
        "# a minute, and turn on ipywidgets 8. Then run the notebook from the next cell on.\n"
        "import sys\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q",\n'
        f'                    "{requirement(repo, branch)}"], check=True)\n'
        "    from google.colab import output\n"
        "    output.enable_custom_widget_manager()"
    )


COLAB_CELL = colab_cell()


def colab_url(
    notebook: str, repo: str = REPOSITORY, branch: str = BRANCH, folder: str = "notebooks"
) -> str:
    return f"https://colab.research.google.com/github/{repo}/blob/{branch}/{folder}/{notebook}"


# The one notebook a Colab link opens: it holds no exercise, installs the course and writes
# the *student* copies into the student's Google Drive (``course.grading.classroom.distribute``).  A
# link to ``notebooks/NN.ipynb`` would open the instructor's notebook, solutions included.
COLAB_START = "colab/open_course.ipynb"


def colab_table(notebooks, repo: str = REPOSITORY, branch: str = BRANCH) -> str:
    """The README's Colab link: the start notebook, which writes the student copy of every
    lesson in ``notebooks`` into Google Drive (never a link to a lesson notebook itself)."""
    folder, name = COLAB_START.rsplit("/", 1)
    stems = [Path(nb).stem for nb in notebooks]
    return (
        f"[Open the course in Colab]({colab_url(name, repo, branch, folder)}): writes "
        f"your own student copies of the {len(stems)} lessons "
        f"(`{stems[0]}` ... `{stems[-1]}`) into your Google Drive, "
        "`MyDrive/numba-course/notebooks/`, and links each one."
    )
