"""The simulator accepts code a GPU compiler rejects: compile every kernel in course/kernels
to PTX for real targets (sm_90 and sm_75), in a subprocess with the simulator off.
Needs no GPU and no driver, only the numba-cuda[cu12] toolkit wheels."""
import json
import os
import pkgutil
import subprocess
import sys

import pytest

import course.kernels

MODULES = [m.name for m in pkgutil.iter_modules(course.kernels.__path__)]

SCRIPT = r"""
import importlib, json, sys
import course
from numba import cuda
mod = importlib.import_module("course.kernels." + sys.argv[1])
kernels = {n for n, o in vars(mod).items()
           if getattr(getattr(o, "py_func", None), "__module__", None) == mod.__name__
           and not getattr(o, "targetoptions", {}).get("device", False)}
sigs = getattr(mod, "PTX_SIGNATURES", {})
out = {"missing": sorted(kernels - set(sigs) - set(getattr(mod, "GPU_ONLY_LINKED", ()))),
       "compiled": [], "errors": [], "kernels": sorted(kernels)}
for name, sig in sigs.items():
    for cc in [(9, 0), (7, 5)]:
        try:
            ptx, _ = cuda.compile_ptx(getattr(mod, name).py_func, sig, cc=cc)
            assert ".entry" in ptx or ".func" in ptx
            out["compiled"].append(f"{name}@{cc}")
        except Exception as e:
            out["errors"].append(f"{name}@{cc}: {type(e).__name__}: {str(e)[:300]}")
print("JSON" + json.dumps(out))
"""


def compile_off_simulator(script: str, *args: str, timeout: int = 600):
    """Run ``script`` in a subprocess with the simulator off (numba's real CUDA compiler)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("modname", MODULES)
def test_kernels_compile_to_ptx_for_real_gpus(modname):
    proc = compile_off_simulator(SCRIPT, modname)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line, f"compile script failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    out = json.loads(line[-1][4:])
    assert not out["missing"], f"kernels without PTX_SIGNATURES entry: {out['missing']}"
    assert not out["errors"], "\n".join(out["errors"])
    # a module of device functions and constants only (attention_common) has nothing to compile
    assert out["compiled"] or not out["kernels"], "nothing compiled"


def test_ptx_compile_rejects_what_the_simulator_accepts():
    """Proof the PTX test can fail: a dict inside a kernel runs in the simulator, not on a GPU."""
    script = r"""
import course
from numba import cuda
def bad(x):
    d = {1: 2.0}
    x[0] = d[1]
try:
    cuda.compile_ptx(bad, "void(float32[::1])", cc=(9, 0))
    print("COMPILED")
except Exception as e:
    print("REJECTED", type(e).__name__)
"""
    proc = compile_off_simulator(script, timeout=300)
    assert "REJECTED TypingError" in proc.stdout, proc.stdout + proc.stderr[-2000:]


V4_PTX = r"""
import json
import course
from numba import cuda
from course.kernels import matmul_tuned as mt
ptx, _ = cuda.compile_ptx(mt.matmul_v4.py_func, mt._SIG, cc=(9, 0))
print("JSON" + json.dumps({"v4": ptx.count("ld.shared.v4.f32"), "scalar": ptx.count("ld.shared.f32")}))
"""


def test_v4_reads_shared_memory_16_bytes_at_a_time():
    """On a real target load4 is one ld.shared.v4.f32 (LDS.128), and v4 has no scalar shared
    loads left: (TM + TN) / 4 vector loads per K step of the unrolled pair."""
    from course.kernels import matmul

    proc = compile_off_simulator(V4_PTX)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line, proc.stderr[-2000:]
    counts = json.loads(line[-1][4:])
    BM, BN, BK, TM, TN = matmul.V4_DEFAULT
    assert counts["scalar"] == 0
    assert counts["v4"] == 2 * (TM + TN) // 4, counts
