"""Nsight Compute (``ncu``) for ``course.profile``: run one call in a subprocess, parse the CSV.

The notebook's own process is never profiled.  ``course.profile`` pickles what the call
needs - the function (numba's cloudpickle: a notebook's function travels by value, a course
function by name; a configured launch ``kernel[grid, block]`` as the kernel's Python source,
its jit options and the launch shape) and the arguments (device arrays are copied to the host
first) - into a file, and runs ``ncu ... python -m course.hardware.ncu PAYLOAD``, which loads it and
makes the call once.  ncu prints one CSV row per kernel launched (``--page raw --csv
--print-units base``); :func:`parse` turns them into dicts of floats.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The metrics course.profile asks for: few, so that a call takes seconds, not minutes.
METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_warps",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__block_size",
    "launch__grid_size",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
]
STALLS = r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
NCU_VAR = "COURSE_NCU"  # the ncu executable, where an instructor names one


class NcuError(Exception):
    """Something a student can fix or understand, said in one paragraph."""


def find() -> str | None:
    """The ncu executable, inside its own install folder where there is one: ``$COURSE_NCU``,
    else the toolkit's (on PATH, or ``/usr/local/cuda``), else Nsight Compute's newest
    under ``/opt/nvidia``.  The toolkit's ``bin/ncu`` is a script that looks for that folder,
    so the folder's own ``ncu`` comes first (the grader's sandbox binds that folder)."""
    named = os.environ.get(NCU_VAR)
    found: list[Path] = [Path(named)] if named else []
    scripts = [Path(p) for p in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu") if p]
    for script in scripts:
        found += sorted(script.resolve().parent.parent.glob("nsight-compute*/ncu"), reverse=True)
    found += sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"), reverse=True)
    for p in [*found, *scripts]:
        real = p.resolve()
        if real.is_file() and os.access(real, os.X_OK):
            return str(real)
    return None


def run(payload: Path, timeout: float, launches: int, clock_control: str) -> str:
    """Profile ``python -m course.hardware.ncu PAYLOAD`` and return ncu's stdout (the CSV)."""
    exe = find()
    if exe is None:
        raise NcuError(
            "Nsight Compute (`ncu`) was not found. It comes with the CUDA toolkit (cuda-nsight-"
            "compute, or the Nsight Compute installer from NVIDIA); put its folder on PATH. "
            "Without it, course.sim.trace shows the same memory counts in the simulator."
        )
    cmd = [
        exe,
        "--csv",
        "--print-units",
        "base",
        "--page",
        "raw",
        "--target-processes",
        "all",
        "--launch-count",
        str(launches),
        "--clock-control",
        clock_control,
        "--metrics",
        ",".join(METRICS + [STALLS]),
        sys.executable,
        "-m",
        "course.hardware.ncu",
        str(payload),
    ]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    from ..platform.gpu_lock import LockTimeout, device_lock

    try:  # one Nsight Compute session at a time on this GPU (a check's count takes it too)
        with device_lock(True, deadline=time.monotonic() + timeout, purpose="profiler"):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except LockTimeout:
        raise NcuError(
            f"another profiler session kept this GPU busy for {timeout:g} s; try again"
        ) from None
    except subprocess.TimeoutExpired:
        raise NcuError(
            f"ncu did not finish within {timeout:g} s: profile a smaller input, or "
            "pass timeout= (each kernel is replayed once per group of metrics)"
        ) from None
    text = r.stdout + "\n" + r.stderr
    if "ERR_NVGPUCTRPERM" in text:
        raise NcuError(
            "ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM). Run as "
            "an administrator, or let every user profile: put `options nvidia "
            "NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/ and reboot (see "
            "NVIDIA's ERR_NVGPUCTRPERM page). In a container, start it with --cap-add "
            "SYS_ADMIN."
        )
    if '"ID"' not in r.stdout:
        tail = " | ".join(l for l in text.strip().splitlines()[-4:] if l.strip())
        if r.returncode == 0 or "No kernels were profiled" in text:
            raise NcuError(
                "the function launched no kernel, so there is nothing to profile "
                "(is it a host function that only uses numpy? did it return before "
                f"launching?). ncu said: {tail[:400]}"
            )
        raise NcuError(f"ncu failed (exit {r.returncode}): {tail[:600]}")
    return r.stdout


def parse(text: str) -> list[dict]:
    """One dict per kernel launch: 'kernel', 'block', 'grid' and every metric as a float."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    if len(rows) < 2:
        return []
    header, body = rows[0], rows[2:] if rows[1] and rows[1][0] == "" else rows[1:]
    out = []
    for r in body:
        if len(r) != len(header):
            continue
        d = dict(zip(header, r))
        row = {
            "kernel": _short_name(d.get("Kernel Name", "?")),
            "block": d.get("Block Size"),
            "grid": d.get("Grid Size"),
        }
        for name, value in d.items():
            if "__" in name:
                row[name] = _number(value)
        out.append(row)
    return out


def _number(s: str):
    try:
        return float(s.replace(",", ""))
    except (ValueError, AttributeError):
        return s


def _short_name(mangled: str) -> str:
    """'copy_strided[v1,cw51...](Array<...>)' -> 'copy_strided'."""
    return mangled.split("[", 1)[0].split("(", 1)[0].strip() or mangled


# ---------------------------------------------------------------------------------------
# the subprocess side: python -m course.hardware.ncu PAYLOAD


def write_payload(fn, args, kwargs, folder: Path) -> Path:
    """Pickle what the subprocess needs to make the call once (see the module docstring)."""
    from numba import cloudpickle

    launch = None
    if hasattr(fn, "dispatcher") and hasattr(fn, "griddim"):  # kernel[grid, block]
        d = fn.dispatcher
        launch = (d.py_func, dict(d.targetoptions), fn.griddim, fn.blockdim, fn.sharedmem)
        fn = None
    args = [_to_host(a) for a in args]
    kwargs = {k: _to_host(v) for k, v in kwargs.items()}
    path = folder / "call.pkl"
    path.write_bytes(
        cloudpickle.dumps({"fn": fn, "launch": launch, "args": args, "kwargs": kwargs})
    )
    return path


def _to_host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else a


def main(argv=None) -> int:
    import pickle

    path = Path((argv or sys.argv[1:])[0])
    from numba import cuda

    import course  # noqa: F401 - GPU mode, before numba loads

    call = pickle.loads(path.read_bytes())
    if call["launch"] is not None:
        py_func, options, grid, block, shared = call["launch"]
        options = {
            k: v
            for k, v in options.items()
            if k in ("fastmath", "max_registers", "lineinfo", "opt", "debug")
        }
        kernel = cuda.jit(**options)(py_func)
        args = [cuda.to_device(a) if hasattr(a, "__array_interface__") else a for a in call["args"]]
        kernel[grid, block, 0, shared](*args)
    else:
        call["fn"](*call["args"], **call["kwargs"])
    cuda.synchronize()
    return 0


def profile_call(
    fn, args, kwargs, *, timeout: float, launches: int, clock_control: str
) -> list[dict]:
    """Rows of ncu metrics for one call of ``fn`` in a subprocess (NcuError if it fails)."""
    with tempfile.TemporaryDirectory(prefix="course-profile-") as tmp:
        payload = write_payload(fn, args, kwargs, Path(tmp))
        return parse(run(payload, timeout, launches, clock_control))


if __name__ == "__main__":
    sys.exit(main())
