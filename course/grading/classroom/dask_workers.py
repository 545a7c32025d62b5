"""The Dask side of ``grade --executor dask``: the cluster this machine starts, and what each
worker does with a submission's bytes.

**The cluster** (no ``--scheduler``): ``--jobs`` worker processes spread over ``--gpus`` of
this machine's GPUs (default: every one it sees).  Worker *i* grades on GPU ``i % gpus``
(``CUDA_VISIBLE_DEVICES`` set for its process and so its sandboxes'; every GPU's device
node is still bound into a sandbox, so a cell that unsets it reaches the others) and runs
on that GPU's share of the cores: the cores this process may use, cut into one share per
GPU the machine has (its sandboxes' cgroups hold them there: ``cgroup.maker_cpus``; the
workers' sandboxes share this run's one memory and process budget: ``cgroup.OWNER_ENV``).
So one GPU graded on a two-GPU machine gets half the cores, what a one-GPU machine of the
same kind would have, and a class's rate on 2 GPUs is compared with 1 GPU's on equal terms
(``bench grading --gpus 1,2``).  In the simulator there is no GPU: the workers share every
core.

**A worker** (this machine's or another's): before the first submission, :func:`ready`
makes its sandbox with warm zygotes (``forks.py``) and measures its GPU's ceilings (the
first worker of a GPU measures, the others read it: ``prepare.ceilings_once``), every
worker at once; then :func:`grade_payload` grades each submission in that sandbox.

What crosses into this module: the grader's own options and plans, and a submission's bytes,
which only ever reach a sandbox.  Nothing a submission controls chooses a GPU or a core.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from ..wall.cgroup import OWNER_ENV

CPUS_ENV = "COURSE_GRADE_CPUS"  # the cores a worker of this machine's cluster runs on


class SandboxMissing(RuntimeError):
    """A Dask worker cannot build the grading sandbox the run asked for."""


def no_sandbox_message(said: str) -> str:
    import socket

    return (
        f"the Dask worker on {socket.gethostname()} cannot build the grading sandbox, "
        f"so it graded nothing ({said.split('(', 1)[-1].rstrip(').')[:200]}); fix that "
        "worker, or grade with --isolation none to accept student code running "
        "unsandboxed there"
    )


# ---------------------------------------------------------------------------------------
# the cluster: workers spread over this machine's GPUs, each GPU on its share of the cores


def layout(jobs: int, gpus: int, devices: list[str], cores: list[int]) -> list[dict]:
    """Each worker's GPU and cores: worker i on ``devices[i % gpus]``, on that device's
    share of ``cores`` (one contiguous share per entry of ``devices``, the machine's GPUs);
    ``gpus`` 0 (the simulator): no device, every core."""
    jobs = max(1, jobs)
    if gpus <= 0 or not devices:
        return [{"device": None, "cores": list(cores)} for _ in range(jobs)]
    gpus, n, m = min(gpus, len(devices)), len(cores), len(devices)
    shares = [cores[g * n // m : (g + 1) * n // m] or list(cores) for g in range(m)]
    return [{"device": devices[i % gpus], "cores": shares[i % gpus]} for i in range(jobs)]


def devices() -> list[str]:
    """This machine's GPUs as ``CUDA_VISIBLE_DEVICES`` entries: the ones it names where it
    is set, else ``0 .. count - 1`` (``runtime.gpu_count``: no CUDA context made)."""
    from ...platform import runtime

    if runtime.MODE != "gpu":
        return []
    count = runtime.gpu_count()  # what the driver sees of them (a wrong entry ends the list)
    named = os.environ.get("CUDA_VISIBLE_DEVICES")
    if named is not None and named.strip():
        return [d.strip() for d in named.split(",") if d.strip()][:count]
    return [str(i) for i in range(count)]


def local_cluster(jobs: int, gpus: int | None, log=print):
    """A Dask cluster of ``jobs`` one-thread worker processes on this machine, spread over
    ``gpus`` GPUs (None: all); see the module doc."""
    import logging

    from distributed import Nanny, Scheduler, SpecCluster

    seen = devices()
    use = len(seen) if gpus is None else max(0, min(gpus, len(seen)))
    if gpus is not None and gpus > len(seen):
        log(f"dask: --gpus {gpus} asked, this machine has {len(seen)}: grading on {use}")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    net = {"host": "127.0.0.1", "protocol": "tcp://"}
    workers = {}
    for i, w in enumerate(layout(jobs, use, seen, cores)):
        env = {CPUS_ENV: ",".join(map(str, w["cores"]))} if use else {}
        env[OWNER_ENV] = str(os.getpid())  # every worker's sandboxes in this run's one budget
        if w["device"] is not None:
            env["CUDA_VISIBLE_DEVICES"] = w["device"]
        options = {**net, "nthreads": 1, "dashboard": False, "silence_logs": logging.WARN}
        workers[f"grader-{i}"] = {"cls": Nanny, "options": {**options, "env": env}}
    cluster = SpecCluster(
        workers=workers,
        scheduler={"cls": Scheduler, "options": {**net, "dashboard": False}},
        silence_logs=logging.WARN,
    )
    share = f", {len(cores) // max(1, len(seen))} cores a GPU" if use else ""
    log(
        f"dask: a LocalCluster of {max(1, jobs)} worker processes"
        + (f" on {use} GPU(s){share}" if use else "")
    )
    return cluster


def pin(cores: list[int]) -> None:
    """Run every thread of this process (and so every process it starts later) on
    ``cores``; where the system cannot, nothing changes."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        return
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:  # a thread that ended, or cores this process may not use
            pass


def _pin_once() -> None:
    if "pinned" not in _HERE:
        pin(cores_asked())
        _HERE["pinned"] = True


def cores_asked() -> list[int]:
    """The cores :data:`CPUS_ENV` names (set by :func:`local_cluster`), or none."""
    text = os.environ.get(CPUS_ENV, "")
    return [int(c) for c in text.split(",") if c.strip().isdigit()]


# ---------------------------------------------------------------------------------------
# a worker: ready before the first submission, then one submission per task


def ready(plans: dict, opts) -> dict:
    """Run once on every worker before any submission: its cores (:func:`pin`), its warm
    sandbox (cold: a sandbox made and tried) and its GPU's ceilings, made now and side by
    side with every other worker's rather than inside each worker's first submission.  What
    it did, for the log."""
    t = time.perf_counter()
    _pin_once()
    if _isolated(opts) and getattr(opts, "warm", False):
        _warm_isolation(plans, opts)
    elif _isolated(opts):  # cold: each submission makes its own; this one only tries
        with tempfile.TemporaryDirectory(prefix="course-grade-try-") as tmp:
            _sandbox(Path(tmp), opts)
    _ceilings(opts)
    return {
        "device": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "seconds": round(time.perf_counter() - t, 3),
    }


def grade_payload(item: dict, grade, plans: dict, opts):
    """Run on a Dask worker: ``grade`` the submission's bytes there (``grade`` is
    ``batch.grade_one``, passed in: this module does not import batch), in a sandbox made
    on that machine (the grader's paths are not the worker's)."""
    from .intake import Submission

    _pin_once()  # a worker restarted or joined late never ran ``ready``
    sub = Submission(
        Path(item["path"]),
        item["rel"],
        item["folder"],
        item["data"],
        item["problem"],
        item["student"],
    )
    sub.lesson = item["lesson"]
    if _isolated(opts) and getattr(opts, "warm", False):
        return grade(sub, plans, opts.here(_warm_isolation(plans, opts), _ceilings(opts)))
    with tempfile.TemporaryDirectory(prefix="course-grade-run-") as t:
        isolation = _sandbox(Path(t), opts) if _isolated(opts) else None
        return grade(sub, plans, opts.here(isolation, _ceilings(opts)))


def _isolated(opts) -> bool:
    return getattr(opts, "isolation_choice", "none") != "none"


def _sandbox(folder: Path, opts):
    """This worker's sandbox in ``folder``, hiding the run's private folders as the
    grader's own sandboxes do (``GradeSettings.private``), or :class:`SandboxMissing`
    where this machine cannot build one (fail closed: never grade unsandboxed silently)."""
    from ..wall.isolate import for_grading

    hide = [Path(p) for p in opts.private] + worker_folders()
    isolation, said = for_grading(hide, folder)
    if isolation is None:
        raise SandboxMissing(no_sandbox_message(said))
    return isolation


def worker_folders() -> list[Path]:
    """This Dask worker's scratch space (its folder and its siblings': what a client
    uploads, what a worker spills to disk), which Dask puts on ``sys.path``: hidden from
    its sandboxes like the run's own folders.  An empty list outside a Dask worker."""
    try:
        from distributed import get_worker

        mine = Path(get_worker().local_directory)
    except (ImportError, ValueError, AttributeError):
        return []
    return [mine, mine.parent]


def _ceilings(opts):
    """This worker's GPU figures: measured by the run's first process on this GPU, read by
    the others (``prepare.ceilings_once``), with the given kernels of the lessons handed in."""
    from .prepare import ceilings_once

    return ceilings_once(opts.mode, opts.starters, run=opts.seed)


_HERE: dict = {}  # this Dask worker process's sandbox, zygotes and pinning, made once


def _warm_isolation(plans: dict, opts):
    """This Dask worker's sandbox with warm forks (``forks.py``), made on its first task;
    its zygotes import what the lessons' set-up cells import."""
    import atexit
    import shutil
    import threading

    with _HERE.setdefault("lock", threading.Lock()):
        if "iso" not in _HERE:
            from .prepare import cell_imports, warm_sandboxes

            run_dir = Path(tempfile.mkdtemp(prefix="course-grade-run-"))
            atexit.register(shutil.rmtree, run_dir, True)
            isolation = _sandbox(run_dir, opts)
            warm_sandboxes(isolation, cell_imports(plans), log=lambda line: None)
            _HERE["iso"] = isolation
        return _HERE["iso"]
