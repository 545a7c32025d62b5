"""Where the course's own files are: a checkout, or an installed wheel.

In a git checkout the notebooks, the faces and the committed profiles sit beside
``course/`` (``notebooks/``, ``data/``, ``assets/``).  A wheel has no checkout around it, so
``setup.py`` copies them into the package, under ``course/_files/`` (see :data:`SHIPPED`):
the student distribution - each notebook as its student copy, and nothing of
``instructor/`` (solutions, hidden cases and keys stay in the instructor's checkout, see
``course/grading/hidden.py``).  Everything that reads them asks :data:`ROOT`, which is the
checkout when there is one and the package's copy otherwise.  So ``pip install
course-*.whl`` (a JupyterHub image, Google Colab, a student's laptop) finds its data through
the package, never through a path relative to where a notebook happens to be.

``python -m course notebooks --to DIR`` (``course/grading/classroom/distribute.py``) copies the
notebooks (and the figures they show) out of the package into a folder a student can open.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # course/ (this file is in course/platform/)
IMPORT_ROOT = PACKAGE.parent  # what goes on a subprocess's PYTHONPATH
SHIPPED = PACKAGE / "_files"

# The folders a wheel carries (relative to the checkout), and which files of each.
# notebooks: as student copies (setup.py); assets/*.png are the figures the notebooks show;
# assets/profiles, what lesson 10 reads; assets/sliders, the GPU's recorded slider grids a
# panel shows in simulator mode (``course/show/records.py``); assets/benchmarks/*.json, the GPU
# reports a timing table shows in simulator mode (``course/show/reported.py``).  Never
# instructor/.
CARRIED = {
    "notebooks": ["*.ipynb"],
    "data/faces": ["*.npy", "README.md"],
    "assets": ["*.png"],
    "assets/profiles": ["*.json"],
    "assets/sliders": ["*.json"],
    "assets/benchmarks": ["*.json"],
}


def _is_checkout(root: Path) -> bool:
    return (
        (root / "pyproject.toml").is_file()
        and (root / "notebooks").is_dir()
        and (root / "data" / "faces").is_dir()
    )


ROOT = IMPORT_ROOT if _is_checkout(IMPORT_ROOT) else SHIPPED
INSTALLED = ROOT == SHIPPED  # True in a wheel install


def path(*parts: str) -> Path:
    """A course file by its checkout-relative path, e.g. ``path("data", "faces")``."""
    return ROOT.joinpath(*parts)


def carried_files(checkout: Path):
    """(source, relative destination) for every file a wheel carries (used by setup.py)."""
    for folder, patterns in CARRIED.items():
        for pattern in patterns:
            for src in sorted((checkout / folder).glob(pattern)):
                if src.is_file():
                    yield src, Path(folder) / src.name
