"""What a grading run does before its first worker starts, in the grader's own process.

Everything a verdict depends on is settled here, while no student code runs anywhere:

1. every submission is read, one at a time, parsed (its cost bounded before parsing) and its
   lesson found (:func:`read_submission`), then dropped: only its size, digest, lesson and
   row key are kept (``intake.py``); each job reads it again when it starts, and drops it;
2. every hidden-case file of the lessons graded is loaded (``hidden.preload``): later checks
   use what is in memory and never open a path a worker could have written;
3. the sandbox is made and tried (``isolate.py``), with the submissions and outputs hidden
   from it, and the run's scratch folder under which every worker gets its own tmpfs;
4. on a GPU, the ceilings figures are divided by (copy bandwidth, FP32 rate) are measured
   once, with the GPU's measuring lock held, and kept in memory (no cache file is read).

With ``--executor dask`` steps 3's zygotes and 4 are the workers' (``dask_workers.ready``):
this process runs no submission and measures no GPU.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import time
from pathlib import Path

from ...platform import runtime
from .. import hidden
from ..judging.settings import GradeSettings
from . import intake
from . import notebook as nbk

log = logging.getLogger("course.grading")


def before_workers(opts, plans: dict) -> tuple[list, list[str], GradeSettings]:
    """(the submissions, read and keyed; the summary's lines so far; the run's settings,
    built once from ``grade``'s command line ``opts``)."""

    def survey(sub) -> None:  # what start-up needs of it; then its bytes go
        try:
            read_submission(sub, plans, opts.lesson)
        except Exception as exc:  # noqa: BLE001 - one notebook never stops the class's run
            log.exception("reading %s failed", sub.path)
            sub.notebook, sub.problem = (
                None,
                (
                    "the course could not read this notebook "
                    f"({type(exc).__name__}); the instructor has the details in the log"
                ),
            )
        intake.forget(sub)

    clock = Clock()
    remote = getattr(opts, "executor", "local") == "dask"  # its workers grade, not this process
    subs = intake.collect(opts.submissions, survey)
    summary = intake.keys(subs, lambda s: s.lesson, lambda s: intake.student_name(s.path, plans))
    hidden.preload(e for p in plans.values() for e in p.exercises)
    clock.lap("submissions read, hidden cases loaded")
    run_dir = Path(tempfile.mkdtemp(prefix="course-grade-run-"))
    atexit.register(shutil.rmtree, run_dir, True)
    isolation = None
    if opts.isolation_choice != "none":
        from ..wall.isolate import command_line_folders, for_grading

        isolation, said = for_grading(command_line_folders(opts), run_dir)
        print(said)
        # fail closed: only another machine's Dask workers (which refuse on their own) grade
        if isolation is None and not (remote and getattr(opts, "scheduler", None)):
            raise SystemExit("grade: nothing was graded (no sandbox on this machine: above)")
        if isolation is not None and not getattr(opts, "cold", False) and not remote:
            lessons = {s.lesson for s in subs}
            warm = len(subs) >= WARM_IMPORTS_FROM  # ~3 s of a zygote: worth it for a class
            warm_sandboxes(
                isolation, cell_imports({k: plans[k] for k in lessons & set(plans)}) if warm else ()
            )
    clock.lap("sandbox made and tried")
    starters = handed_in(subs, plans)
    if opts.seed is None:  # chosen here: it names the run's GPU figures (ceilings_once)
        import secrets

        opts.seed = secrets.randbits(31)
    # a Dask worker measures its own GPU (``dask_workers.ready``): nothing to measure here
    ceilings = None if remote else ceilings_once(runtime.MODE, starters, clock, run=opts.seed)
    settings = GradeSettings.from_args(opts, runtime.MODE, isolation, ceilings, starters)
    if settings.timeout <= settings.limit:
        print(
            f"note: --timeout {settings.timeout:g} s is not longer than one case's time "
            f"limit ({settings.limit:g} s, --case-time-limit): a kernel that never ends "
            "takes a submission's whole time, and its other exercises go ungraded"
        )
    return subs, summary, settings


def warm_sandboxes(isolation, imports: tuple, log=print) -> None:
    """Warm sandboxes (``forks.py``) for this run (or this Dask worker), their zygotes
    started now, side by side: they import (``imports`` too) while the grader measures the
    GPU."""
    from ..wall.child import child_env
    from ..wall.forks import KINDS, Forks
    from ..wall.gate import COMPILER_ENV

    isolation.forks = Forks(isolation, log=log, imports=imports)
    scratch = Path(isolation.scratch)
    isolation.forks.prestart(
        {KINDS[0]: child_env(scratch), KINDS[1]: child_env(scratch, COMPILER_ENV)}
    )


def cell_imports(plans: dict) -> tuple:
    """The modules the lessons' set-up cells import (``import m``, ``from m import n``: m
    and m.n), for the warm sandboxes to import once (``zygote.py``); the instructor's cells,
    never a submission's."""
    import ast

    names: set[str] = set()
    for plan in plans.values():
        for cell in getattr(plan, "setup", ()):
            lines = [ln for ln in cell.source.splitlines() if ln.lstrip()[:1] not in ("%", "!")]
            try:
                tree = ast.parse("\n".join(lines))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
                    names.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
    return tuple(sorted(n for n in names if all(p.isidentifier() for p in n.split("."))))


def handed_in(subs, plans: dict) -> set | None:
    """The exercises of the lessons ``subs`` hand in (None when one's lesson is unknown):
    the given kernels the run times before its workers start (:func:`ceilings_once`; a
    lesson-01 class need not wait for lesson 07's covariance starter)."""
    lessons = {s.lesson for s in subs}
    if None in lessons or not lessons <= set(plans):
        return None
    return {e for lesson in lessons for e in plans[lesson].exercises}


def read_submission(sub, plans: dict, lesson: str | None) -> None:
    """Parse the submission's notebook and find its lesson, once: ``sub.notebook`` (None
    with ``sub.problem`` saying why) and ``sub.lesson`` (None when nothing tells; ``lesson``:
    ``--lesson``).  What is settled already is kept: a Dask worker gets the bytes and the
    lesson, and parses there, once.  A submission forgotten since start-up
    (``intake.forget``) is read again first (``intake.reload``: the same bytes, or a
    problem)."""
    intake.reload(sub)
    if sub.data is not None and sub.notebook is None and not sub.problem:
        try:
            sub.notebook = nbk.loads(sub.data, sub.name)
        except nbk.NotebookError as exc:
            sub.problem = str(exc)
    if sub.lesson is None:
        sub.lesson = intake.find_lesson(sub.notebook, sub.path, plans, lesson)


class Clock:
    """Seconds of each start-up step, kept in :data:`STARTUP` (``grade --profile`` writes
    them, ``bench grading`` reports them)."""

    def __init__(self):
        self.t = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        STARTUP[step] = round(STARTUP.get(step, 0.0) + now - self.t, 3)
        self.t = now


WARM_IMPORTS_FROM = 6  # notebooks in a run from which its zygote imports the cells' modules
STARTUP: dict[str, float] = {}  # start-up step -> seconds, in this process
_MEASURED: dict = {}  # this process's GPU ceilings, measured once
CEILINGS_WAIT_S = 600  # how long the ceilings wait for the GPU's measuring lock


def ceilings_once(
    mode: str, exercises=None, clock: Clock | None = None, run: int | None = None
) -> dict | None:
    """This machine's GPU ceilings, measured once per process under the measuring lock
    (None in the simulator), and the given kernels of the tune exercises among
    ``exercises`` (None: every one) timed.  A Dask worker measures its own GPU: ceilings
    measured where the run started would belong to another device.

    ``run`` (the run's seed): the processes of one run on one GPU (a Dask worker per job
    slot) measure it once - the first measures and keeps the figures beside the GPU's lock
    files (:func:`_shared`), the others wait for it and read them."""
    if mode != "gpu":
        return None
    clock = clock or Clock()
    if "ceilings" not in _MEASURED:
        from ...platform.gpu_lock import device_lock

        wait = time.monotonic() + CEILINGS_WAIT_S
        with device_lock(run is not None, wait, purpose="ceilings"):
            _measure(exercises, clock, run)
    return _MEASURED["ceilings"]


def _measure(exercises, clock: Clock, run: int | None) -> None:
    from ...platform.gpu_lock import device_lock
    from ..judging import starter
    from ..wall.measurer import measure_ceilings

    kept = _shared(run).read() if run is not None else None
    if kept is not None:
        _MEASURED["ceilings"] = kept["ceilings"]
        starter.keep_timed(kept["starters"])
        clock.lap("GPU ceilings: from this GPU's first process of the run")
    else:
        with device_lock(deadline=time.monotonic() + CEILINGS_WAIT_S):
            _MEASURED["ceilings"] = measure_ceilings()
        clock.lap("GPU ceilings measured")
    c = _MEASURED["ceilings"]
    starters = starter.time_all(exercises)  # before any worker runs; kept ones not again
    clock.lap("given kernels timed")
    if run is not None:
        _shared(run).write(c, starter.timed_so_far())
    print(
        f"ceilings {'read' if kept else 'measured'} for this run: copy {c['copy_gbps']:.0f} "
        f"GB/s, FP32 {c['fp32_tflops']:.1f} TFLOP/s; given kernels timed: "
        + ", ".join(f"{k} {v:.4g} ms" for k, v in starters.items())
    )


class _shared:
    """One run's GPU figures on this GPU, in this user's lock folder (``gpu_lock.lock_dir``:
    mode 0700, invisible to every sandbox); written by a grading process, never by a child.
    Files of runs older than a day are removed when one is written."""

    def __init__(self, run: int):
        from ...platform.gpu_lock import lock_path

        base = lock_path()
        self.path = base.with_name(f"{base.stem}.run-{int(run)}.json")

    def read(self) -> dict | None:
        import json

        try:
            kept = json.loads(self.path.read_text())
            return kept if isinstance(kept, dict) and "ceilings" in kept else None
        except (OSError, ValueError):
            return None

    def write(self, ceilings: dict, starters: list) -> None:
        import json
        import os

        for old in self.path.parent.glob("gpu-*.run-*.json"):
            try:
                if time.time() - old.stat().st_mtime > 86400:
                    old.unlink()
            except OSError:
                pass
        try:
            text = json.dumps({"ceilings": ceilings, "starters": starters})
        except (TypeError, ValueError):
            return  # figures that are not plain data: each process measures its own
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, self.path)
