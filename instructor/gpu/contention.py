"""What a two-GPU machine shares between its GPUs' graders (#45): many processes at once
making a CUDA context and moving a lesson-01-sized array each way, and the same processes
only copying host memory, for 12 processes on one GPU, 24 spread over two and 24 on one.
Each process is pinned to its GPU's half of the cores, as the Dask cluster pins them.  Per
step: the median and slowest process's seconds, and the machine's user / system CPU.

    python instructor/gpu/contention.py OUT.json
"""

import json
import multiprocessing as mp
import os
import statistics
import sys
import time

MB = 1 << 20
NBYTES = 256 * MB  # one of lesson 01's measured arrays (2^26 float32)


def cpu():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return {"user": v[0] + v[1], "system": v[2], "idle": v[3] + v[4], "irq": v[5] + v[6]}


def gpu_proc(dev, cores, barrier, q, env):
    os.environ["CUDA_VISIBLE_DEVICES"] = dev
    os.environ.update(env)
    os.sched_setaffinity(0, cores)
    import numpy as np
    from numba import cuda

    x = np.random.default_rng(0).random(NBYTES // 4, dtype=np.float32)
    barrier.wait()
    t0 = time.perf_counter()
    cuda.current_context()
    t1 = time.perf_counter()
    d = cuda.to_device(x)
    cuda.synchronize()
    t2 = time.perf_counter()
    d.copy_to_host()
    t3 = time.perf_counter()
    q.put({"context": t1 - t0, "to device": t2 - t1, "to host": t3 - t2})


def mem_proc(dev, cores, barrier, q, env):
    os.sched_setaffinity(0, cores)
    import numpy as np

    a = np.random.default_rng(0).random(NBYTES // 4, dtype=np.float32)
    barrier.wait()
    t0 = time.perf_counter()
    b = np.ones_like(a)  # fresh pages: faults and zeroing
    t1 = time.perf_counter()
    for _ in range(4):
        np.copyto(b, a)
    t2 = time.perf_counter()
    r, w = os.pipe()  # the wire's way: a pipe, 1 MiB at a time, to a thread of this process
    import threading

    def reader():
        left = NBYTES
        while left:
            left -= len(os.read(r, min(left, MB)))

    th = threading.Thread(target=reader)
    th.start()
    view = memoryview(a).cast("B")
    for i in range(0, NBYTES, MB):
        os.write(w, view[i : i + MB])
    th.join()
    t3 = time.perf_counter()
    q.put({"fresh pages": t1 - t0, "copy x4": t2 - t1, "pipe": t3 - t2})


def run(fn, placement, env=None):
    ctx = mp.get_context("spawn")
    barrier, q = ctx.Barrier(len(placement) + 1), ctx.Queue()
    procs = [ctx.Process(target=fn, args=(d, c, barrier, q, env or {})) for d, c in placement]
    for p in procs:
        p.start()
    barrier.wait()
    before, t = cpu(), time.perf_counter()
    got = [q.get(timeout=300) for _ in procs]
    wall, after = time.perf_counter() - t, cpu()
    for p in procs:
        p.join()
    d = {k: after[k] - before[k] for k in before}
    total = sum(d.values()) or 1
    out = {"processes": len(procs), "wall_s": round(wall, 3)}
    out["cpu_pct"] = {k: round(100 * d[k] / total, 1) for k in ("user", "system", "irq")}
    for k in got[0]:
        v = sorted(g[k] for g in got)
        out[k] = {"median": round(statistics.median(v), 3), "max": round(v[-1], 3)}
    return out


def main(path):
    cores = sorted(os.sched_getaffinity(0))
    half = len(cores) // 2
    a, b = cores[:half], cores[half:]
    layouts = {
        "12 on GPU 0": [("0", a)] * 12,
        "24 on GPUs 0 and 1": [("0", a)] * 12 + [("1", b)] * 12,
        "24 on GPU 0": [("0", a)] * 12 + [("0", b)] * 12,
    }
    two = len(os.environ.get("CUDA_VISIBLE_DEVICES", "0,1").split(",")) > 1
    from numba import cuda

    if not two or len(cuda.gpus) < 2:  # one GPU: its 12 and 24 processes only
        del layouts["24 on GPUs 0 and 1"]
    results = {}
    for name, placement in layouts.items():
        for what, fn in (("gpu", gpu_proc), ("host", mem_proc)):
            key = f"{what}: {name}"
            results[key] = run(fn, placement)
            print(key, json.dumps(results[key]), flush=True)
    name = next(k for k in layouts if k.startswith("24"))
    key = f"gpu: {name}, CUDA_DEVICE_MAX_CONNECTIONS=1"
    results[key] = run(gpu_proc, layouts[name], {"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    print(key, json.dumps(results[key]), flush=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
