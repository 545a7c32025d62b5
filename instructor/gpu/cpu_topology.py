"""What a machine's CPU cores are (issue #45: Dask on 2 GPUs gives each GPU's graders half
the cores): lscpu's lines, each core's hyperthread siblings, and a CPU-bound loop timed in
N processes pinned one a core on the first half of the cores, then on all of them - if
the second half are the first half's siblings, each process runs slower on all of them.
``python instructor/gpu/cpu_topology.py OUT.json``"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

LOOP = 3_000_000


def spin(core: int, q) -> None:
    os.sched_setaffinity(0, {core})
    t = time.perf_counter()
    x = 0
    for i in range(LOOP):
        x += i * i
    q.put(time.perf_counter() - t)


def copy(core: int, q) -> None:
    """Memory-bound: 64 MB copied 8 times (a grader's arrays are 256 MB each)."""
    import numpy as np

    os.sched_setaffinity(0, {core})
    a, b = np.ones(16 << 20, dtype=np.float32), np.empty(16 << 20, dtype=np.float32)
    np.copyto(b, a)
    t = time.perf_counter()
    for _ in range(8):
        np.copyto(b, a)
    q.put(time.perf_counter() - t)


def timed(cores: list[int], work=spin) -> float:
    q = mp.Queue()
    ps = [mp.Process(target=work, args=(c, q)) for c in cores]
    for p in ps:
        p.start()
    took = [q.get(timeout=120) for _ in ps]
    for p in ps:
        p.join()
    return sum(took) / len(took)


def main(out: Path) -> int:
    cores = sorted(os.sched_getaffinity(0))
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = ("CPU(s)", "Thread", "Core", "Socket", "NUMA", "Model name", "Hypervisor", "L3")
    siblings = {}
    for c in cores:
        f = Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list")
        siblings[c] = f.read_text().strip() if f.exists() else "?"
    half = cores[: len(cores) // 2]
    report = {
        "lscpu": [ln for ln in lscpu.splitlines() if ln.strip().startswith(keep)],
        "siblings": siblings,
        "one process s": timed(cores[:1]),
        "first half s (one a core)": timed(half),
        "all cores s (one a core)": timed(cores),
        "copy: one process s": timed(cores[:1], copy),
        "copy: first half s": timed(half, copy),
        "copy: all cores s": timed(cores, copy),
    }
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "siblings"}, indent=1))
    print(
        "siblings of", cores[0], ":", siblings[cores[0]], "; of", half[-1], ":", siblings[half[-1]]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
