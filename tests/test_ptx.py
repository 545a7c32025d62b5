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
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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


V5_PTX = r"""
import json
import course
from numba import cuda
from course.kernels import matmul_v5 as v5
out = {}
for name, tile, vec, steps in [("vec", (128, 128, 16, 8, 8), True, 16),
                               ("scalar", (128, 128, 16, 8, 8), False, 2),
                               ("narrow", (64, 128, 16, 8, 8), True, 2)]:
    k = v5.make_v5(*tile, 2, VEC=vec, STEPS=steps)
    ptx, _ = cuda.compile_ptx(k.py_func, v5._SIG, cc=(9, 0))
    out[name] = {"ldg4": ptx.count("ld.global.v4.f32"), "sts4": ptx.count("st.shared.v4.f32"),
                 "lds4": ptx.count("ld.shared.v4.f32"), "fma": ptx.count("fma.rn.f32"),
                 "local": ptx.count(".local"), "atom": ptx.count("atom.global.add.f32")
                 + ptx.count("red.global.add.f32")}
print("JSON" + json.dumps(out))
"""


def test_v5_loads_16_bytes_from_global_and_shared_memory_and_writes_out_its_steps():
    """On sm_90, v5 reads its A and B runs with ld.global.v4.f32 (LA + LB per tile; the
    scalar build, compiled with 2 k steps, none), stores B's runs with st.shared.v4.f32,
    writes out STEPS k steps of TM*TN FMAs (numba alone unrolls two), keeps everything in
    registers, and adds split-K slices with atomics."""
    proc = compile_off_simulator(V5_PTX)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line, proc.stderr[-2000:]
    c = json.loads(line[-1][4:])
    # (128, 128, 16, 8, 8): 256 threads, A runs 128*4/256 = 2, B runs 16*32/256 = 2
    assert c["vec"]["ldg4"] == 4 and c["scalar"]["ldg4"] == 0, c
    assert c["vec"]["sts4"] == 2 == c["scalar"]["sts4"], c
    assert c["vec"]["fma"] == 16 * 64 and c["vec"]["lds4"] == 16 * 4, c  # 16 steps written out
    assert c["narrow"]["fma"] == 2 * 64 and c["narrow"]["ldg4"] == 2 + 4, c
    assert all(v["local"] == 0 and v["atom"] > 0 for v in c.values()), c


V6_PTX = r"""
import json
import course
from numba import cuda
from course.kernels import matmul_v6 as v6
out = {}
for name, tile, stages, vec in [("vec", (64, 128, 16, 8, 8), 3, True),
                                ("scalar", (64, 128, 16, 8, 8), 2, False)]:
    k = v6.make_v6(*tile, 4, stages, vec, STEPS=16)
    ptx, _ = cuda.compile_ptx(k.py_func, v6._SIG, cc=(9, 0), launch_bounds=(128, 4))
    out[name] = {"ca4": ptx.count("cp.async.ca.shared.global"),
                 "cg16": ptx.count("cp.async.cg.shared.global"),
                 "commit": ptx.count("cp.async.commit_group"),
                 "waits": sorted(set(l.strip() for l in ptx.splitlines()
                                     if "cp.async.wait_group" in l)),
                 "lds4": ptx.count("ld.shared.v4.f32"), "fma": ptx.count("fma.rn.f32"),
                 "ldg": ptx.count("ld.global"), "local": ptx.count(".local")}
print("JSON" + json.dumps(out))
"""


def test_v6_copies_with_cp_async_and_waits_for_all_but_stages_minus_2_groups():
    """On sm_90, v6 fetches through cp.async only (no ld.global in the loop): 4-byte copies of
    A (8 a thread a tile at (64, 128, 16, 8, 8), twice: the whole-tile path and the edge path),
    16-byte copies of B (2) where B is aligned and 4-byte ones (8) where not; one commit per
    fetch; waits for all but STAGES - 2 groups in the loop and for all at the end; 16 k steps
    of 64 FMAs from 16-byte shared loads; nothing in local memory."""
    proc = compile_off_simulator(V6_PTX)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line, proc.stderr[-2000:]
    c = json.loads(line[-1][4:])
    assert c["vec"]["ca4"] >= 2 * 8 and c["vec"]["cg16"] >= 2 * 2, c
    assert c["scalar"]["cg16"] == 0 and c["scalar"]["ca4"] >= 2 * (8 + 8), c
    assert all(v["ldg"] == 0 and v["local"] == 0 and v["commit"] >= 2 for v in c.values()), c
    assert c["vec"]["waits"] == ["cp.async.wait_group 0;", "cp.async.wait_group 1;"], c
    assert c["scalar"]["waits"] == ["cp.async.wait_group 0;"], c
    assert c["vec"]["fma"] == 16 * 64 and c["vec"]["lds4"] == 16 * 4, c


FLASH_TUNED_PTX = r"""
import json
from numba import cuda
from course.kernels import attention_tuned as T
out = {}
for D in (32, 128):
    k = T.make_flash_tuned(D)
    ptx, _ = cuda.compile_ptx(k.py_func, T.PTX_SIGNATURES["flash_fwd_tuned"], cc=(9, 0))
    out[D] = {"v4": ptx.count("ld.shared.v4.f32"), "f64": ptx.count("ld.shared.f64")}
print("JSON" + json.dumps(out))
"""


