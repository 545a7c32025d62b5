"""Which of the sandbox's refused system calls Nsight Compute needs: ``ncu`` profiling a
small numba kernel under the sandbox's filter (``wall/tree.py``'s ``deny_calls``), as
committed and with each group of calls allowed again.  ``python instructor/gpu/ncu_filter.py``
"""

from __future__ import annotations

import ctypes
import subprocess
import sys

from course.grading.wall import tree
from course.grading.wall.counter import find_ncu

KERNEL = """
import numpy as np
from numba import cuda
@cuda.jit
def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0
d = cuda.to_device(np.ones(1 << 20, dtype=np.float32))
add_one[4096, 256](d)
cuda.synchronize()
print("kernel ran", float(d.copy_to_host()[0]))
"""
ALL = dict(tree.DENIED["x86_64"])
GROUPS = {
    "epoll": ("epoll_create", "epoll_create1"),
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "inotify": ("inotify_init", "inotify_init1"),
}


def filtered(denied: dict):
    def install():
        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        tree.DENIED["x86_64"] = denied
        tree.deny_calls()

    return install


def main() -> int:
    ncu = find_ncu()
    print("ncu:", ncu)
    variants = {"as committed": ALL}
    for name, calls in GROUPS.items():
        variants[f"{name} allowed"] = {k: v for k, v in ALL.items() if k not in calls}
    # the target alone refuses epoll (its own filter, stacked, before CUDA starts): ncu's
    # injected library in the target process, does it need epoll too?
    inner = "from course.grading.wall import tree; tree.deny_calls()\n" + KERNEL
    r = subprocess.run(
        [str(ncu), "--section", "SpeedOfLight", sys.executable, "-c", inner],
        preexec_fn=filtered(variants["epoll allowed"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    tail = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()][-3:]
    print(f"target refuses epoll, ncu not: rc {r.returncode}: " + " / ".join(tail)[:400])
    for label, denied in variants.items():
        for what, cmd in (
            ("python", [sys.executable, "-c", KERNEL]),
            ("ncu", [str(ncu), "--section", "SpeedOfLight", sys.executable, "-c", KERNEL]),
        ):
            r = subprocess.run(
                cmd, preexec_fn=filtered(denied), capture_output=True, text=True, timeout=120
            )
            tail = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()][-3:]
            print(f"{label:16s} {what:6s} rc {r.returncode}: " + " / ".join(tail)[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main())
