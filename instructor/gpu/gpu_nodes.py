"""Check on a machine of 2+ GPUs that a grading sandbox reaches only its maker's GPU
(``course/grading/wall/gpus.py``).  For each GPU, as a Dask worker would
(``CUDA_VISIBLE_DEVICES`` set to it), it makes the grading sandbox and, inside it, lists
``/dev/nvidia*``, starts CUDA (count and PCI address of each device), runs a numba kernel,
does it again in a process with ``CUDA_VISIBLE_DEVICES`` cleared (a cell's way to other
GPUs), tries to make another GPU's node with ``mknod``, and an epoll and an io_uring
instance (``tree.DENIED``: refused, while CUDA still runs).  Writes a Markdown report.

    python instructor/gpu/gpu_nodes.py OUT.md
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

INSIDE = r"""
import ctypes, json, os, stat, subprocess, sys
def cuda():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return {"libcuda": str(exc)[:200]}
    n = ctypes.c_int(0)
    r = lib.cuInit(0)
    if r:
        return {"cuInit": r}
    lib.cuDeviceGetCount(ctypes.byref(n))
    buses = []
    for i in range(n.value):
        d, b = ctypes.c_int(0), ctypes.create_string_buffer(64)
        lib.cuDeviceGet(ctypes.byref(d), i)
        lib.cuDeviceGetPCIBusId(b, 64, d)
        buses.append(b.value.decode())
    return {"count": n.value, "buses": buses}
if sys.argv[1:] == ["bare"]:
    print(json.dumps(cuda()))
    sys.exit()
out = {"nodes": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")),
       "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda": cuda()}
libc = ctypes.CDLL(None, use_errno=True)
out["epoll made"] = libc.syscall(291, 0) >= 0   # x86_64's epoll_create1: refused
out["io_uring made"] = libc.syscall(425, 8, ctypes.create_string_buffer(120)) >= 0
out["aio made"] = libc.syscall(206, 1, ctypes.byref(ctypes.c_ulong(0))) >= 0   # io_setup
out["/proc/keys"] = open("/proc/keys").read(200)
env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
r = subprocess.run([sys.executable, "-c", os.environ["NODES_CODE"], "bare"], env=env,
                   capture_output=True, text=True, timeout=60)
out["cleared"] = json.loads(r.stdout) if r.returncode == 0 else r.stderr[-300:]
others = [m for m in sys.argv[1].split(",") if m and "nvidia" + m not in out["nodes"]]
out["mknod"] = "refused: no other GPU"
for m in others:
    try:
        os.mknod("/tmp/nv" + m, stat.S_IFCHR | 0o666, os.makedev(195, int(m)))
        fd = os.open("/tmp/nv" + m, os.O_RDWR)
        out["mknod"] = "made and opened another GPU's node"
    except OSError as exc:
        out["mknod"] = "refused: " + exc.strerror
try:
    import numpy as np
    from numba import cuda as nc
    @nc.jit
    def add_one(a):
        i = nc.grid(1)
        if i < a.size:
            a[i] += 1.0
    x = np.random.default_rng(1).random(100_003).astype(np.float32)
    d = nc.to_device(x)
    add_one[(x.size + 255) // 256, 256](d)
    out["kernel"] = bool(np.allclose(d.copy_to_host(), x + 1))
except Exception as exc:
    out["kernel"] = repr(exc)[:300]
print(json.dumps(out))
"""


def one(index: str, all_minors: str) -> dict:
    """In a fresh process whose CUDA_VISIBLE_DEVICES is ``index``: the sandbox's view."""
    from course.grading.wall import gpus, isolate
    from course.grading.wall.child import PYTHON, child_env

    outside = gpus.cuda_devices() or []
    sel = gpus.visible()
    with tempfile.TemporaryDirectory() as t:
        iso, said = isolate.for_grading([], Path(t))
        if iso is None:
            return {"index": index, "error": said}
        env = child_env(Path(iso.scratch), {"NODES_CODE": INSIDE})
        cmd = iso.wrap([PYTHON, "-c", INSIDE, all_minors], env)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=t)
    try:
        inside = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        inside = {"error": (r.stdout + r.stderr)[-600:]}
    return {
        "index": index,
        "outside": outside,
        "selection": sel.describe(),
        "described": said,
        "inside": inside,
    }


def verdict(r: dict) -> list[str]:
    """What is wrong with one GPU's result (nothing: it holds)."""
    i, want = r.get("inside", {}), [b for b, _ in r.get("outside", [])]
    bad = []
    if "error" in r or "error" in i:
        return [str(r.get("error") or i.get("error"))]
    gpu_nodes = [n for n in i["nodes"] if n[len("nvidia") :].isdigit()]
    if len(gpu_nodes) != 1:
        bad.append(f"GPU nodes inside: {gpu_nodes}")
    for key in ("cuda", "cleared"):
        got = i[key].get("buses") if isinstance(i[key], dict) else i[key]
        if got != want:
            bad.append(f"{key}: CUDA shows {got}, the maker sees {want}")
    bad += [k for k in ("epoll made", "io_uring made", "aio made") if i.get(k) is not False]
    if i.get("/proc/keys") != "":
        bad.append("/proc/keys is not masked")
    if not i["mknod"].startswith("refused"):
        bad.append(i["mknod"])
    if i["kernel"] is not True:
        bad.append(f"kernel: {i['kernel']}")
    return bad


def main(out: Path) -> int:
    if len(sys.argv) > 2 and sys.argv[2] == "--one":
        print(json.dumps(one(os.environ["CUDA_VISIBLE_DEVICES"], sys.argv[3])))
        return 0
    from course.grading.wall import gpus

    q = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    names = [line.split(":")[1].split("(")[0].strip() for line in q.strip().splitlines()]
    minors = ",".join(str(m) for m in sorted(gpus.minors(gpus.PROC).values()))
    lines = [f"# A grading sandbox's GPUs, {names[0] if names else 'no GPU'} x{len(names)}", ""]
    lines += [f"The driver's minor numbers: {minors}.", ""]
    failed = 0
    for index in map(str, range(len(names))):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=index)
        p = subprocess.run(
            [sys.executable, __file__, str(out), "--one", minors],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            r = {"index": index, "error": (p.stdout + p.stderr)[-600:]}
        bad = verdict(r)
        failed += bool(bad)
        lines += [
            f"## CUDA_VISIBLE_DEVICES={index}: "
            + ("holds" if not bad else "FAILS: " + "; ".join(bad)),
            "",
            "```json",
            json.dumps(r, indent=1),
            "```",
            "",
        ]
    out.write_text("\n".join(lines))
    print("\n".join(line for line in lines if line.startswith("#")))
    return 1 if failed or not names else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
