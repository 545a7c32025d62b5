"""Probe (issue #47): can the grader read the GPU's own bank-conflict counters?

Usage (device machine): ``python instructor/gpu/counters_probe.py OUT``.  Writes
``OUT/counters-probe.json``: the driver's profiling setting, the user and its capabilities,
and Nsight Compute's shared-memory counters for three transposes (the given conflicted tile,
the padded tile, and a kernel that pads only where Python integers never wrap - the red
team's simulator-detecting attack) read three ways: as this user, with every capability
dropped, and inside the course's grading sandbox (which binds the ``ncu`` that
``course.grading.wall.counter.find_ncu`` finds).  Nothing here is graded; the course's own
path is ``round.sh counted``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELS = r"""
import numpy as np
from numba import cuda, float32
T = 32

@cuda.jit
def t_given(A, B):
    tile = cuda.shared.array((32, 32), float32)
    bx, by = cuda.blockIdx.x * T, cuda.blockIdx.y * T
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for j in range(0, T, 8):
        if by + ty + j < A.shape[0] and bx + tx < A.shape[1]:
            tile[ty + j, tx] = A[by + ty + j, bx + tx]
    cuda.syncthreads()
    for j in range(0, T, 8):
        if bx + ty + j < A.shape[1] and by + tx < A.shape[0]:
            B[bx + ty + j, by + tx] = tile[tx, ty + j]

@cuda.jit
def t_padded(A, B):
    tile = cuda.shared.array((32, 33), float32)
    bx, by = cuda.blockIdx.x * T, cuda.blockIdx.y * T
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for j in range(0, T, 8):
        if by + ty + j < A.shape[0] and bx + tx < A.shape[1]:
            tile[ty + j, tx] = A[by + ty + j, bx + tx]
    cuda.syncthreads()
    for j in range(0, T, 8):
        if bx + ty + j < A.shape[1] and by + tx < A.shape[0]:
            B[bx + ty + j, by + tx] = tile[tx, ty + j]

@cuda.jit
def t_attack(A, B):
    tile = cuda.shared.array(32 * 33, float32)
    w = 32
    if (A.shape[0] << 60) >> 60 == A.shape[0]:
        w = 33
    bx, by = cuda.blockIdx.x * T, cuda.blockIdx.y * T
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for j in range(0, T, 8):
        if by + ty + j < A.shape[0] and bx + tx < A.shape[1]:
            tile[(ty + j) * w + tx] = A[by + ty + j, bx + tx]
    cuda.syncthreads()
    for j in range(0, T, 8):
        if bx + ty + j < A.shape[1] and by + tx < A.shape[0]:
            B[bx + ty + j, by + tx] = tile[tx * w + ty + j]

n = 1024
A = cuda.to_device(np.random.default_rng(1).random((n, n), dtype=np.float32))
B = cuda.device_array((n, n), np.float32)
for k in (t_given, t_padded, t_attack):
    k[(n // T, n // T), (T, 8)](A, B)
    cuda.synchronize()
    assert np.array_equal(B.copy_to_host(), A.copy_to_host().T), k.__name__
print("kernels ok")
"""
METRICS = ",".join(
    [
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
        "smsp__sass_inst_executed_op_shared_ld.sum",
        "smsp__sass_inst_executed_op_shared_st.sum",
    ]
)


def sh(cmd, env=None, timeout=180) -> dict:
    t = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        out, rc = (r.stdout + r.stderr), r.returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        out, rc = str(e), -1
    return {
        "cmd": " ".join(cmd)[:300],
        "rc": rc,
        "s": round(time.time() - t, 1),
        "out": out[-6000:],
    }


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {}
    params = Path("/proc/driver/nvidia/params")
    res["params"] = [
        ln for ln in (params.read_text().splitlines() if params.exists() else []) if "rofil" in ln
    ]
    res["id"] = sh(["id"])["out"]
    res["caps"] = [ln for ln in Path("/proc/self/status").read_text().splitlines() if "Cap" in ln]
    from course.grading.wall.counter import find_ncu

    found = find_ncu()
    ncu = str(found) if found else None
    res["ncu"] = ncu
    res["ncu_on_path"] = shutil.which("ncu")
    res["layout"] = sh(["bash", "-c", "ls -la /usr/local/cuda/ /opt/nvidia/nsight-compute/ 2>&1"])
    res["ncu_version"] = sh([ncu, "--version"])["out"] if ncu else None
    res["cupti_module"] = sh([sys.executable, "-c", "import cupti; print(cupti.__file__)"])["out"]
    base = [ncu or "ncu", "--target-processes", "all", "--metrics", METRICS, "--csv"]
    cmd = [*base, sys.executable, "-c", KERNELS]
    res["plain"] = sh(cmd, env=dict(os.environ))
    print("plain", res["plain"]["rc"], res["plain"]["s"], flush=True)
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
    res["no_caps"] = sh([*drop, *cmd], env=dict(os.environ))
    print("no_caps", res["no_caps"]["rc"], res["no_caps"]["s"], flush=True)
    # the course's own grading sandbox: it binds ncu's install folder read-only (isolate.plan)
    from course.grading.wall import child, isolate

    with tempfile.TemporaryDirectory() as t:
        iso, said = isolate.for_grading([], Path(t))
        res["sandbox"] = said
        res["user_namespace"] = bool(iso and iso.user_namespace)
        if iso:
            env = child.child_env(iso.scratch) if hasattr(child, "child_env") else {}
            env = dict(env, PATH=isolate.SAFE_PATH)
            for k in ("LD_LIBRARY_PATH", "PYTHONPATH", "NUMBA_ENABLE_CUDASIM", "CUDA_HOME"):
                if os.environ.get(k):
                    env[k] = os.environ[k]
            env.setdefault("HOME", iso.scratch)
            env["TMPDIR"] = iso.scratch
            res["sandboxed"] = sh(iso.wrap(cmd, env), env=dict(os.environ))
            print("sandboxed", res["sandboxed"]["rc"], res["sandboxed"]["s"], flush=True)
    (out / "counters-probe.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
