"""What a measurer's GPU warm-up (``timed.warm_up``) spends its second on, in a fresh
process: the CUDA context, then each helper kernel's compile and first launch (#45).

    python instructor/gpu/warmup_parts.py        # prints one JSON line
"""

import json
import time

t = time.perf_counter()
import numpy as np  # noqa: E402

import course  # noqa: E402, F401
from numba import cuda  # noqa: E402

from course.exercises import timed  # noqa: E402
from course.measure import timing  # noqa: E402

took = {"imports": time.perf_counter() - t}
for name, step in (
    ("context", lambda: cuda.current_context()),
    ("flush L2 (compile, 128 MB scratch, launch)", timed._flush_l2),
    ("gather (compile, launch)", lambda: timed._gather(cuda.to_device(np.zeros(4, np.float32)), np.zeros(1, np.int64))),
    ("hold (compile, launch)", timing.warm_hold),
    ("flush L2 again", timed._flush_l2),
):
    t = time.perf_counter()
    step()
    cuda.synchronize()
    took[name] = time.perf_counter() - t
print(json.dumps({k: round(v, 3) for k, v in took.items()}))
