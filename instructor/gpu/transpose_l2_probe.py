"""#47's next step, measured: does the transpose's bank conflict show in time once its data
sits in L2 (no DRAM to hide it)?  Given kernel and course solution, same run, same card.

    source .whl/prelude.sh && python instructor/gpu/transpose_l2_probe.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main() -> int:
    from numba import cuda

    from course.grading.classroom.solutions import defined
    from course.measure.timing import benchmark

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/transpose-probe")
    out.mkdir(parents=True, exist_ok=True)
    given, _ = defined("tune_transpose", student=True)
    solution, _ = defined("tune_transpose", student=False)
    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else name
    rows = []
    for n in (512, 1024, 2048, 4096):
        a = cuda.to_device(np.random.default_rng(n).standard_normal((n, n), dtype=np.float32))
        b = cuda.device_array((n, n), np.float32)
        grid, block = ((n + 31) // 32, (n + 31) // 32), (32, 8)
        ms = {}
        for label, k in (("given", given), ("solution", solution)):
            k[grid, block](a, b)
            assert np.array_equal(b.copy_to_host(), a.copy_to_host().T), label
            t = benchmark(lambda k=k, g=grid, a=a, b=b: k[g, (32, 8)](a, b), repeat=30, warmup=3)
            ms[label] = t.median_ms
        rows.append(
            {"n": n, "MB_in_out": 8 * n * n / 1e6, **ms, "speedup": ms["given"] / ms["solution"]}
        )
        print(rows[-1], flush=True)
    (out / "transpose-l2-probe.json").write_text(
        json.dumps({"device": name, "rows": rows}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
