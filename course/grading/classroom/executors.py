"""Where ``python -m course grade`` runs its submissions: here, or on a Dask cluster.

Every submission is graded by ``batch.grade_one`` - the grader's half in one process,
the student's cells in an isolated worker subprocess it starts (``session.py``).  This
module only decides *which machine* runs that for each submission:

- ``--executor local`` (default): ``--jobs N`` threads here, each waiting on its own
  subprocess, as before.
- ``--executor dask``: each submission is one task on a Dask distributed cluster
  (``--scheduler tcp://HOST:PORT``; without an address, ``--jobs`` worker processes on
  this machine, spread over its GPUs: ``dask_workers.py``).  Before the first submission
  every worker makes its sandbox and measures its GPU, all at once (``dask_workers.ready``).
  The task carries the notebook's bytes and the grading
  plans, so workers need the course installed (the same version) but no shared disk; they
  grade with the hidden cases of their own instructor folder (``COURSE_INSTRUCTOR_DIR`` or
  ``COURSE_HIDDEN_DIR`` on the worker).  Those must be the grader's: before any task, every
  worker's hidden files (and private seed) are compared with the grader's by digest, and a
  worker with none (a wheel holds none) or other ones stops the run with one sentence and
  a non-zero exit, nothing graded - never the public cases only, silently.  A worker that
  joins later is checked by each task it runs (:func:`checked`).
  A task lost with its worker (or failing for any reason outside the grading, which never
  raises) is submitted once more; a second loss gives the submission an ``error`` row with
  the reason.  No submission is ever dropped.

Either way each row is handed to ``on_row`` as soon as it is done; ``batch.main`` appends it
to the CSV at once (:class:`CsvStream`) and rewrites the file whole at the end.
"""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING

from . import csvsafe

if TYPE_CHECKING:
    from .intake import Submission


# ---------------------------------------------------------------------------------------
# the task: one submission, shipped as bytes


def payload(sub) -> dict:
    """What a remote task needs of a submission (an ``intake.Submission``, read once
    already): its names and its bytes (read again: ``intake.reload``)."""
    from .intake import forget, reload

    was_held = sub.data is not None
    reload(sub)
    item = {
        "rel": sub.rel,
        "folder": sub.folder,
        "student": sub.student,
        "lesson": sub.lesson,
        "data": sub.data,
        "problem": sub.problem,
        "path": str(sub.path),
    }
    if not was_held:  # read for this payload only: the grader does not keep it
        forget(sub)
    return item


WINDOW_PER_WORKER = 2  # payloads in flight per Dask worker: the client's memory is bounded


def window(workers: int) -> int:
    """How many submissions ``run_dask`` keeps submitted at once (their bytes held here)."""
    return WINDOW_PER_WORKER * max(1, workers)


# ---------------------------------------------------------------------------------------
# the hidden cases a worker grades with must be the grader's


class HiddenCasesDiffer(RuntimeError):
    """A Dask worker would grade with hidden cases other than the grader's (or none)."""


def hidden_digest() -> dict:
    """What identifies this process's hidden cases: a digest of every file of its hidden
    folder (cases, answer keys, ``_seed.py``), their count and where they are."""
    from .. import hidden

    folder = hidden.hidden_dir()
    files = sorted(folder.glob("*.py")) if folder else []
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return {
        "digest": h.hexdigest() if files else None,
        "files": len(files),
        "where": str(folder) if folder else None,
    }


def hidden_problem(expected: dict) -> str | None:
    """Run on a worker: why it must not grade (its hidden cases are not ``expected``, the
    grader's), or None."""
    import socket

    mine = hidden_digest()
    if mine["digest"] == expected["digest"]:
        return None
    host = socket.gethostname()
    fix = (
        "start every worker with COURSE_INSTRUCTOR_DIR naming a copy of the instructor "
        f"folder this grader reads (its hidden cases: {expected['where'] or 'none'}), e.g. "
        "COURSE_INSTRUCTOR_DIR=~/private-course dask worker tcp://HOST:8786 --nthreads 1"
    )
    if mine["digest"] is None:
        env = (
            "unset"
            if not os.environ.get("COURSE_INSTRUCTOR_DIR")
            else "a folder without instructor/hidden/"
        )
        return (
            f"the Dask worker on {host} has no hidden cases (COURSE_INSTRUCTOR_DIR is "
            f"{env} there, and the installed course holds none), so it would grade the "
            f"public cases only: {fix}"
        )
    if expected["digest"] is None:
        return (
            f"the Dask worker on {host} has hidden cases ({mine['files']} files in "
            f"{mine['where']}) and this grader has none: {fix}"
        )
    return (
        f"the Dask worker on {host} has other hidden cases than this grader "
        f"({mine['files']} files in {mine['where']} there, {expected['files']} files "
        f"in {expected['where']} here): {fix}"
    )


