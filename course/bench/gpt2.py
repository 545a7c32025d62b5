"""Lesson 11 benchmark: GPT-2 124M's forward pass from the course's kernels, beside PyTorch.

At the CS 483 report's attention shape (B 4, T 64, 12 heads of 64) and at B 4, T 1024: the
whole forward timed (CUDA events) for the optimized build (lesson 04's ``matmul_v6`` with the
tile, blocks per SM, split-K and stages chosen per shape, bias, GELU and the residual add fused into
its store; lesson 08's causal flash kernel), the same with ``matmul_v4``'s one tile, v4
without fusion (the epilogues as passes of their own: what fusion saves), and the naive one
(lesson 04's v1, three-kernel attention), on a GPU the optimized build replayed as one CUDA
graph (``Model(graph=True)``: one host call a forward instead of 111 launches), and PyTorch
eager float32 (TF32 off) on the same weights in the same run; each build's per-kernel
table (``course.measure.timeline``: CUDA events around every launch); the logits against
PyTorch's.  The simulator runs a micro config instead (times marked simulated).
"""

from __future__ import annotations

import numpy as np

from ..kernels import gpt2 as G
from ..measure import perf
from ..measure.timeline import Timeline
from ..measure.timing import benchmark
from ..platform import runtime

TITLE = "11 GPT-2 forward pass (CS 483 final report)"
BUILDS = {
    "optimized (matmul_v6 tiled per shape, fused epilogues, flash attention)": {},
    "matmul_v4 (one tile for every shape), fused epilogues": {"matmul": "v4"},
    "unfused (matmul_v4, then bias/GELU and residual passes)": {"matmul": "v4", "fuse": False},
    "naive (matmul_v1, three-kernel attention)": {"matmul": "v1_naive", "attention": "naive"},
}
OPTIMIZED, FUSED_V4, UNFUSED, NAIVE = BUILDS
GRAPH = "optimized, replayed as one CUDA graph (Model(graph=True))"


def run(report) -> None:
    lecture, gpu = runtime.profile() == "lecture", runtime.MODE == "gpu"
    cfg = G.Config() if lecture else G.MICRO
    shapes = [(4, 64), (4, 1024)] if lecture else [(1, 9)]
    params = G.jitter(G.init_params(cfg, seed=11), seed=12)
    rng = np.random.default_rng(11)
    torch = perf.peer("torch")
    report.data = {"config": cfg.__dict__, "shapes": {}}
    for B, T in shapes:
        tokens = rng.integers(0, cfg.vocab_size, (B, T))
        size, fl = f"B={B} T={T}", G.flops(cfg, B, T)
        entry = report.data["shapes"][size] = {"flops": fl, "builds": {}}
        logits = {}
        builds = dict(BUILDS, **({GRAPH: {"graph": True}} if gpu else {}))
        for label, opts in builds.items():
            model = G.Model(params, cfg, B, T, **opts)
            d_tok = model.tokens(tokens)
            slow = "naive" in label and lecture
            tl = Timeline()
            # the simulator: one forward, timed and traced at once (a micro model's
            # forward takes it 3-10 s); a GPU: timed forwards, then one traced
            try:
                t = benchmark(
                    (lambda: model(d_tok)) if gpu else (lambda: model(d_tok, run=tl.run)),
                    repeat=(3 if slow else 10) if gpu else None,
                    warmup=(1 if slow else 2) if gpu else None,
                    batch=1,
                )
            except Exception as e:  # the graph build alone may fail and be reported
                if label != GRAPH:
                    raise
                report.note(f"{size}: {GRAPH} could not run: {type(e).__name__}: {e}")
                model = None
                continue
            report.add(
                f"GPT-2 forward, {label}",
                t,
                flops=fl["matmul"] + fl["attention"],
                size=size,
                note="FLOPs: the matmuls and the causal half of attention",
            )
            if gpu and label != GRAPH:
                model(d_tok, run=tl.run)
            logits[label] = model.logits.copy_to_host()
            entry["builds"][label] = {
                "median_ms": t.median_ms,
                "kernels": tl.table(),
                "launches": sum(len(v) for v in tl.rows.values()),
            }
            if label == GRAPH:  # its kernels are the optimized build's, in one replay
                _graph_note(report, size, entry, model, logits)
                model = None
                continue
            report.section(
                f"{label}, {size}: per-kernel time (CUDA events around every "
                f"launch; {entry['builds'][label]['launches']} launches)",
                tl.markdown(),
            )
            model = None  # free its device arrays before the next build
        opt, naive = logits[OPTIMIZED], logits[NAIVE]
        entry["naive_vs_optimized"] = _rel(naive, opt)
        entry["unfused_vs_fused"] = _rel(logits[UNFUSED], logits[FUSED_V4])
        fused, unfused = entry["builds"][FUSED_V4], entry["builds"][UNFUSED]
        v6 = entry["builds"][OPTIMIZED]
        entry["v4_vs_optimized"] = _rel(logits[FUSED_V4], opt)
        report.note(
            f"{size}: matmul_v6 with the tile chosen per shape instead of v4's one tile: "
            f"{fused['median_ms']:.3g} -> {v6['median_ms']:.3g} ms; logits agree to "
            f"{entry['v4_vs_optimized']:.1e}"
        )
        report.note(
            f"{size}: fusing bias, GELU and the residual into matmul_v4's store: "
            f"{unfused['median_ms']:.3g} -> {fused['median_ms']:.3g} ms "
            f"({100 * (1 - fused['median_ms'] / unfused['median_ms']):.1f} % less), "
            f"{unfused['launches']} -> {fused['launches']} launches; logits agree to "
            f"{entry['unfused_vs_fused']:.1e}"
        )
        if torch is not None and gpu:
            fwd = torch_forward(params, cfg)
            tok = torch.as_tensor(tokens, device="cuda")
            torch.cuda.synchronize()
            row = report.add(
                "PyTorch eager float32 (TF32 off)",
                benchmark(lambda: fwd(tok), repeat=10, warmup=2, batch=1),
                kind="peer",
                flops=fl["matmul"] + fl["attention"],
                size=size,
            )
            entry["torch_ms"] = row["median_ms"]
            entry["ours_vs_torch_logits"] = _rel(opt, fwd(tok).cpu().numpy().reshape(opt.shape))
            entry["ratio_to_torch"] = entry["builds"][OPTIMIZED]["median_ms"] / row["median_ms"]
            graph = entry["builds"].get(GRAPH)
            if graph:
                entry["graph_ratio_to_torch"] = graph["median_ms"] / row["median_ms"]
            report.note(
                f"{size}: optimized / PyTorch = {entry['ratio_to_torch']:.2f}"
                + (
                    f" (replayed as one CUDA graph: {entry['graph_ratio_to_torch']:.2f})"
                    if graph
                    else ""
                )
                + f"; logits agree with PyTorch's to {entry['ours_vs_torch_logits']:.1e} "
                "(max |diff| / max |logit|)"
            )
        report.note(
            f"{size}: naive and optimized logits agree to {entry['naive_vs_optimized']:.1e}"
        )
    report.note(
        "a forward's time: one whole forward between two CUDA events, the host's "
        "launch time included (numba needs ~20-100 us of host time a launch, PyTorch "
        "~5-10 us: at T = 64 that, not the GPU, sets the time); the per-kernel tables "
        "are device time only"
    )
    if not gpu:
        report.note("simulator: a micro GPT-2 (1 layer, 2 heads, d_model 32); CPU times")


