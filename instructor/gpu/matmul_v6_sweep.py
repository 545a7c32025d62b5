"""#49's matmul sweep on one GPU: matmul_v6 (cp.async stages) against v5, cuBLAS and Triton.

    source .whl/prelude.sh && python instructor/gpu/matmul_v6_sweep.py OUT_DIR

Every candidate v6 setting (tile, blocks per SM, stages, k steps written out, split-K) at
every GPT-2 shape (T 1024 and T 64) and 4096 cubed, beside v5's table setting and the peers
(cuBLAS through PyTorch, TF32 off; Triton's tutorial kernel, input_precision="ieee", best
of its configs), each result checked against float64 on the first 64 rows.  The logits'
B is padded to 50,260 columns, as ``gpt2.Model`` pads it (16-byte rows); TFLOP/s count the
50,257 columns only.  Writes ``matmul-v6-sweep.json`` after every shape (a timeout keeps
what was measured).  The committed result (assets/benchmarks/matmul-v6-sweep-*.json) is
what ``course.kernels.matmul_shapes.TABLE`` is chosen from.
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

# (tile (BM, BN, BK, TM, TN), blocks per SM, stages, k steps written out)
CANDIDATES = [
    ((128, 128, 16, 8, 8), 2, 3, 16),
    ((128, 128, 16, 8, 8), 2, 4, 16),
    ((128, 128, 16, 8, 8), 2, 2, 16),
    ((128, 128, 32, 8, 8), 2, 3, 16),
    ((64, 128, 16, 8, 8), 3, 3, 16),
    ((64, 128, 16, 8, 8), 4, 3, 16),
    ((64, 128, 32, 8, 8), 3, 3, 16),
    ((128, 64, 16, 8, 8), 4, 3, 16),
    ((128, 128, 8, 8, 8), 2, 4, 8),
    ((128, 128, 16, 16, 8), 2, 3, 16),
    ((128, 128, 16, 8, 16), 2, 3, 16),
    ((128, 128, 8, 16, 8), 2, 4, 8),
    ((128, 256, 16, 8, 16), 1, 3, 16),
    ((64, 64, 16, 8, 8), 8, 3, 16),
]
SPLITS_T64 = (1, 2, 3, 4)
# --narrow: the second sweep, around the first one's winner, at the narrow T 1024 shapes
# (4096 x 768 x 768 fills 0.73 of a wave with 64 x 128 tiles at 4 an SM): more warps an SM
NARROW = [
    ((64, 128, 16, 8, 8), 4, 3, 16),
    ((64, 128, 16, 8, 8), 4, 2, 16),
    ((64, 128, 16, 8, 8), 4, 4, 16),
    ((64, 128, 16, 8, 8), 4, 3, 8),
    ((64, 128, 16, 4, 8), 3, 3, 16),
    ((32, 128, 16, 4, 8), 6, 3, 16),
    ((64, 64, 16, 4, 8), 6, 3, 16),
]
NARROW_SHAPES = ("qkv", "attention proj", "MLP fc")


def key(tile, per_sm, stages, steps, split) -> str:
    return f"{tuple(tile)} mb={per_sm} stages={stages} steps={steps} split={split}"


def tflops(fl: float, ms: float | None) -> float:
    return fl / ms / 1e9 if ms else float("nan")


def main() -> int:
    smoke = "--smoke" in sys.argv  # the simulator: one small shape, one small tile
    narrow = "--narrow" in sys.argv
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = Path(args[0] if args else "/tmp/matmul-v6")
    out.mkdir(parents=True, exist_ok=True)
    from course.platform import runtime  # first: it picks the simulator where there is no GPU

    name = str(runtime.device_info().get("name"))
    from numba import cuda

    from course.bench.matmul_gpt2 import SHAPES, SHAPES_T64, peers_at
    from course.kernels import matmul_shapes as S
    from course.kernels import matmul_v5 as v5
    from course.kernels import matmul_v6 as v6
    from course.measure.timing import benchmark

    result = {"device": name, "date": time.strftime("%Y-%m-%d"), "shapes": {}}
    start = time.time()
    rng = np.random.default_rng(49)
    shapes = {"smoke": (40, 36, 42)} if smoke else {**SHAPES, **SHAPES_T64}
    candidates = [((16, 16, 4, 4, 4), 1, 3, 4)] if smoke else NARROW if narrow else CANDIDATES
    if narrow:
        shapes = {k: v for k, v in shapes.items() if k in NARROW_SHAPES}
    for sname, (M, K, N) in shapes.items():
        Np = -(-N // 4) * 4
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = np.zeros((K, Np), np.float32)
        B[:, :N] = rng.uniform(-1, 1, (K, N))
        ref = A[:64].astype(np.float64) @ B.astype(np.float64)
        dA, dB = cuda.to_device(A), cuda.to_device(B)
        dC = cuda.device_array((M, Np), np.float32)
        fl = 2.0 * M * K * N
        row = result["shapes"][sname] = {"mkn": [M, K, N], "v6": {}, "err": {}}

        def timed(label, fn, row=row, dC=dC, ref=ref, fl=fl):
            try:
                t = benchmark(fn, repeat=10, warmup=2)
            except Exception as e:  # noqa: BLE001 - a setting this GPU cannot run
                row.setdefault("failed", []).append(f"{label}: {type(e).__name__}: {e}"[:300])
                return None
            got = dC.copy_to_host()[:64]
            err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            row["err"][label] = err
            if err > 1e-5:
                row.setdefault("wrong", []).append(f"{label}: rel. error {err:.2e}")
            return t.median_ms

        tile, per_sm, split, steps = ((16, 16, 4, 4, 4), 1, 1, 4) if smoke else S.choose(M, K, N)
        row["v5_setting"] = S.key(tile, per_sm, split, steps)
        row["v5"] = timed("v5", partial(v5.launch, dA, dB, dC, tile, per_sm, split, steps=steps))
        splits = (1, 2) if smoke else SPLITS_T64 if M <= 256 else (1, 2) if N <= 768 else (1,)
        splits = (1,) if narrow else splits
        for tile, per_sm, stages, steps in candidates:
            for split in splits:
                if split > 1 and K // split < (16 if smoke else 256):
                    continue
                k = key(tile, per_sm, stages, steps, split)
                ms = timed(
                    k,
                    partial(v6.launch, dA, dB, dC, tile, per_sm, split, steps=steps, stages=stages),
                )
                if ms is not None:
                    row["v6"][k] = ms
        row.update(peers_at(M, K, N, repeat=10))
        best = min(row["v6"], key=row["v6"].get) if row["v6"] else None
        tf = partial(tflops, fl)
        row["best_v6"] = best
        print(
            f"[{time.time() - start:5.0f} s] {sname:22s} v5 {tf(row['v5']):5.1f}  v6 "
            f"{tf(row['v6'].get(best)):5.1f} ({best})  cuBLAS "
            f"{tf(row.get('cublas', {}).get('ms')):5.1f}  Triton "
            f"{tf(row.get('triton', {}).get('ms')):5.1f} TFLOP/s"
            + (f"  WRONG: {row['wrong']}" if row.get("wrong") else ""),
            flush=True,
        )
        (out / f"matmul-v6-sweep{'-narrow' if narrow else ''}.json").write_text(
            json.dumps(result, indent=1)
        )
        dA = dB = dC = None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
