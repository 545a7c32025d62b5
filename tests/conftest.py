"""Shared test set-up: simulator unless a GPU is present, progress kept out of $HOME."""

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


def rejects(exercise: str, kernel) -> bool:
    """True when course.check rejects ``kernel`` (a mutant must be rejected)."""
    result = course.check(exercise, kernel, record=False)
    return not result.passed
