"""Shared test set-up: simulator unless a GPU is present, progress kept out of $HOME."""

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

# Keep the user's progress file and caches untouched by the tests.
_tmp = Path(tempfile.mkdtemp(prefix="course-tests-"))
os.environ.setdefault("COURSE_PROGRESS_FILE", str(_tmp / "progress.json"))
os.environ.setdefault("COURSE_CACHE_DIR", str(_tmp / "cache"))
os.environ.setdefault("MPLBACKEND", "Agg")

import course  # noqa: E402  - chooses gpu/sim before numba loads

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a real GPU (course.MODE == 'gpu')")
    for item in items:
        if "gpu" in item.keywords and course.MODE != "gpu":
            item.add_marker(skip_gpu)


def rejects(exercise: str, kernel, **options) -> bool:
    """True when course.check rejects ``kernel`` (a mutant must be rejected); the check stops
    at the first failed case (:func:`first_failure`), the verdict it would end with."""
    with first_failure():
        result = course.check(exercise, kernel, record=False, **options)
    return not result.passed


@contextlib.contextmanager
def first_failure():
    """course.check runs its cases only up to the first failed one (``cases.run_cases``'s
    ``first_failure``): a rejected mutant costs the simulator its first failing case."""
    import functools
    import importlib

    from course.grading.judging import cases

    check_mod = importlib.import_module("course.grading.judging.check")  # the module, not check()

    saved = check_mod.run_cases
    check_mod.run_cases = functools.partial(cases.run_cases, first_failure=True)
    try:
        yield
    finally:
        check_mod.run_cases = saved
