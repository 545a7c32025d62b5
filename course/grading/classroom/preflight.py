"""What stops ``python -m course grade`` before anything is graded: one sentence each.

A missing submission path, an instructor folder that is not one, student copies given as
the instructor notebooks, a ``--lesson`` that names no lesson (with the nearest name; a
lesson is named as every command names it, ``distribute.lesson_named``: ``01``, ``1``,
``vector_add`` or ``01_vector_add``).  The
grader exits 2 with the sentence instead of writing rows that say ``invalid``.
"""

from __future__ import annotations

from . import notebook as nbk


def arguments(opts) -> str | None:
    """The sentence that stops a run before anything is graded, or None: a submission path
    that does not exist, an instructor folder that is not one, student copies given as the
    instructor notebooks.  Sets ``opts.notebooks`` from the instructor folder."""
    from .. import hidden
    from . import student

    gpus = getattr(opts, "gpus", None)
    if gpus is not None and (
        gpus < 1 or getattr(opts, "executor", "local") != "dask" or getattr(opts, "scheduler", None)
    ):
        return (
            f"--gpus {gpus}: give 1 or more, with --executor dask and no --scheduler (the "
            "cluster this machine starts spreads its workers over that many GPUs; a "
            "scheduler's workers have their own); nothing was graded"
        )
    missing = [str(p) for p in opts.submissions if not p.exists()]
    if missing:
        return f"no such file or folder: {', '.join(missing)} (nothing was graded)"
    try:
        if opts.instructor:
            hidden.use_instructor(opts.instructor)
    except hidden.InstructorFolderError as exc:
        return str(exc)
    opts.notebooks = opts.notebooks or hidden.notebooks_dir()
    if not opts.notebooks.is_dir():
        return (
            f"no instructor notebooks: {opts.notebooks} does not exist (grade from a "
            "checkout of the course, or name the instructor folder with --instructor DIR)"
        )
    for p in sorted(opts.notebooks.glob("*.ipynb")):
        try:
            copy = student.is_student_copy(nbk.load(p))
        except nbk.NotebookError:
            continue
        if copy:
            return (
                f"{p} is a student copy (no solutions, no hidden cases): grade with the "
                "instructor's notebooks, from a checkout or with --instructor DIR"
            )
    if getattr(opts, "lesson", None):
        from .lesson_names import UnknownLesson, lesson_named

        stems = sorted(p.stem for p in opts.notebooks.glob("*.ipynb"))
        try:  # 01, 1, vector_add, 01_vector_add.ipynb -> 01_vector_add
            opts.lesson = lesson_named(opts.lesson, stems, "--lesson")
        except UnknownLesson as exc:
            return f"{exc} (nothing was graded)"
    return None


def lesson(lesson: str | None, plans: dict) -> str | None:
    """A sentence for a ``--lesson`` that names no lesson (with the nearest), or None."""
    if lesson is None or lesson in plans:
        return None
    import difflib

    near = difflib.get_close_matches(lesson, list(plans), n=1, cutoff=0.5)
    return (
        f"unknown lesson {lesson!r} given with --lesson"
        + (f" (did you mean {near[0]}?)" if near else "")
        + f"; the lessons with exercises are {', '.join(sorted(plans))}"
    )
