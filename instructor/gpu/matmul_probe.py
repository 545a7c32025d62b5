"""#49's matmul probe on one GPU: what an aligned B is worth at GPT-2's logits shape, and
where matmul_v5 stalls at 4096 cubed (Nsight Compute), for the next round of tuning.

    source .whl/prelude.sh && python instructor/gpu/matmul_probe.py OUT_DIR

(the H200 run of 2026-11-28 is committed under assets/profiles/matmul-probe-*)

1. logits, 4096 x 768 x 50257: v5 as the model runs it (N = 50257 is not a multiple of 4, so
   B's rows are not 16-byte aligned and v5 compiles its scalar loads) against the same
   product with B padded to 50260 zero columns (16-byte loads), cuBLAS beside them; TFLOP/s
   count only the 4096 x 768 x 50257 product's FLOPs.
2. ncu on one v5 launch at 4096 cubed: warp-state, scheduler, occupancy and memory sections.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np


def logits_rows() -> list[dict]:
    from numba import cuda

    from course.kernels import matmul_shapes as ms
    from course.kernels import matmul_v5 as v5
    from course.measure.timing import benchmark

    M, K, N = 4096, 768, 50257
    rng = np.random.default_rng(49)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    Bp = np.zeros((K, N + 3), np.float32)
    Bp[:, :N] = B
    dA, dB, dBp = cuda.to_device(A), cuda.to_device(B), cuda.to_device(Bp)
    dC, dCp = cuda.device_array((M, N), np.float32), cuda.device_array((M, N + 3), np.float32)
    tile, per_sm, split, steps = ms.choose(M, K, N)
    flops = 2.0 * M * K * N
    ref = A[:256].astype(np.float64) @ B.astype(np.float64)
    rows = []
    for label, b, c in (
        ("v5, B as is (N = 50257: scalar loads)", dB, dC),
        ("v5, B padded to 50260 (16-byte loads)", dBp, dCp),
    ):
        for st in sorted({steps, 4, 8}):
            t = benchmark(
                lambda b=b, c=c, st=st: v5.launch(dA, b, c, tile, per_sm, split, steps=st),
                repeat=10,
                warmup=2,
                batch=1,
            )
            got = c.copy_to_host()[:256, :N]
            err = float(np.abs(got - ref).max() / np.abs(ref).max())
            rows.append(
                {
                    "variant": label,
                    "tile": list(tile),
                    "per_sm": per_sm,
                    "steps": st,
                    "aligned": v5.aligned(dA, b),
                    "median_ms": t.median_ms,
                    "tflops": flops / t.median_ms / 1e9,
                    "rel_error": err,
                }
            )
            print(rows[-1], flush=True)
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        tA, tB = torch.as_tensor(A, device="cuda"), torch.as_tensor(B, device="cuda")
        t = benchmark(lambda: tA @ tB, repeat=10, warmup=2, batch=1)
        rows.append(
            {
                "variant": "cuBLAS via PyTorch (TF32 off)",
                "median_ms": t.median_ms,
                "tflops": flops / t.median_ms / 1e9,
            }
        )
        print(rows[-1], flush=True)
    except ImportError:
        pass
    return rows


ONE_LAUNCH = """
import numpy as np
from numba import cuda
from course.kernels import matmul_v5 as v5
n = 4096
a = cuda.to_device(np.random.default_rng(1).standard_normal((n, n), dtype=np.float32))
b = cuda.to_device(np.random.default_rng(2).standard_normal((n, n), dtype=np.float32))
c = cuda.device_array((n, n), np.float32)
v5.launch(a, b, c, (128, 128, 16, 8, 8), 2, 1, steps=16)
cuda.synchronize()
"""


def ncu_text() -> str:
    sections = [
        "WarpStateStats",
        "SchedulerStats",
        "Occupancy",
        "LaunchStats",
        "MemoryWorkloadAnalysis",
        "ComputeWorkloadAnalysis",
        "SpeedOfLight",
    ]
    cmd = ["ncu", "--target-processes", "all", "-k", "regex:matmul_v5", "-c", "1"]
    for s in sections:
        cmd += ["--section", s]
    cmd += [sys.executable, "-c", ONE_LAUNCH]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        return r.stdout + "\n" + r.stderr[-3000:]
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"ncu did not run: {e}"


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/matmul-probe")
    out.mkdir(parents=True, exist_ok=True)
    from numba import cuda

    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else name
    rows = logits_rows()
    (out / "matmul-probe-logits.json").write_text(
        json.dumps({"device": name, "rows": rows}, indent=1)
    )
    text = ncu_text()
    (out / "matmul-probe-ncu.txt").write_text(f"device {name}\n{text}")
    print(text[-6000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
