"""Checks and grading: ``course.check`` (check.py), its report (report.py), local
progress (progress.py), hidden cases (hidden.py)."""
from .check import check
from .progress import progress

__all__ = ["check", "progress"]