def checked(expected: dict, task, item, *args):
    """Run on a worker: ``task(item, *args)`` once the worker's hidden cases are known to
    be the grader's (a worker that joined after the run started was not asked before)."""
    problem = hidden_problem(expected)
    if problem:
        raise HiddenCasesDiffer(problem)
    return task(item, *args)


# ---------------------------------------------------------------------------------------
# executors


def run_local(files: list[Submission], grade, jobs: int, on_row) -> list:
    """``grade(path)`` for every file on ``jobs`` threads; rows in the order they finish."""
    rows = []
    pool = ThreadPoolExecutor(max(1, jobs))
    try:
        for fut in as_completed([pool.submit(grade, f) for f in files]):
            rows.append(fut.result())
            on_row(rows[-1])
    except BaseException:  # interrupted: what runs is stopped by the caller, not awaited
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return rows


def run_dask(
    files: list[Submission],
    task,
    args: tuple,
    on_row,
    failed_row,
    scheduler=None,
    workers: int = 2,
    retries: int = 1,
    log=print,
    gpus: int | None = None,
    ready=None,
) -> list:
    """``task(payload(f), *args)`` on a Dask cluster for every file; see the module doc.

    ``failed_row(path, reason)`` makes the row of a submission lost ``retries + 1`` times.
    ``gpus``: the GPUs this machine's cluster spreads its workers over (None: all;
    ``dask_workers.local_cluster``).  ``ready``: ``(function, args)`` run once on every
    worker before any submission (``dask_workers.ready``), all workers at once.
    """
    try:
        import dask
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise SystemExit(
            "grade: --executor dask needs Dask distributed: "
            "pip install 'distributed>=2024.8' (or the course's [class] extra)"
        ) from None
    cluster = None
    # A worker that dies takes its task with it: let the scheduler give up at once
    # (allowed-failures 0) and retry here, where the count is ours and every row is kept.
    # worker-saturation 1.0: a worker holds only the task it runs, so a death never takes
    # an innocent queued submission along (an external scheduler's own settings apply).
    with dask.config.set(
        {
            "distributed.scheduler.allowed-failures": 0,
            "distributed.scheduler.worker-saturation": 1.0,
        }
    ):
        from .prepare import Clock

        clock = Clock()  # the start-up table's steps
        if scheduler is None:
            from .dask_workers import local_cluster

            cluster = local_cluster(workers, gpus, log)
    rows: list = []
    expected = hidden_digest()
    client = None
    try:
        client = Client(scheduler or cluster)
        if scheduler is None:
            client.wait_for_workers(max(1, workers), timeout=WORKERS_WAIT_S)
        clock.lap("Dask cluster started")
        log(f"dask: scheduler {client.scheduler.address}, {len(client.nthreads())} worker(s)")
        problems = sorted({p for p in client.run(hidden_problem, expected).values() if p})
        if problems:  # before any task: nothing is graded
            raise SystemExit(
                "grade: "
                + problems[0]
                + (f" ({len(problems) - 1} more worker(s) likewise)" if len(problems) > 1 else "")
                + "; nothing was graded"
            )
        if ready is not None:
            warm_workers(client, ready, log)
        pending = {}  # future -> (submission, its payload, tries so far)
        todo = iter(files)
        seq = dask_completed()

        def submit_next() -> None:
            """The next submission's payload, read now: at most ``window`` are held."""
            f = next(todo, None)
            if f is not None:
                item = payload(f)
                fut = client.submit(checked, expected, task, item, *args, pure=False)
                pending[fut] = (f, item, 0)
                seq.add(fut)

        seen = len(client.nthreads())  # every worker (scheduler_info lists a few at most)
        for _ in range(window(max(workers, seen))):
            submit_next()
        for fut in seq:
            f, item, tries = pending.pop(fut)
            try:
                row = fut.result()
            except HiddenCasesDiffer as exc:  # a worker that joined late: stop the run
                client.cancel(list(pending))
                raise SystemExit(
                    f"grade: {exc}; the run stopped (the {len(rows)} row(s) "
                    "graded before it are in the CSV)"
                ) from None
            except Exception as exc:  # noqa: BLE001 - a lost worker, or a task that broke
                reason = f"{type(exc).__name__}: {exc}"
                if tries < retries:
                    log(
                        f"  {f.rel}: its worker was lost or the task failed "
                        f"({reason}); trying once more"
                    )
                    again = client.submit(checked, expected, task, item, *args, pure=False)
                    pending[again] = (f, item, tries + 1)
                    seq.add(again)
                    continue
                row = failed_row(
                    f,
                    f"grading failed {tries + 1} times on the cluster "
                    f"({reason}); grade this submission again",
                )
            rows.append(row)
            on_row(row)
            submit_next()  # one done, the next read: never more than the window in flight
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return rows


