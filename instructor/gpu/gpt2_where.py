"""#49: where PyTorch's GPT-2 forward spends its time, kernel by kernel, beside ours.

    source .whl/prelude.sh && python instructor/gpu/gpt2_where.py OUT_DIR
    ... ncu -k regex:NAME --launch-skip 1 --launch-count 1 \
            python instructor/gpu/gpt2_where.py OUT_DIR --one

GPT-2 124M (random weights, the bench's seeds), B 4, T 1024, one GPU, one process:
PyTorch eager float32 (TF32 off) under torch.profiler (three forwards after a warm-up; the
device time of each kernel name a forward), and the course's model by its timeline (the same
kernels' device time a forward).  Writes OUT_DIR/gpt2-where.json.

``--one``: for Nsight Compute - layernorm (4096 x 768), the MLP fc matmul with its fused
bias + GELU epilogue and the same matmul with a plain store, each launched twice (ncu's
``--launch-skip 1`` profiles the second, warm launch).
"""

from __future__ import annotations

import sys
from collections import defaultdict


def main() -> int:
    from course.platform import runtime  # first: it picks the simulator where there is no GPU

    smoke = runtime.MODE != "gpu"
    import numpy as np
    from gpt2_run import bench_gpt2, keeper
    from numba import cuda

    from course.kernels import gpt2 as G
    from course.kernels import matmul_shapes as ms
    from course.kernels import matmul_v6 as v6

    cfg, B, T, params, tokens = bench_gpt2(smoke)

    if "--one" in sys.argv:     # three kernels, twice each, for ncu
        rng = np.random.default_rng(5)
        C, M = cfg.n_embd, B * T
        x = cuda.to_device(rng.standard_normal((M, C)).astype(np.float32))
        w = cuda.to_device(rng.standard_normal(C).astype(np.float32))
        y = cuda.device_array((M, C), np.float32)
        W = cuda.to_device(rng.uniform(-1, 1, (C, 4 * C)).astype(np.float32))
        bias = cuda.to_device(rng.uniform(-1, 1, 4 * C).astype(np.float32))
        h = cuda.device_array((M, 4 * C), np.float32)
        tile, per_sm, split, steps, stages = ms.choose_v6(M, C, 4 * C, atomic=False)
        if smoke:
            tile, per_sm, steps = G.SIM_TILE, 1, 4
        for _ in range(2):
            G.layernorm_kernel(C)[M, G.LN_TPB](y, x, w, w)
            v6.launch(x, W, (h, bias), tile, per_sm, 1, store=G.store_bias_gelu, steps=steps,
                      stages=stages)
            v6.launch(x, W, h, tile, per_sm, 1, steps=steps, stages=stages)
        cuda.synchronize()
        print("RESULT ok", flush=True)
        return 0

    res, keep = keeper("gpt2-where.json", width=6000)
    keep("B", B)
    keep("T", T)
    from course.measure.timeline import Timeline

    model = G.Model(params, cfg, B, T)
    d_tok = model.tokens(tokens)
    model(d_tok)
    tl = Timeline()
    model(d_tok, run=tl.run)
    keep("course_ms_by_kernel", {r["kernel"]: round(r["total_ms"], 4) for r in tl.table()})
    keep("course_sum_ms", round(sum(res["course_ms_by_kernel"].values()), 3))
    if not smoke:
        import torch
        from torch.profiler import ProfilerActivity, profile

        from course.bench.gpt2 import torch_forward

        fwd = torch_forward(params, cfg)
        tok = torch.as_tensor(tokens, device="cuda")
        for _ in range(3):
            fwd(tok)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fwd(tok)
            torch.cuda.synchronize()
        per: dict = defaultdict(lambda: [0.0, 0])
        for e in prof.events():
            if e.device_type.name == "CUDA":
                per[e.name][0] += e.device_time / 1000 / 3       # us -> ms, a forward
                per[e.name][1] += 1
        rows = sorted(per.items(), key=lambda kv: -kv[1][0])
        keep("torch_ms_by_kernel", {k[:160]: {"ms": round(v[0], 4), "launches": v[1] // 3}
                                    for k, v in rows[:30]})
        keep("torch_sum_ms", round(sum(v[0] for v in per.values()), 3))
    print("RESULT ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
