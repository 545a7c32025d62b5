"""A class through the chosen executor, row by row, with its profile (``grade --profile``).

Each row goes into the CSV and a progress line the moment it is done, so a long run shows
and keeps its progress.  The phases of every submission (``phases.py``, timed by its judge)
are summed as rows come in; with ``--profile FILE`` the sums, the wall time and the rows
done are written there at the end - and also when the run is interrupted (Ctrl-C or
SIGTERM): then every sandbox still running is stopped, the profile says ``interrupted``,
and the grader exits with status 130.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from ..phases import Phases
from .graded import Graded
from .prepare import STARTUP


class Profile:
    """The class's phases summed, and what a report needs beside them."""

    def __init__(self, path: Path | None, students: int, opts):
        self.path, self.students, self.phases = path, students, Phases()
        self.jobs, self.executor = opts.jobs, opts.executor
        self.warm = not getattr(opts, "cold", False)
        self.done, self.t0 = 0, time.perf_counter()
        self.statuses: dict[str, int] = {}

    def add(self, g: Graded) -> None:
        self.done += 1
        self.statuses[g.status] = self.statuses.get(g.status, 0) + 1
        self.phases.merge(g.phases if isinstance(g.phases, dict) else {})

    def data(self, interrupted: bool = False) -> dict:
        return {
            "wall_s": round(time.perf_counter() - self.t0, 3),
            "students": self.students,
            "done": self.done,
            "statuses": self.statuses,
            "jobs": self.jobs,
            "executor": self.executor,
            "warm": self.warm,
            "interrupted": interrupted,
            "phases": self.phases.as_dict(),
            "startup": dict(STARTUP),  # seconds of each step before the first worker
        }

    def write(self, interrupted: bool = False) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.data(interrupted), indent=1))


def grade_all(files: list, plans: dict, opts, settings, grade_one) -> list[Graded]:
    """Every submission (``grade_one``: ``batch.grade_one``) through the chosen executor."""
    from . import executors

    lessons = {f.lesson for f in files}  # the CSV's columns, before the first row
    stream = executors.CsvStream(
        opts.out, [e for name, p in plans.items() if name in lessons for e in p.exercises]
    )
    profile = Profile(getattr(opts, "profile", None), len(files), opts)
    done = []

    def on_row(g: Graded) -> None:
        stream.add(g)
        done.append(g)
        profile.add(g)
        print(
            f"  [{len(done)}/{len(files)}] {g.student:<20} {g.total:g}/{g.possible:g}  {g.status}",
            flush=True,
        )

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM)
    if main:  # SIGTERM stops the run as Ctrl-C does
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        rows = _run(files, plans, opts, settings, grade_one, on_row)
    except KeyboardInterrupt:
        _stop(settings, interrupted=True)
        profile.write(interrupted=True)
        print(
            f"grade: interrupted after {len(done)} of {len(files)} notebook(s); their rows "
            f"are in {opts.out}" + (f", the profile in {profile.path}" if profile.path else ""),
            flush=True,
        )
        sys.stdout.flush()
        os._exit(130)  # the job threads still wait on stopped children: do not join them
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    _stop(settings)
    profile.write()
    return rows


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _stop(settings, interrupted: bool = False) -> None:
    from ..wall.child import stop_all

    stop_all(interrupted)
    forks = getattr(settings.isolation, "forks", None)
    if forks is not None:
        forks.close()


def _run(files, plans, opts, settings, grade_one, on_row) -> list[Graded]:
    from . import executors

    if opts.executor == "dask":

        def failed(sub, reason: str) -> Graded:
            g = Graded(sub.student, sub.name, status="error", seed=settings.seed)
            g.reasons.append(reason)
            return g

        from . import dask_workers

        remote = settings.here(None, None)  # each worker makes its own sandbox
        return executors.run_dask(
            files,
            dask_workers.grade_payload,
            (grade_one, plans, remote),
            on_row,
            failed,
            scheduler=opts.scheduler,
            workers=opts.jobs,
            gpus=getattr(opts, "gpus", None),
            ready=(dask_workers.ready, (plans, remote)),
        )
    return executors.run_local(files, lambda p: grade_one(p, plans, settings), opts.jobs, on_row)
