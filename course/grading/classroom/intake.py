"""Reading a class's submissions: checked at start-up, held only while being graded.

``python -m course grade`` reads every submitted notebook here twice, never keeping it:

- at start-up (:func:`collect`), one at a time, to find its lesson and its row key; then
  the bytes (and what was parsed of them) are dropped (:func:`forget`), and only their size
  and SHA-256 digest are kept;
- when its grading job starts (:func:`reload`): read again, and graded only if the bytes
  are the ones read at start-up (a file swapped between the two reads is ``invalid`` with
  a sentence, never graded as something else); dropped again when the job ends.

So the grader holds one notebook per running job, whatever the size of the class.  What is
read:

- regular files only: a symlink (say, to the instructor's notebook or ``/dev/zero``), a FIFO
  or a device is not opened for its contents; it becomes a row with the reason;
- inside the submission tree: the walk follows no symlinked folder;
- at most :data:`MAX_NOTEBOOK_MB` per notebook, read without blocking.  The course's
  notebooks with every output saved are 17 KB to 659 KB; 16 MB leaves room for a hundred
  saved plots (a PNG output is 30-100 KB), and bounds what a parse costs (the text decoded
  can take 4 bytes a character).  What one parse may cost beyond that is bounded in
  ``notebook.loads`` (a scan of the bytes before ``json.loads``).

Who a submission belongs to: the student's folder when submissions come in folders
(``alice/01_vector_add (1).ipynb`` is alice's whatever the file is called), else the name
in the file name (``alice_01_vector_add.ipynb``).  Two submissions of one lesson by one
student, or two students whose feedback files would share a name, are kept apart and
listed in the run's summary (:func:`keys`).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from . import notebook as nbk

MAX_NOTEBOOK_MB = 16
MAX_CELL_MB = 1


@dataclass
class Submission:
    """One submitted file as read: its bytes, or why it was not read."""

    path: Path  # as found (for messages only; never opened again)
    rel: str  # relative to the folder given on the command line
    folder: str  # the student's folder ("" for a file at the top)
    data: bytes | None = None
    problem: str = ""  # why ``data`` is None, or why it is not a notebook
    student: str = ""  # the row key, set by :func:`keys`
    lesson: str | None = None  # which lesson it answers (set by the grader)
    notebook: dict | None = None  # ``data`` parsed (``prepare.read_submission``)
    size: int = 0  # bytes read (kept when ``data`` is dropped)
    digest: str = ""  # SHA-256 of ``data`` (kept when ``data`` is dropped)

    @property
    def name(self) -> str:
        return self.path.name


def collect(paths: list[Path], each=None) -> list[Submission]:
    """Every ``.ipynb`` under ``paths`` (files or folders), read; ``each(sub)`` is called
    on each as soon as it is read (``prepare`` finds its lesson there and drops it), so
    no more than one is held at a time when ``each`` forgets it."""
    out: list[Submission] = []

    def add(sub: Submission) -> None:
        out.append(sub)
        if each is not None:
            each(sub)

    for root in paths:
        if root.is_dir() and not root.is_symlink():
            for d, dirs, files in os.walk(root, followlinks=False):
                dirs[:] = sorted(x for x in dirs if x != ".ipynb_checkpoints")
                for f in sorted(files):
                    if f.endswith(".ipynb"):
                        p = Path(d) / f
                        rel = p.relative_to(root)
                        folder = rel.parts[0] if len(rel.parts) > 1 else ""
                        add(read(p, rel.as_posix(), folder))
        else:
            add(read(root, root.name, ""))
    return out


def read(path: Path, rel: str, folder: str) -> Submission:
    """The file's bytes (regular file, not a link, bounded), or the reason it was refused."""
    sub = Submission(path, rel, folder)
    limit = MAX_NOTEBOOK_MB << 20
    try:
        st = os.lstat(path)
    except OSError as exc:
        sub.problem = f"cannot read {path.name}: {exc.strerror or exc}"
        return sub
    if stat.S_ISLNK(st.st_mode):
        sub.problem = f"{path.name} is a link, not a file: submit the notebook itself"
        return sub
    if not stat.S_ISREG(st.st_mode):
        sub.problem = f"{path.name} is not a regular file (a pipe or a device?)"
        return sub
    try:
        fd = os.open(
            path,
            os.O_RDONLY
            | getattr(os, "O_NOFOLLOW", 0)
            | getattr(os, "O_NONBLOCK", 0)
            | getattr(os, "O_NOCTTY", 0),
        )
    except OSError as exc:
        sub.problem = f"cannot read {path.name}: {exc.strerror or exc}"
        return sub
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the lstat
            sub.problem = f"{path.name} is not a regular file"
            return sub
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            sub.problem = f"notebook too large ({size / 2**20:.0f}+ MB; limit {MAX_NOTEBOOK_MB} MB)"
            return sub
        sub.data = b"".join(chunks)
        sub.size, sub.digest = len(sub.data), hashlib.sha256(sub.data).hexdigest()
    finally:
        os.close(fd)
    return sub


