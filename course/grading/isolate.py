"""What the grading worker can see of the disk (Linux, best effort).

The verdict does not depend on this (see ``session.py``): it keeps *secrets* and *files*
out of reach.  Where ``unshare`` can make a private mount namespace (as root, or through an
unprivileged user namespace), the worker runs inside one in which
- the hidden-case folder is covered by an empty, read-only tmpfs: student code cannot read
  which hidden cases exist, let alone their code;
- the course, the instructor notebooks, the submissions and the output folders (CSV,
  feedback) are read-only: a cell cannot rewrite the grader, another student's notebook
  or the grades.
Elsewhere (macOS, Windows, containers that forbid namespaces) the grader says so once and
grades anyway; for a class, grade inside a container as instructor/README.md shows.
What no mount namespace stops: code that signals the grader's own process (it then ends
without a CSV: no points are forged, the run must be repeated).
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path


class Isolation:
    """Wraps the worker's command line in ``unshare`` + the mounts above."""

    def __init__(self, prefix: list[str], hide: list[Path], readonly: list[Path]):
        self.prefix, self.hide, self.readonly = prefix, hide, readonly

    def script(self) -> str:
        lines = ["set -e"]
        for p in self.readonly:      # first: a bind mount would cover the tmpfs below
            q = shlex.quote(str(p))
            lines.append(f"mount --bind {q} {q}")
            lines.append(f"mount -o remount,bind,ro {q} {q}")
        for p in self.hide:
            lines.append(f"mount -t tmpfs -o ro,size=4k,mode=0555 course-hidden {shlex.quote(str(p))}")
        lines.append('exec "$@"')
        return "; ".join(lines)

    def wrap(self, cmd: list[str]) -> list[str]:
        return [*self.prefix, "sh", "-c", self.script(), "course-worker", *cmd]

    def describe(self) -> str:
        return (f"worker isolation: private mount namespace; hidden cases covered "
                f"({len(self.hide)} folder(s)); {len(self.readonly)} folder(s) read-only")


_PREFIXES = (["unshare", "--mount", "--propagation", "private"],
             ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"])


def make(hide: list[Path], readonly: list[Path], keep_writable: Path) -> tuple[Isolation | None, str]:
    """An Isolation that works on this machine (tried once on a scratch folder), or None.

    Folders that contain ``keep_writable`` (the worker's scratch space) stay writable.
    """
    if os.name != "posix" or shutil.which("unshare") is None:
        return None, "worker isolation: none (no `unshare` on this system)"
    hide = _existing(hide)
    readonly = [p for p in _existing(readonly) if not _contains(p, keep_writable)]
    with tempfile.TemporaryDirectory() as t:
        probe_ro = Path(t) / "r"
        probe_hide = probe_ro / "h"      # inside a read-only folder, as instructor/hidden is
        probe_hide.mkdir(parents=True)
        (probe_hide / "secret").write_text("x")
        test = f"test ! -e {shlex.quote(str(probe_hide / 'secret'))} && ! touch {shlex.quote(str(probe_ro / 'f'))} 2>/dev/null"
        for prefix in _PREFIXES:
            probe = Isolation(prefix, [probe_hide], [probe_ro])
            try:
                r = subprocess.run(probe.wrap(["sh", "-c", test]), capture_output=True,
                                   timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if r.returncode == 0:
                iso = Isolation(prefix, hide, readonly)
                return iso, iso.describe()
    return None, ("worker isolation: none (this system does not allow a private mount "
                  "namespace); grading is still sound, but student code can read the "
                  "hidden-case files")


def for_grading(readonly: list) -> tuple[Isolation | None, str]:
    """The grading worker's namespace: hidden cases covered; the course (checkout or
    installed package) and the ``readonly`` folders read-only; the temp folder writable."""
    from ..resources import PACKAGE, ROOT
    from . import hidden

    return make(hide=[hidden.hidden_dir()], readonly=[ROOT, PACKAGE, *readonly],
                keep_writable=Path(tempfile.gettempdir()))


def _existing(paths) -> list[Path]:
    out = []
    for p in paths:
        if p is None:
            continue
        p = Path(p).resolve()
        if p.is_dir() and p not in out:
            out.append(p)
    return out


def _contains(folder: Path, path: Path) -> bool:
    try:
        Path(path).resolve().relative_to(folder)
        return True
    except ValueError:
        return False
