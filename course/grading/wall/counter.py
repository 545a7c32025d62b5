"""The GPU's own count: a measurer run under Nsight Compute, in the sandbox (issue #47).

Where a card's memory hides what a tune exercise changes (``exercises/tune_cards.py``), the
simulator counts the kernel; but a kernel can tell the simulator from a GPU (Python
integers never wrap, the simulator's launch is small) and run the lesson's fix only there.
So the judge also asks the GPU itself: this process, started like any other child of the
grader (``child.py``: the sandbox, an empty environment, no capabilities), runs
``measurer.py`` under ``ncu`` with the judge's two pipes passed through, so the judge
speaks to the measurer as always (load, stage, measure, collect).  The measurer brackets
one launch of the measured case, at the size the GPU times, with ``cuProfilerStart`` and
``cuProfilerStop`` (``exercises/timed.py``); ``ncu`` reads the hardware's shared-memory
counters of what runs in between.  When the measurer has ended, this process sends
``ncu``'s table, raw, as one last reply: the judge parses and judges it
(``judging/gpu_count.py``).

Nothing here holds more than a measurer does: ``ncu`` and its folder are bound read-only
into the tree (``isolate.plan``, :func:`ncu_home`), its output goes to the scratch tmpfs,
and what leaves is bounded text the judge reads as data.  Where the driver keeps the
counters for administrators (``NVreg_RestrictProfilingToAdminUsers=1``) a process without
capabilities cannot read them: the table then holds ``ncu``'s error, and the judge says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ...hardware.ncu import NCU_VAR, find  # NCU_VAR: the ncu an instructor names

COUNTER = "course.grading.wall.counter"  # this module, as ``child.Child`` starts it
MAX_TABLE = 256 << 10  # bytes of ncu's table sent back, at most
# Nsight Compute's counters of the profiled launch, every kind of access (loads, stores,
# atomics: a conflict is one whichever instruction makes it), as ncu's regular expressions
FAMILIES = {
    "replays": r"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_[a-z]+\.sum",
    "requests": r"smsp__sass_inst_executed_op_shared_[a-z]+\.sum",
    "sectors": r"l1tex__t_sectors_pipe_lsu_mem_global_op_[a-z]+\.sum",
}
METRICS = tuple(f"regex:^{pattern}$" for pattern in FAMILIES.values())


def find_ncu() -> Path | None:
    """The ``ncu`` the counter runs (``course.hardware.ncu.find``), or None."""
    found = find()
    return Path(found) if found else None


def ncu_home() -> Path | None:
    """The folder the sandbox binds for :func:`find_ncu`'s ``ncu`` (its install folder)."""
    ncu = find_ncu()
    return ncu.parent if ncu is not None else None


def ncu_env() -> dict:
    """What a counter child's environment adds: the ``ncu`` it runs (empty: none here)."""
    return {NCU_VAR: str(find_ncu() or "")}


def command(ncu: str, log: Path) -> list[str]:
    """``ncu``'s command line up to the target's: only launches between cuProfilerStart and
    cuProfilerStop, the :data:`METRICS` (:data:`FAMILIES`), a CSV table into ``log``, the
    clocks left alone (locking them needs rights the sandbox does not have; counts do not
    depend on them)."""
    return [
        ncu,
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--clock-control",
        "none",
        "--metrics",
        ",".join(METRICS),
        "--csv",
        "--print-units",
        "base",
        "--log-file",
        str(log),
    ]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    req, rep = int(argv[0]), int(argv[1])
    from .wire import Channel

    ncu = os.environ.get(NCU_VAR, "")
    scratch = Path(os.environ.get("TMPDIR") or "/tmp")
    log, said = scratch / "counters.csv", scratch / "ncu-said.txt"
    error, rc = None, None
    if not ncu or not os.path.isfile(ncu):
        error = "Nsight Compute (ncu) is not installed on this machine"
    else:
        target = [sys.executable, "-m", "course.grading.wall.measurer", str(req), str(rep)]
        try:
            with open(said, "wb") as out:  # ncu's own lines (and the measurer's, if any)
                rc = subprocess.run(
                    [*command(ncu, log), *target],
                    pass_fds=(req, rep),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                ).returncode
        except OSError as exc:
            error = f"ncu did not start: {exc}"
    reply = {"op": "counters", "table": _read(log, MAX_TABLE), "rc": rc, "error": error}
    reply["said"] = _read(said, 4096, tail=True)
    Channel(req, rep).send(reply)
    sys.stdout.flush()
    os._exit(0)


def _read(path: Path, most: int, tail: bool = False) -> str:
    try:
        with open(path, "rb") as f:
            if tail:
                f.seek(max(0, os.fstat(f.fileno()).st_size - most))
            return f.read(most).decode("utf-8", "replace")
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
