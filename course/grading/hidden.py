"""Hidden cases: extra cases only the grader runs, kept outside the student distribution.

The instructor's material lives in an *instructor folder* laid out like the checkout:
``notebooks/`` (the instructor notebooks, solutions included) and ``instructor/hidden/``.
It is the checkout itself, or the folder named by ``--instructor DIR`` (``grade``,
``release``, ``checktimes``; :func:`use_instructor` sets ``$COURSE_INSTRUCTOR_DIR``), so a
course can keep private cases, keys and seed in a copy of its own.  ``$COURSE_HIDDEN_DIR``
names the hidden folder alone (Gradescope's bundle).  No wheel carries any of it.

One file per exercise, ``<exercise>.py``, defining ``cases(exercise) -> list[Case]`` (or, for
a predict exercise, its answer key ``answers(exercise) -> dict``) and optionally ``POINTS``
(what the exercise is worth in ``python -m course grade``; default 1).  An optional
``_seed.py`` holding ``SEED = <integer>`` is the course's private seed: it is mixed into the
inputs of every hidden case (:func:`case_rng`), so a student who knows the hidden files of
the public repository and the seed printed in their feedback still cannot replay them.

Students do not have that folder, yet their check report must say that more cases run at
grading.  So which exercises *have* hidden cases is public: :data:`ANNOUNCED` below (or
``declares_hidden_cases = True`` on an exercise class).  ``release --check`` fails when a
hidden file exists for an exercise that is not announced.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .. import lessons
from ..platform.resources import ROOT as REPO

# Exercises graded with hidden cases (names only: the cases themselves stay private), as
# the lesson index (course/lessons.py) names them for each lesson.
ANNOUNCED = lessons.hidden_exercises()
# Predict exercises have no hidden cases (a hidden case cannot ask a question the student
# never saw); their hidden file holds the answer key instead: ``answers(exercise) -> dict``.


class InstructorFolderError(Exception):
    """An instructor folder that is not one (the message says what is missing)."""


def instructor_root() -> Path:
    """The instructor folder: ``$COURSE_INSTRUCTOR_DIR``, else the checkout (or, in a wheel
    install, the package's copy, which holds student notebooks and no hidden cases)."""
    env = os.environ.get("COURSE_INSTRUCTOR_DIR")
    return Path(env) if env else REPO


def use_instructor(folder) -> Path:
    """Read the instructor's material from ``folder`` from now on (this process and the
    processes it starts); raises InstructorFolderError when it has no ``notebooks/``."""
    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        raise InstructorFolderError(f"--instructor {folder}: no such folder")
    if not (folder / "notebooks").is_dir():
        raise InstructorFolderError(
            f"--instructor {folder}: it has no notebooks/ folder (an instructor folder is "
            "laid out like the checkout: notebooks/ with the solution notebooks, "
            "instructor/hidden/ with the hidden cases)"
        )
    os.environ["COURSE_INSTRUCTOR_DIR"] = str(folder)
    _LOADED.clear()
    return folder


def notebooks_dir() -> Path:
    """The instructor notebooks (solutions included) of the instructor folder."""
    return instructor_root() / "notebooks"


def hidden_dir() -> Path | None:
    """The folder holding hidden cases, or None when there is none (a student's copy)."""
    env = os.environ.get("COURSE_HIDDEN_DIR")
    p = Path(env) if env else instructor_root() / "instructor" / "hidden"
    return p if p.is_dir() else None


def private_seed() -> int | None:
    """The course's private seed (``SEED`` in ``_seed.py`` of the hidden folder), or None."""
    mod = _module("_seed")
    seed = getattr(mod, "SEED", None) if mod is not None else None
    return None if seed is None else int(seed)


def case_rng(seed: int, i: int):
    """The inputs of hidden case ``i``: from the run's seed, ``i`` and the private seed."""
    import numpy as np

    salt = private_seed()
    return np.random.default_rng([seed, i] if salt is None else [seed, i, salt & (2**63 - 1)])


def file_for(name: str) -> Path | None:
    """The hidden-case file of exercise ``name``, or None."""
    d = hidden_dir()
    p = d / f"{name}.py" if d else None
    return p if p and p.exists() else None


def announced(exercise) -> bool:
    """True when students are told that ``exercise`` has hidden cases (no files needed)."""
    return exercise.name in ANNOUNCED or bool(getattr(exercise, "declares_hidden_cases", False))


_LOADED: dict = {}  # exercise -> its hidden module (or None): each file runs once


def preload(names) -> None:
    """Load the hidden files of ``names`` now: a grading run calls this before its first
    worker starts, so no file is read (let alone run) once student code is running."""
    for name in [*names, "_seed"]:
        _module(name)


def _module(name: str):
    if name in _LOADED:
        return _LOADED[name]
    path = file_for(name)
    mod = None
    if path is not None:
        spec = importlib.util.spec_from_file_location(f"_course_hidden_{name}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load the hidden cases file {path}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    _LOADED[name] = mod
    return mod


def cases_for(exercise) -> list:
    """The hidden cases of ``exercise`` (each marked hidden), or [] when there are none."""
    mod = _module(exercise.name)
    if mod is None or not hasattr(mod, "cases"):
        return []
    cases = list(mod.cases(exercise))
    for c in cases:
        c.hidden = True
    return cases


def answers_for(exercise) -> dict | None:
    """The answer key of a *predict* exercise (``answers(exercise)`` in its hidden file), or
    None where there is none (a student's copy): the package itself holds no key."""
    mod = _module(exercise.name)
    if mod is None or not hasattr(mod, "answers"):
        return None
    return dict(mod.answers(exercise))


def points_for(name: str) -> float:
    """What exercise ``name`` is worth when graded (``POINTS`` in its hidden file; 1)."""
    mod = _module(name)
    return float(getattr(mod, "POINTS", 1.0)) if mod is not None else 1.0


def has_hidden_cases(exercise) -> bool:
    """True when the grader runs more cases than ``exercise.cases()`` (the report says so).
    A predict exercise's hidden file is its answer key, not cases."""
    if exercise is None or getattr(exercise, "kind", "") == "predict":
        return False
    return announced(exercise) or file_for(exercise.name) is not None


def all_cases(exercise, include_hidden: bool) -> list:
    """The exercise's public cases, then (``include_hidden``) the instructor's hidden ones."""
    public = exercise.cases()
    return public + (cases_for(exercise) if include_hidden else [])