def _graph_note(report, size: str, entry: dict, model, logits: dict) -> None:
    """The graph build's line: launches recorded, time against the eager build, logits."""
    nodes = model.replayed.graph.nodes
    entry["builds"][GRAPH]["launches"] = nodes
    entry["graph_vs_optimized"] = _rel(logits[GRAPH], logits[OPTIMIZED])
    eager, replay = entry["builds"][OPTIMIZED]["median_ms"], entry["builds"][GRAPH]["median_ms"]
    report.note(
        f"{size}: the optimized forward recorded once as a CUDA graph ({nodes} kernels, "
        f"split-K's zeroing passes included) and replayed by one cuGraphLaunch: {eager:.3g} "
        f"-> {replay:.3g} ms; logits agree with the launch-by-launch forward's to "
        f"{entry['graph_vs_optimized']:.1e}"
    )


def _rel(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def torch_forward(params: dict, cfg: G.Config):
    """GPT-2's forward in PyTorch eager float32 with TF32 off, on the same weights."""
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    P = {k: torch.as_tensor(v, device="cuda") for k, v in params.items()}
    C, NH = cfg.n_embd, cfg.n_head

    @torch.no_grad()
    def fwd(tok):
        B, T = tok.shape
        x = (P["wte.weight"][tok] + P["wpe.weight"][:T]).view(B * T, C)
        for i in range(cfg.n_layer):
            h = lambda n: P[f"h.{i}.{n}"]  # noqa: E731
            a = F.layer_norm(x, (C,), h("ln_1.weight"), h("ln_1.bias"), 1e-5)
            qkv = torch.addmm(h("attn.c_attn.bias"), a, h("attn.c_attn.weight"))
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in qkv.split(C, 1))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(B * T, C)
            x = x + torch.addmm(h("attn.c_proj.bias"), y, h("attn.c_proj.weight"))
            m = F.layer_norm(x, (C,), h("ln_2.weight"), h("ln_2.bias"), 1e-5)
            m = F.gelu(torch.addmm(h("mlp.c_fc.bias"), m, h("mlp.c_fc.weight")), approximate="tanh")
            x = x + torch.addmm(h("mlp.c_proj.bias"), m, h("mlp.c_proj.weight"))
        x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
        return x @ P["wte.weight"].T

    return fwd
