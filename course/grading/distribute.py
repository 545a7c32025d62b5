"""Getting the notebooks to students: copies out of an installed package, and Colab cells.

``python -m course notebooks --to DIR [--student]`` copies the lessons (from the checkout or
an installed wheel, ``course/platform/resources.py``) into a folder a student can open;
``python -m course colab [--write]`` prints the README's Open-in-Colab table and sets every
notebook's first cell to the Colab install cell (``course/platform/hosting.py``).  Both
write notebooks, so they live here beside the notebook reader, not in the platform layer.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from ..platform.hosting import BRANCH, REPOSITORY, colab_cell, colab_table
from ..platform.resources import path
from . import notebook as nbk


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
        from .release import student_notebook

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


def notebooks_main(argv=None) -> int:
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
        nb["cells"].insert(first, {"cell_type": "code", "execution_count": None,
                                   "id": "colab-install", "metadata": {}, "outputs": [],
                                   "source": lines})
    nbk.save(nb, path)
    return True


def colab_main(argv=None) -> int:
    """``python -m course colab [--repo OWNER/NAME] [--branch B] [--write]``"""
    ap = argparse.ArgumentParser(prog="python -m course colab",
                                 description="Print the README's 'Open in Colab' table; with "
                                             "--write, set every notebook's Colab cell.")
    ap.add_argument("--repo", default=REPOSITORY, help=f"OWNER/NAME (default {REPOSITORY})")
    ap.add_argument("--branch", default=BRANCH)
    ap.add_argument("--write", action="store_true",
                    help="rewrite the first code cell of notebooks/*.ipynb for this repo")
    opts = ap.parse_args(argv)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", opts.repo):
        print(f"colab: --repo must be OWNER/NAME, not {opts.repo!r}", file=sys.stderr)
        return 2
    notebooks = sorted(path("notebooks").glob("*.ipynb"))
    if opts.write:
        cell = colab_cell(opts.repo, opts.branch)
        changed = [p.name for p in notebooks if set_colab_cell(p, cell)]
        print(f"Colab cell set in {len(changed)} notebook(s)", file=sys.stderr)
    print(colab_table(notebooks, opts.repo, opts.branch))
    return 0