def forget(sub: Submission) -> None:
    """Drop the bytes and the parsed notebook; keep the size, digest, lesson and key.
    Only a submission :func:`reload` can read again forgets (one with a digest)."""
    if getattr(sub, "digest", ""):
        sub.data = sub.notebook = None


def reload(sub: Submission) -> None:
    """Read a forgotten submission again, when its grading job starts: ``sub.data`` as at
    start-up, or ``sub.problem`` saying why not (gone, or changed since)."""
    if sub.data is not None or sub.problem or not getattr(sub, "digest", ""):
        return  # held, refused, or never read from a file here (a Dask task's bytes)
    again = read(sub.path, sub.rel, sub.folder)
    if again.data is None:
        sub.problem = again.problem or f"cannot read {sub.name} again"
    elif again.digest != sub.digest:
        sub.problem = (
            f"{sub.name} changed while the class was being graded ({sub.size:,} bytes "
            f"at start, {again.size:,} now): it was not graded; grade it again"
        )
    else:
        sub.data = again.data


def keys(subs: list[Submission], lesson_of, name_of) -> list[str]:
    """Give every submission its row key; return the summary's lines about collisions.

    ``lesson_of(sub)``: its lesson (or None); ``name_of(sub)``: the student named by the
    file name alone (for files at the top of a folder given)."""
    summary: list[str] = []
    seen: dict = {}
    for sub in subs:
        base = sub.folder or name_of(sub)
        lesson = lesson_of(sub)
        student, n = base, 1
        while (student, lesson) in seen:
            n += 1
            student = f"{base}#{n}"
        if n > 1:
            summary.append(
                f"{base}: {n} submissions of {lesson or 'an unknown lesson'} "
                f"({seen[(base, lesson)]}, {sub.rel}): graded apart, as "
                f"{base} and {student}"
            )
        seen[(student, lesson)] = sub.rel
        sub.student = student
    return summary


def file_names(students: list[str]) -> tuple[dict, list[str]]:
    """student -> a feedback file name of its own (no two alike, even ignoring case)."""
    names, used, summary = {}, set(), []
    for s in dict.fromkeys(students):
        base = safe(s)
        name, n = base, 1
        while name.lower() in used:
            n += 1
            name = f"{base}-{n}"
        if n > 1:
            summary.append(f"feedback of {s!r} is {name}.md ({base}.md belongs to another student)")
        used.add(name.lower())
        names[s] = name
    return names, summary


def safe(name: str) -> str:
    """A file name for a student: letters, digits, ``-_.`` only; never hidden or empty."""
    out = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "student"
    return out[:100]


def student_name(path: Path, lessons) -> str:
    """alice_01_vector_add.ipynb -> alice; alice/01_vector_add.ipynb -> alice."""
    stem = path.stem
    for lesson in sorted(lessons, key=len, reverse=True):
        if lesson in stem:
            rest = re.sub(r"^[\W_]+|[\W_]+$", "", stem.replace(lesson, ""))
            return rest or path.parent.name or stem
    return stem


def find_lesson(nb: dict | None, path: Path, plans: dict, forced: str | None) -> str | None:
    """Which lesson a submission answers (None when nothing tells)."""
    if forced:
        return forced
    meta = (nb or {}).get("metadata", {})
    lesson = (
        meta.get("course", {}).get("lesson")
        if isinstance(meta, dict) and isinstance(meta.get("course"), dict)
        else None
    )
    if isinstance(lesson, str) and lesson in plans:  # metadata is the submission's: any type
        return lesson
    for name in sorted(plans, key=len, reverse=True):
        if name in path.name or name == path.parent.name:
            return name
    if nb is not None:
        checked = {ex for c in nbk.cells(nb) for ex, _ in nbk.check_calls(c.source)}
        hits = [name for name, p in plans.items() if checked & set(p.exercises)]
        if len(hits) == 1:
            return hits[0]
    return None
