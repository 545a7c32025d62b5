"""What a measurer's GPU warm-up (``timed.warm_up``) spends its second on, in a fresh
process: the CUDA context, then each helper kernel's compile and first launch (#45).

    python instructor/gpu/warmup_parts.py [ptx-first]   # prints one JSON line
ptx-first: first a PTX compile with no device (what a zygote may do before it forks):
whether it starts the CUDA driver, and what it saves the steps after it.
"""

import json
import sys
import time

t = time.perf_counter()
import numpy as np  # noqa: E402

import course  # noqa: E402, F401
from numba import cuda  # noqa: E402

from course.exercises import timed  # noqa: E402
from course.measure import timing  # noqa: E402

took = {"imports": time.perf_counter() - t}
if sys.argv[1:] == ["ptx-first"]:  # what a zygote could do before it forks: no driver
    from numba.cuda.cudadrv.driver import driver

    t = time.perf_counter()
    cuda.compile_ptx(lambda x: None, "void(float32[::1])", cc=(9, 0))
    took["compile_ptx first (zygote-safe?)"] = time.perf_counter() - t
    took["driver started by it"] = float(driver.is_initialized)
for name, step in (
    ("context", lambda: cuda.current_context()),
    ("flush L2 (compile, 128 MB scratch, launch)", timed._flush_l2),
    (
        "gather (compile, launch)",
        lambda: timed._gather(cuda.to_device(np.zeros(4, np.float32)), np.zeros(1, np.int64)),
    ),
    ("hold (compile, launch)", timing.warm_hold),
    ("flush L2 again", timed._flush_l2),
):
    t = time.perf_counter()
    step()
    cuda.synchronize()
    took[name] = time.perf_counter() - t
print(json.dumps({k: round(v, 3) for k, v in took.items()}))
