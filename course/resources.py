"""Where the course's own files are: a checkout, or an installed wheel.

In a git checkout the notebooks, the faces, the hidden cases and the committed profiles sit
beside ``course/`` (``notebooks/``, ``data/``, ``instructor/``, ``assets/``).  A wheel has
no checkout around it, so ``setup.py`` copies the same folders into the package, under
``course/_files/`` (see :data:`SHIPPED`); everything that reads them asks :data:`ROOT`, which
is the checkout when there is one and the package's copy otherwise.  So ``pip install
course-*.whl`` (a JupyterHub image, Google Colab, a student's laptop) finds its data through
the package, never through a path relative to where a notebook happens to be.

``python -m course notebooks --to DIR`` copies the notebooks (and the figures they show)
out of the package into a folder a student can open.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
IMPORT_ROOT = PACKAGE.parent        # what goes on a subprocess's PYTHONPATH
SHIPPED = PACKAGE / "_files"

# The folders a wheel carries (relative to the checkout), and which files of each.
# assets/*.png are the figures the notebooks show; assets/profiles, what lesson 10 reads.
CARRIED = {
    "notebooks": ["*.ipynb"],
    "data/faces": ["*.npy", "README.md"],
    "instructor": ["README.md"],
    "instructor/hidden": ["*.py"],
    "assets": ["*.png"],
    "assets/profiles": ["*.json"],
}


def _is_checkout(root: Path) -> bool:
    return (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir() \
        and (root / "data" / "faces").is_dir()


ROOT = IMPORT_ROOT if _is_checkout(IMPORT_ROOT) else SHIPPED
INSTALLED = ROOT == SHIPPED      # True in a wheel install


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


def copy_notebooks(dest: Path, force: bool = False, student: bool = False) -> list[Path]:
    """Copy the lessons (and the figures they link to, ``../assets``) into ``dest``.

    Existing files are kept unless ``force``: a student's work is never overwritten.
    ``student=True`` writes student copies (solutions removed), as ``release`` does.
    """
    dest = Path(dest)
    (dest / "notebooks").mkdir(parents=True, exist_ok=True)
    (dest / "assets").mkdir(parents=True, exist_ok=True)
    written = []
    sources = sorted(path("notebooks").glob("*.ipynb"))
    if not sources:
        raise FileNotFoundError(f"no notebooks found in {path('notebooks')}")
    if student:
        from .grading import notebook as nbk
        from .grading.release import student_notebook

    for src in sources:
        target = dest / "notebooks" / src.name
        if target.exists() and not force:
            continue
        if student:
            nbk.save(student_notebook(nbk.load(src), src.stem), target)
        else:
            shutil.copyfile(src, target)
        written.append(target)
    for fig in sorted(path("assets").glob("*.png")):
        target = dest / "assets" / fig.name
        if force or not target.exists():
            shutil.copyfile(fig, target)
    return written


def main(argv=None) -> int:
    """``python -m course notebooks --to DIR [--student] [--force]``"""
    ap = argparse.ArgumentParser(
        prog="python -m course notebooks",
        description="Copy the course's notebooks (from this checkout or the installed "
                    "package) into a folder to open with Jupyter.")
    ap.add_argument("--to", type=Path, required=True, help="folder to write (created)")
    ap.add_argument("--student", action="store_true",
                    help="student copies: solutions replaced by '# YOUR CODE HERE'")
    ap.add_argument("--force", action="store_true", help="overwrite notebooks already there")
    opts = ap.parse_args(argv)
    try:
        written = copy_notebooks(opts.to, force=opts.force, student=opts.student)
    except (OSError, FileNotFoundError) as exc:
        print(f"notebooks: {exc}", file=sys.stderr)
        return 2
    kept = len(list((opts.to / "notebooks").glob("*.ipynb"))) - len(written)
    print(f"{len(written)} notebook(s) written to {opts.to / 'notebooks'}"
          + (f", {kept} already there kept (use --force to overwrite)" if kept else "")
          + f"; open them with: jupyter lab {opts.to / 'notebooks'}")
    return 0