WORKERS_WAIT_S = 120.0  # how long this machine's cluster may take to start its workers


READY_WAIT_S = 600.0  # how long the workers may take to get ready, all together


def warm_workers(client, ready, log) -> None:
    """``ready`` (function, args) once on every worker, all at once, before any submission:
    a worker that cannot build its sandbox stops the run (nothing graded); one that fails
    otherwise, or is not ready in time, is retired (a broken worker would take its share of
    the class and fail it) - unless no worker got ready, which stops the run."""
    from .dask_workers import SandboxMissing
    from .prepare import Clock

    t, clock = time.perf_counter(), Clock()
    fn, args = ready
    futs = {
        addr: client.submit(fn, *args, workers=[addr], allow_other_workers=False, pure=False)
        for addr in client.nthreads()
    }
    done, broken = [], []
    deadline = time.monotonic() + READY_WAIT_S
    for addr, fut in futs.items():
        try:
            done.append(fut.result(timeout=max(1.0, deadline - time.monotonic())))
        except SandboxMissing as exc:
            raise SystemExit(f"grade: {exc}; nothing was graded") from None
        except Exception as exc:  # noqa: BLE001 - that worker grades nothing
            broken.append(addr)
            log(f"dask: worker {addr} could not get ready ({type(exc).__name__}: {exc})")
    if not done:
        raise SystemExit("grade: no Dask worker got ready; nothing was graded")
    if broken:
        client.cancel([futs[a] for a in broken])
        client.retire_workers(broken, close_workers=True)
        log(f"dask: {len(broken)} worker(s) retired: they grade nothing")
    clock.lap("Dask workers ready (sandboxes warm, GPU figures)")
    on = sorted({str(d["device"]) for d in done if d.get("device") is not None})
    log(
        f"dask: {len(done)} of {len(futs)} worker(s) ready in {time.perf_counter() - t:.1f} s"
        + (f" (GPUs {', '.join(on)})" if on else "")
    )


# ---------------------------------------------------------------------------------------
# rows into the CSV as they come


class CsvStream:
    """Appends each graded submission to the CSV as it finishes (one row per notebook);
    ``batch.main`` then rewrites the file whole, one row per student (``write_csv``)."""

    def __init__(self, path: Path, exercises: list[str]):
        self.path, self.exercises = Path(path), list(exercises)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", newline="", encoding="utf-8") as f:
            csvsafe.writer(f).writerow(header(self.exercises))

    def add(self, g) -> None:
        with open(self.path, "a", newline="", encoding="utf-8") as f:
            csvsafe.writer(f).writerow(line(g, self.exercises))
            f.flush()
            os.fsync(f.fileno())


def header(exercises: list[str]) -> list[str]:
    return [
        "student",
        "submission",
        "lesson",
        "mode",
        "status",
        *exercises,
        "total",
        "max",
        "reasons",
    ]


def line(g, exercises: list[str]) -> list[str]:
    return [
        g.student,
        g.submission,
        g.lesson,
        g.mode,
        g.status,
        *[f"{g.points[e]:g}" if e in g.points else "" for e in exercises],
        f"{g.total:g}",
        f"{g.possible:g}",
        csvsafe.reasons_field(g.reasons),
    ]
