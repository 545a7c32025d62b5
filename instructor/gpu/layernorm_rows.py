"""#49: lesson 11's layernorm with the row held in registers, beside the strided-loop build it
replaced and PyTorch's, alone and in the model, one run.

    source .whl/prelude.sh && python instructor/gpu/layernorm_rows.py OUT_DIR

- layernorm alone on 4096 rows of 768 (GPT-2 B 4 T 1024): ``gpt2.layernorm_kernel(768)`` (each
  thread keeps its 12 elements in registers: one read of the row), the build before it (the
  same tree sums, the row read three times by strided loops, copied below), and PyTorch's
  F.layer_norm; each against float64;
- GPT-2 124M B 4 T 1024 forward with each of the two builds (per-kernel table) and PyTorch.
Writes OUT_DIR/layernorm-rows.json after every step.
"""

# ruff: noqa: F821 - strided_layernorm reads cuda, float32, LN_TPB, row_sum set by main()
from __future__ import annotations

import math
import sys


def strided_layernorm(out, inp, weight, bias):  # noqa: D103 - its names: main() sets them
    # the build before: the row read three times, by loops of unknown length
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    C = inp.shape[1]
    buf = cuda.shared.array(LN_TPB, float32)
    acc = float32(0.0)
    for c in range(t, C, LN_TPB):
        acc += inp[row, c]
    buf[t] = acc
    mean = row_sum(buf, t) / float32(C)
    acc = float32(0.0)
    for c in range(t, C, LN_TPB):
        d = inp[row, c] - mean
        acc += d * d
    cuda.syncthreads()
    buf[t] = acc
    rstd = float32(1.0) / math.sqrt(row_sum(buf, t) / float32(C) + float32(1e-5))
    for c in range(t, C, LN_TPB):
        out[row, c] = (inp[row, c] - mean) * rstd * weight[c] + bias[c]


def main() -> int:
    from course.platform import runtime  # first: it picks the simulator where there is no GPU

    smoke = runtime.MODE != "gpu"
    import numpy as np
    from numba import cuda, float32

    from course.kernels import gpt2 as G
    from course.measure.timeline import Timeline
    from course.measure.timing import benchmark

    # the old kernel's names, as module globals (the simulator swaps a global cuda)
    globals().update(cuda=cuda, float32=float32, LN_TPB=G.LN_TPB, row_sum=G.row_sum)
    strided = cuda.jit(strided_layernorm)
    LN_TPB = G.LN_TPB

    from gpt2_run import bench_gpt2, keeper

    res, keep = keeper("layernorm-rows.json", width=1200)
    cfg, B, T, params, tokens = bench_gpt2(smoke)
    R, C = B * T, cfg.n_embd
    rng = np.random.default_rng(5)
    xh = (rng.standard_normal((R, C)) * 3 + 1).astype(np.float32)
    wh, bh = (rng.standard_normal(C).astype(np.float32) for _ in range(2))
    x, w, b = cuda.to_device(xh), cuda.to_device(wh), cuda.to_device(bh)
    y = cuda.device_array((R, C), np.float32)
    xs = xh.astype(np.float64)
    ref = (xs - xs.mean(1, keepdims=True)) / np.sqrt(xs.var(1, keepdims=True) + 1e-5) * wh + bh
    alone = {}
    for label, k in (("registers", G.layernorm_kernel(C)), ("strided loops", strided)):
        ms = benchmark(lambda k=k: k[R, LN_TPB](y, x, w, b), repeat=None if smoke else 50).median_ms
        alone[label] = {"us": 1000 * ms,
                        "err": float(np.abs(y.copy_to_host() - ref).max() / np.abs(ref).max())}
        keep("alone", alone)
    if not smoke:
        import torch
        import torch.nn.functional as F

        tx, tw, tb = (torch.as_tensor(a, device="cuda") for a in (xh, wh, bh))
        ms = benchmark(lambda: F.layer_norm(tx, (C,), tw, tb, 1e-5), repeat=50).median_ms
        got = F.layer_norm(tx, (C,), tw, tb, 1e-5).cpu().numpy()
        alone["PyTorch F.layer_norm"] = {"us": 1000 * ms,
                                         "err": float(np.abs(got - ref).max() / np.abs(ref).max())}
        keep("alone", alone)
        floor_us = 2 * R * C * 4 / 4248.7e9 * 1e6     # read + write at the measured copy rate
        keep("floor_us", floor_us)

    want = G.reference(tokens, params, cfg).reshape(R, -1)
    if not smoke:
        from course.bench.gpt2 import torch_forward

        fwd = torch_forward(params, cfg)
        tok = torch.as_tensor(tokens, device="cuda")
        keep("torch_ms", benchmark(lambda: fwd(tok), repeat=10, warmup=2, batch=1).median_ms)
    real = G.layernorm_kernel
    for label, pick in (("registers", real), ("strided loops", lambda C: strided),
                        ("registers again", real)):
        G.layernorm_kernel = pick
        try:
            model = G.Model(params, cfg, B, T)
            d_tok = model.tokens(tokens)
            ms = benchmark(lambda m=model, d=d_tok: m(d), repeat=10, warmup=2,
                           batch=1).median_ms
            tl = Timeline()
            model(d_tok, run=tl.run)
            got = model.logits.copy_to_host()
            keep(f"model, {label}", {
                "ms": ms, "vs_torch": ms / res.get("torch_ms", ms),
                "logits_vs_float64": float(np.abs(got - want).max() / np.abs(want).max()),
                "kernels": {r["kernel"]: round(r["total_ms"], 4) for r in tl.table()}})
        finally:
            G.layernorm_kernel = real
    ok = all(v["err"] < 1e-5 for v in alone.values())
    print("RESULT", "ok" if ok else "WRONG", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