def test_flash_tuned_reads_q_k_p_and_v_16_bytes_at_a_time():
    """flash_fwd_tuned's inner loops use load4 on its float64 pair slots: per unrolled step
    RPT Q + SPT K loads (scores) and RPT / 2 P + 2 x OPP / 2 V loads (output) are LDS.128;
    at D = 32 a thread owns one V pair, which stays an 8-byte load (ld.shared.f64)."""
    from course.kernels.attention_common import ROW_LANES, RPT, SPT

    proc = compile_off_simulator(FLASH_TUNED_PTX)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line, proc.stderr[-2000:]
    counts = json.loads(line[-1][4:])
    opp = 128 // 2 // ROW_LANES
    assert counts["128"] == {"v4": RPT + SPT + RPT // 2 + 2 * (opp // 2), "f64": 0}, counts
    # D = 32: the compiler unrolls the short loops further, so only the kinds are fixed
    assert counts["32"]["v4"] >= RPT + SPT + RPT // 2 and counts["32"]["f64"] > 0, counts


MMA_LINK = r"""
import json, sys
from numba import cuda
from numba.cuda.compiler import compile_all
from cuda.core import Linker, LinkerOptions, ObjectCode
from course.kernels import attention_mma as M
lto = sys.argv[1] == "lto"
out = {}
for D in (32, 128):
    k = M.make_flash_mma(D, M.WARPS)
    if lto:     # numba's kernel and the C++ (NVRTC) as LTO-IR, linked as numba links them
        codes, _ = compile_all(k.py_func, M.PTX_SIGNATURE, device=False, cc=(9, 0),
                               output="ltoir", abi="numba")
        objs = [ObjectCode.from_ltoir(c) if isinstance(c, bytes) else c for c in codes]
        opts = LinkerOptions(arch="sm_90", link_time_optimization=True, ptx=True)
        ptx = Linker(*objs, options=opts).link("ptx").code.decode()
    else:       # without link-time optimisation: numba's PTX alone, C++ functions external
        ptx, _ = cuda.compile_ptx(k.py_func, M.PTX_SIGNATURE, cc=(9, 0))
    out[D] = {op: ptx.count(op) for op in ("mma.sync", "ldmatrix", "ld.local", "st.local",
                                           "call.uni")}
print("JSON" + json.dumps(out))
"""


def _mma_counts(mode):
    proc = compile_off_simulator(MMA_LINK, mode)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line, proc.stderr[-3000:]
    return json.loads(line[-1][4:])


def test_flash_mma_keeps_scores_and_output_in_registers():
    """Linked with LTO (as numba-cuda links on a GPU with nvJitLink), the C++ helpers are
    inlined and the numba local arrays s and o live in registers: no calls, no local
    memory; D mma.sync per key tile (D/2 for S = Q K^T, D/2 for O += P V) and 9 D / 16
    ldmatrix (Q once and K four times per 16 of d; V four times per 16 of d)."""
    for D, c in _mma_counts("lto").items():
        D = int(D)
        assert c == {
            "mma.sync": D,
            "ldmatrix": 9 * D // 16,
            "ld.local": 0,
            "st.local": 0,
            "call.uni": 0,
        }, (D, c)


def test_mma_register_check_can_fail():
    """Without link-time optimisation the same kernel calls the C++ functions and passes
    s and o through local memory: the check above would see it."""
    for D, c in _mma_counts("nolto").items():
        assert c["call.uni"] > 0 and c["mma.sync"] == 0, (D, c)
        assert c["ld.local"] + c["st.local"] > 0, (D, c)


FUSED_PTX = r"""
import json
from numba import cuda, types
from course.kernels import gpt2 as G, matmul_tuned as mt
a2 = types.float32[:, ::1]
out = {}
for name in ("store_bias", "store_bias_gelu", "store_bias_residual"):
    k = mt.make_v4(*mt.V4_DEFAULT, mt.V4_MIN_BLOCKS, STORE=getattr(G, name))
    ptx, _ = cuda.compile_ptx(k.py_func, types.void(a2, a2, types.Tuple((a2, types.float32[::1]))),
                              cc=(9, 0))
    out[name] = {"v4": ptx.count("ld.shared.v4.f32"), "call": ptx.count("call."),
                 "ex2": ptx.count("ex2.approx"), "atom": ptx.count("atom.global.add.f32")}
print("JSON" + json.dumps(out))
"""


def test_gpt2_fused_epilogues_compile_inline_into_v4():
    """Lesson 11's epilogues (a tuple (out, bias) as v4's C) compile for a real GPU, inlined
    into the store (no calls), with v4's 16-byte shared loads intact; only GELU's tanh
    (libdevice: exp2) adds transcendental work, and the residual adds each of a thread's
    TM x TN results to x with one atomic (no read of x to wait for)."""
    from course.kernels import matmul

    proc = compile_off_simulator(FUSED_PTX)
    line = [l for l in proc.stdout.splitlines() if l.startswith("JSON")]
    assert line, proc.stderr[-2000:]
    counts = json.loads(line[-1][4:])
    BM, BN, BK, TM, TN = matmul.V4_DEFAULT
    for name, c in counts.items():
        assert c["v4"] == 2 * (TM + TN) // 4 and c["call"] == 0, (name, c)
        assert (c["ex2"] > 0) == (name == "store_bias_gelu"), (name, c)
        assert c["atom"] == (TM * TN if name == "store_bias_residual" else 0), (name, c)
