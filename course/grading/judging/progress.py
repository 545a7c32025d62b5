"""Local record of which checks passed, in which mode, and when: ``course.progress()``.

Kept per course copy: ``.course-progress.json`` beside the copy's notebooks (the folder a
notebook runs in, or its ``notebooks/``), so two copies of the course - a checkout and a
folder from ``python -m course notebooks`` - keep their own; where there is no copy
(Colab, a script elsewhere) ``~/.numba-course/progress.json``; ``$COURSE_PROGRESS_FILE``
overrides both.  No server.  Every write is a read-modify-write under an exclusive lock
(``fcntl.flock`` on ``<file>.lock``) through a temporary file of its own, renamed into
place (``os.replace``), so two notebooks checking at once lose no record and a crash never
leaves half a file.  A file that is not valid JSON is kept aside as
``<file>.corrupt-<time>`` with a one-line warning, never silently started over.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

fcntl: Any
try:
    import fcntl
except ImportError:  # Windows: no advisory locks; writes are still atomic
    fcntl = None

FILE_NAME = ".course-progress.json"


def _course_copy(folder: Path) -> Path | None:
    """The notebooks folder of the course copy ``folder`` is in (or holds), or None."""
    for d in (folder, folder / "notebooks"):
        if d.is_dir() and any(d.glob("[0-9][0-9]_*.ipynb")):
            return d
    return None


def path() -> Path:
    """Where progress is stored (see the module's docstring)."""
    env = os.environ.get("COURSE_PROGRESS_FILE")
    if env:
        return Path(env)
    try:
        here = _course_copy(Path.cwd())
    except OSError:
        here = None
    return here / FILE_NAME if here else Path.home() / ".numba-course" / "progress.json"


@contextlib.contextmanager
def _locked(p: Path):
    """Hold the exclusive lock of progress file ``p`` (a no-op where fcntl is missing)."""
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p.with_name(p.name + ".lock"), "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _read(p: Path) -> dict:
    """The records in ``p``; a corrupt file is renamed aside, with a one-line warning."""
    try:
        text = p.read_text()
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except ValueError:
        aside = p.with_name(f"{p.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        try:
            os.replace(p, aside)
            where = f"kept as {aside}"
        except OSError:
            where = "left in place"
        print(
            f"course.progress: {p} was not valid JSON ({where}); starting a new record",
            file=sys.stderr,
        )
        return {}


def load() -> dict:
    """{exercise: {"passed", "mode", "when", "cases", "ever_passed", "answered"}} (empty if
    none); "answered": a predict check in a copy with no key (recorded, not judged)."""
    p = path()
    if not p.exists():
        return {}
    try:
        with _locked(p):
            return _read(p)
    except OSError:
        return {}


def _write(p: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def record(result) -> None:
    """Store the latest result of a check (never fails the check if the disk is read-only)."""
    p = path()
    try:
        with _locked(p):
            data = _read(p)
            prev = data.get(result.exercise, {})
            data[result.exercise] = {
                "passed": bool(result.passed),
                "mode": result.mode,
                "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                "cases": f"{sum(c.passed for c in result.cases)}/{len(result.cases)}",
                "ever_passed": bool(result.passed) or prev.get("ever_passed", False),
                "answered": bool(getattr(result, "answered", False)),  # no key: not judged
            }
            _write(p, data)
    except OSError:
        pass


class Progress:
    """Every exercise of the course with its latest check (a table in a notebook)."""

    def __init__(self):
        from ...exercises import all_exercises

        self.data = load()
        self.exercises = all_exercises()

    def rows(self) -> list[tuple]:
        out = []
        for name, ex in sorted(self.exercises.items(), key=lambda kv: (kv[1].lesson, kv[0])):
            d = self.data.get(name)
            status = (
                "not tried"
                if d is None
                else "passed"
                if d["passed"]
                else "answered"
                if d.get("answered")
                else "failed"
            )
            out.append(
                (ex.lesson, name, status, d and d["mode"], d and d["cases"], d and d["when"])
            )
        return out

    @property
    def passed(self) -> int:
        return sum(1 for r in self.rows() if r[2] == "passed")

    @property
    def answered(self) -> int:
        """Predict exercises answered in a copy with no key (the grader scores them)."""
        return sum(1 for r in self.rows() if r[2] == "answered")

    def _summary(self) -> str:
        said = f"{self.passed}/{len(self.exercises)} exercises passed"
        return said + (f", {self.answered} answered for grading" if self.answered else "")

    def __repr__(self) -> str:
        lines = [f"Progress: {self._summary()} ({path()})"]
        for lesson, name, status, mode, cases, when in self.rows():
            extra = f"  {mode}, {cases} cases, {when}" if mode else ""
            lines.append(f"  {lesson:<22} {name:<26} {status:<9}{extra}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colors = {
            "passed": "#1a7f37",
            "failed": "#b42318",
            "answered": "#0b5cad",
            "not tried": "#777",
        }
        body = "".join(
            f"<tr><td>{html.escape(lesson)}</td><td><code>{html.escape(name)}</code></td>"
            f"<td style='color:{colors[status]}'><b>{status}</b></td><td>{mode or ''}</td>"
            f"<td>{cases or ''}</td><td>{when or ''}</td></tr>"
            for lesson, name, status, mode, cases, when in self.rows()
        )
        return (
            f"<div class='course-progress'><style>.course-progress td, .course-progress th "
            "{text-align:left !important}</style>"
            f"<b>Progress: {html.escape(self._summary())}</b>"
            "<table><tr><th>lesson</th><th>exercise</th><th>status</th><th>mode</th>"
            f"<th>cases</th><th>when</th></tr>{body}</table></div>"
        )


def progress() -> Progress:
    """Which checks passed, in which mode, when."""
    return Progress()


def main(argv=None) -> int:
    """``python -m course progress``"""
    print(progress())
    return 0
