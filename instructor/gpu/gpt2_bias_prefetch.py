"""#49: the bias read once a column (v5/v6 ``COL``) and flash's K, V copied ahead (cp.async,
head size <= 64), each beside what it replaced, in one run.

    source .whl/prelude.sh && python instructor/gpu/gpt2_bias_prefetch.py OUT_DIR

GPT-2 124M (random weights, the bench's seeds), B 4, T 1024, on one GPU, in one process:
- flash attention read in place at GPT-2's shape (4 x 12 heads of 64, causal), the build
  that copies K and V ahead beside the one that loads them through registers; both against
  float64 for the first batch;
- the forward as built now, beside the same with the old epilogues (each store reads the
  bias itself), with the old flash, both old, as one CUDA graph, and PyTorch eager float32
  (TF32 off); logits of each against float64; per-kernel tables.
Prints as it goes and writes OUT_DIR/gpt2-bias-prefetch.json (kept after every step).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def main() -> int:
    from course.platform import runtime  # first: it picks the simulator where there is no GPU

    smoke = runtime.MODE != "gpu"     # the simulator: a tiny model, no peer, to try the script
    import numpy as np
    from numba import cuda

    from course.bench.gpt2 import torch_forward
    from course.kernels import attention as attn
    from course.kernels import attention_common as ac
    from course.kernels import attention_tuned as at
    from course.kernels import gpt2 as G
    from course.kernels import matmul_v5 as v5
    from course.kernels import matmul_v6 as v6
    from course.measure.timeline import Timeline
    from course.measure.timing import benchmark

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"device": runtime.device_info().get("name")}

    def keep(key, value):
        res[key] = value
        print(key, json.dumps(value)[:1500], flush=True)
        (out / "gpt2-bias-prefetch.json").write_text(json.dumps(res, indent=1))

    cfg, B, T = (G.TINY, 1, 9) if smoke else (G.Config(), 4, 1024)
    hs, NH = cfg.n_embd // cfg.n_head, cfg.n_head
    TF = 70 if smoke else T          # flash's sequence length (two key tiles in the simulator)

    # 1. flash in place, K and V copied ahead or not
    rng = np.random.default_rng(7)
    qkv_h = rng.uniform(-1, 1, (B * TF, 3 * cfg.n_embd)).astype(np.float32)
    qkv = cuda.to_device(qkv_h)
    y = cuda.device_array((B * TF, cfg.n_embd), np.float32)
    C = cfg.n_embd
    per_head = [qkv_h[:TF, i * C:(i + 1) * C].reshape(1, TF, NH, hs).transpose(0, 2, 1, 3)
                for i in range(3)]
    want = ac.reference(*per_head, causal=True).transpose(0, 2, 1, 3).reshape(TF, C)
    builds = {"copied ahead (cp.async)": at.make_flash_tuned(hs),
              "through registers": at.make_flash_tuned(hs, prefetch=False)}
    flash = {}
    for label, k in builds.items():
        at._TUNED[hs] = k
        ms = benchmark(lambda: attn.flash_in_place(qkv, y, NH, TF),
                       repeat=None if smoke else 30).median_ms
        got = y.copy_to_host()
        flash[label] = {"ms": ms, "shared_bytes": k.shared_bytes,
                        "vs_float64": float(np.abs(got[:TF] - want).max() / np.abs(want).max()),
                        "tflops_causal_half": 4 * B * NH * TF * TF * hs / 2 / ms / 1e9}
        keep("flash in place", flash)
    at._TUNED[hs] = builds["copied ahead (cp.async)"]

    # 2. the model: now, old epilogues, old flash, both old
    params = G.jitter(G.init_params(cfg, seed=11), seed=12)
    tokens = np.random.default_rng(11).integers(0, cfg.vocab_size, (B, T))
    ref = G.reference(tokens, params, cfg).reshape(B * T, -1)     # float64
    if smoke:
        keep("torch_ms", 1.0)
    else:
        import torch

        fwd = torch_forward(params, cfg)
        tok = torch.as_tensor(tokens, device="cuda")
        keep("torch_ms", benchmark(lambda: fwd(tok), repeat=10, warmup=2, batch=1).median_ms)
        keep("torch_logits_vs_float64",
             float(np.abs(fwd(tok).cpu().numpy().reshape(ref.shape) - ref).max()
                   / np.abs(ref).max()))

    def old_tiled(self, out, inp, weight, bias, gelu, residual, run):
        # the epilogues before COL: each store reads the bias itself
        (M, K), N = inp.shape, out.shape[1]
        atomic = bias is not None and not gelu
        tile, per_sm, split, steps, stages = self.tiled_setting(M, K, N, atomic)
        if bias is None:
            store, add, Cx = G.store_within if weight.shape[1] != N else None, None, out
        elif gelu:
            store, add, Cx = G.store_bias_gelu, None, (out, bias)
        elif residual or split > 1:
            store, add, Cx = G.store_bias_residual, G.add_part, (out, bias)
        else:
            store, add, Cx = G.store_bias, None, (out, bias)
        name = self.matmul_variant
        what = "" if bias is None else " + bias (old epilogue)" if not gelu and not residual \
            else " + bias + GELU (old epilogue)" if gelu else " + bias + residual (old epilogue)"
        more = {"stages": stages} if name == "v6" else {}
        run(f"matmul_{name}{what}", lambda: (v6 if name == "v6" else v5).launch(
            inp, weight, Cx, tile, per_sm, split, store=store, add=add,
            zero=split > 1 and not residual, steps=steps, stream=self.stream, **more))

    def rel(a):
        return float(np.abs(a.reshape(ref.shape) - ref).max() / np.abs(ref).max())

    new_tiled = G.Model.tiled

    def build(label, epilogue="new", flash_build="copied ahead (cp.async)", **opts):
        G.Model.tiled = new_tiled if epilogue == "new" else old_tiled
        at._TUNED[hs] = builds[flash_build]
        try:
            model = G.Model(params, cfg, B, T, **opts)
            d_tok = model.tokens(tokens)
            ms = benchmark(lambda: model(d_tok), repeat=10, warmup=2, batch=1).median_ms
            row = {"ms": ms, "vs_torch": ms / res["torch_ms"],
                   "logits_vs_float64": rel(model.logits.copy_to_host())}
            if not opts.get("graph") or smoke:
                tl = Timeline()
                model(d_tok, run=tl.run)
                row["kernels"] = {r["kernel"]: round(r["total_ms"], 4) for r in tl.table()}
            keep(label, row)
        finally:
            G.Model.tiled = new_tiled
            at._TUNED[hs] = builds["copied ahead (cp.async)"]

    build("now")
    if not smoke:
        build("now, graph", graph=True)
    build("old epilogues", epilogue="old")
    build("old flash", flash_build="through registers")
    build("both old", epilogue="old", flash_build="through registers")
    if not smoke:
        build("now again")                  # the first row's drift over the run
        keep("torch_ms_again", benchmark(lambda: fwd(tok), repeat=10, warmup=2,
                                         batch=1).median_ms)
    ok = all(v["vs_float64"] < 1e-5 for v in flash.values()) and all(
        res[k]["logits_vs_float64"] < 1e-4 for k in res if isinstance(res[k], dict)
        and "logits_vs_float64" in res[k])
    print("RESULT", "ok" if ok else "WRONG", flush=True)
    return 0 if math.isfinite(res["torch_ms"]) else 1


if __name__ == "__main__":
    sys.exit(main())
