"""Lesson 04's matmul at every GPT-2 shape: v5 and v6 per shape beside cuBLAS, Triton and v4.

``SHAPES`` are the matrix products of one GPT-2 small forward pass at 4,096 tokens (and
``SHAPES_T64`` at 256), ``sweep_shapes`` times every v5 setting (tile, blocks per SM,
split-K) at each of them beside the peers (``peers_at``: cuBLAS through PyTorch, Triton's
tutorial kernel), and ``shapes_section`` adds the chosen setting's rows to lesson 04's
report (``matmul.py``, the square N = 4096 benchmark).
"""

from __future__ import annotations

import itertools

import numpy as np

from ..kernels import matmul
from ..measure.timing import benchmark
from ..platform import runtime

SHAPES = {
    "square 4096": (4096, 4096, 4096),
    "qkv": (4096, 768, 2304),
    "attention proj": (4096, 768, 768),
    "MLP fc": (4096, 768, 3072),
    "MLP proj": (4096, 3072, 768),
    "logits": (4096, 768, 50257),
}
SHAPES_T64 = {f"{k} (T 64)": (256, K, N) for k, (M, K, N) in SHAPES.items() if k != "square 4096"}
TRITON_CONFIGS = [
    (128, 128, 32, 8, 3),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (64, 64, 32, 4, 4),
    (128, 128, 16, 8, 4),
]  # BM, BN, BK, warps, stages


def _triton_kernel():
    """The grouped-tile matmul of Triton's tutorial, FP32 with input_precision="ieee"."""
    import triton
    import triton.language as tl

    @triton.jit
    def mm(
        a,
        b,
        c,
        M,
        N,
        K,
        sam,
        sak,
        sbk,
        sbn,
        scm,
        scn,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        GROUP: tl.constexpr,
    ):
        pid = tl.program_id(0)
        npm, npn = tl.cdiv(M, BM), tl.cdiv(N, BN)
        in_group = GROUP * npn
        first = (pid // in_group) * GROUP
        size = min(npm - first, GROUP)
        pm = first + ((pid % in_group) % size)
        pn = (pid % in_group) // size
        om = (pm * BM + tl.arange(0, BM)) % M
        on = (pn * BN + tl.arange(0, BN)) % N
        ok = tl.arange(0, BK)
        ap = a + om[:, None] * sam + ok[None, :] * sak
        bp = b + ok[:, None] * sbk + on[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            x = tl.load(ap, mask=ok[None, :] < K - k * BK, other=0.0)
            y = tl.load(bp, mask=ok[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(x, y, acc, input_precision="ieee")
            ap += BK * sak
            bp += BK * sbk
        cm, cn = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN)
        tl.store(
            c + cm[:, None] * scm + cn[None, :] * scn,
            acc,
            mask=(cm[:, None] < M) & (cn[None, :] < N),
        )

    def run(A, B, C, cfg):
        BM, BN, BK, warps, stages = cfg
        M, K = A.shape
        N = B.shape[1]
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        mm[grid](
            A,
            B,
            C,
            M,
            N,
            K,
            A.stride(0),
            A.stride(1),
            B.stride(0),
            B.stride(1),
            C.stride(0),
            C.stride(1),
            BM=BM,
            BN=BN,
            BK=BK,
            GROUP=8,
            num_warps=warps,
            num_stages=stages,
        )

    return run


def _torch_inputs(M, K, N, seed=0):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    A = torch.rand((M, K), device="cuda", generator=g) * 2 - 1
    B = torch.rand((K, N), device="cuda", generator=g) * 2 - 1
    return A, B, torch.empty((M, N), device="cuda")


def peers_at(M, K, N, triton_configs=TRITON_CONFIGS, repeat=10) -> dict:
    """ms of cuBLAS (torch, TF32 off) and of Triton's best config at one shape, with the
    relative error of each against float64 on the first rows."""
    from ..measure import perf

    torch = perf.peer("torch")
    out = {}
    if torch is None:
        return out
    torch.backends.cuda.matmul.allow_tf32 = False
    A, B, C = _torch_inputs(M, K, N)
    ref = A[:64].double() @ B.double()
    err = lambda: float(((C[:64].double() - ref).norm() / ref.norm()).item())  # noqa: E731
    t = perf.time_peer(torch, lambda: torch.matmul(A, B, out=C), repeat=repeat)
    out["cublas"] = {"ms": t.median_ms, "err": err()}
    try:
        run = _triton_kernel()
    except ImportError:
        return out
    best = None
    for cfg in triton_configs:
        try:
            t = perf.time_peer(torch, lambda: run(A, B, C, cfg), repeat=repeat)
        except Exception as e:  # a config that does not fit this GPU
            out.setdefault("triton_failed", []).append(f"{cfg}: {type(e).__name__}")
            continue
        e = err()
        out.setdefault("triton_all", {})[str(cfg)] = t.median_ms
        if e < 1e-4 and (best is None or t.median_ms < best[0]):
            best = (t.median_ms, cfg, e)
    if best:
        out["triton"] = {"ms": best[0], "config": list(best[1]), "err": best[2]}
    return out


def _rel_err(got, A, B, rows=64):
    ref = A[:rows].astype(np.float64) @ B.astype(np.float64)
    return float(np.linalg.norm(got[:rows] - ref) / np.linalg.norm(ref))


def sweep_shapes(shapes: dict | None = None, repeat: int = 10) -> dict:
    """Every candidate v5 setting (tile, blocks per SM, split-K) at every shape, beside v4's
    default, cuBLAS and Triton: {shape name: {"mkn", "v4", "v5": {setting: ms}, peers}}."""
    from ..kernels import matmul_shapes as S
    from ..kernels import matmul_tuned as mt
    from ..kernels import matmul_v5 as v5

    shapes = shapes or {**SHAPES, **SHAPES_T64}
    out = {}
    for name, (M, K, N) in shapes.items():
        A, B, d_A, d_B, d_C = matmul.inputs(M, K, N)
        row = out[name] = {"mkn": [M, K, N], "v5": {}, "v5_err": {}}
        t = benchmark(lambda: mt.launch("v4", d_A, d_B, d_C), repeat=repeat, warmup=1)
        row["v4"] = t.median_ms
        row["v4_err"] = _rel_err(d_C.copy_to_host(), A, B)
        for (tile, per_sm), split, steps in itertools.product(
            S.CANDIDATES, S.SPLITS if N < 50000 else (1,), S.STEPS
        ):
            if (split > 1 and K // split < 128) or tile[2] % steps:
                continue
            key = S.key(tile, per_sm, split, steps)
            if True:
                try:
                    t = benchmark(
                        lambda: v5.launch(d_A, d_B, d_C, tile, per_sm, split, steps=steps),
                        repeat=repeat,
                        warmup=1,
                    )
                except Exception as e:
                    row.setdefault("failed", []).append(f"{key}: {type(e).__name__}: {e}"[:300])
                    continue
                row["v5"][key] = t.median_ms
                row["v5_err"][key] = _rel_err(d_C.copy_to_host(), A, B)
        row.update(peers_at(M, K, N, repeat=repeat))
        best = min(row["v5"], key=row["v5"].get)
        fl = 2 * M * K * N
        print(
            f"{name:24s} {M}x{K}x{N}: v4 {fl / row['v4'] / 1e9:6.1f}  best v5 "
            f"{fl / row['v5'][best] / 1e9:6.1f} ({best})  cuBLAS "
            f"{fl / row.get('cublas', {}).get('ms', np.nan) / 1e9:6.1f}  Triton "
            f"{fl / row.get('triton', {}).get('ms', np.nan) / 1e9:6.1f} TFLOP/s",
            flush=True,
        )
        d_A = d_B = d_C = None  # free this shape's device arrays before the next
    return out


def shapes_section(report) -> None:
    """v4, v5 and v6 (the settings matmul_shapes.TABLE and V6_TABLE hold) at every GPT-2 shape
    beside cuBLAS and Triton, with each shape's floor and v6's waves; in the simulator, a
    19 x 13 x 21 stand-in (CPU times)."""
    from ..kernels import matmul_shapes as S
    from ..kernels import matmul_tuned as mt
    from ..kernels import matmul_v5 as v5
    from ..kernels import matmul_v6 as v6

    gpu = runtime.MODE == "gpu"
    shapes = SHAPES if gpu else {"odd stand-in": (19, 13, 21)}
    lines = [
        "| shape (M x K x N) | floor ms | cuBLAS | Triton | v4 | v5 | v6 | v6 setting | "
        "v6 waves (fill) | v6 / Triton |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    report.data["shapes"] = {}
    sim_tile = (16, 16, 4, 4, 4)
    for name, (M, K, N) in shapes.items():
        A, B, d_A, d_B, d_C = matmul.inputs(M, K, N)
        fl, nb = 2 * M * K * N, 4 * (M * K + K * N + M * N)
        size = f"{name} {M}x{K}x{N}"
        tile, per_sm, split, steps = S.choose(M, K, N, atomic=True) if gpu else (sim_tile, 1, 2, 4)
        tile6, per_sm6, split6, steps6, stages = (
            S.choose_v6(M, K, N, atomic=True) if gpu else (sim_tile, 1, 2, 4, 3)
        )
        setting5 = f"{tile} {per_sm}/SM split {split} steps {steps}"
        setting6 = f"{tile6} {per_sm6}/SM split {split6} steps {steps6} stages {stages}"
        rows = {}
        kernels = {
            "v4": (
                "",
                lambda: mt.launch("v4", d_A, d_B, d_C, **({} if gpu else {"tile": sim_tile})),
            ),
            "v5": (
                setting5 + "; ",
                lambda: v5.launch(d_A, d_B, d_C, tile, per_sm, split, steps=steps),
            ),
            "v6": (
                setting6 + "; ",
                lambda: v6.launch(
                    d_A, d_B, d_C, tile6, per_sm6, split6, steps=steps6, stages=stages
                ),
            ),
        }
        for variant, (what, fn) in kernels.items():
            t = benchmark(fn, repeat=20 if gpu else 1, warmup=2 if gpu else 0)
            rows[variant] = report.add(
                f"{variant} at {name}",
                t,
                flops=fl,
                nbytes=nb,
                size=size,
                note=f"{what}rel. error {_rel_err(d_C.copy_to_host(), A, B):.1e}",
            )
        peers = peers_at(M, K, N, repeat=20) if gpu else {}
        for lib, label in (
            ("cublas", "cuBLAS SGEMM via PyTorch (TF32 off)"),
            (
                "triton",
                f'Triton FP32 (input_precision="ieee"), best of {len(TRITON_CONFIGS)} configs',
            ),
        ):
            if lib in peers:
                from ..measure.timing import Timing

                rows[lib] = report.add(
                    f"{label} at {name}",
                    Timing([peers[lib]["ms"]]),
                    flops=fl,
                    nbytes=nb,
                    size=size,
                    kind="peer",
                    note=f"rel. error {peers[lib]['err']:.1e}"
                    + (f"; config {peers[lib]['config']}" if lib == "triton" else ""),
                )
        w = S.waves(M, N, tile6[0], tile6[1], per_sm6, split6)
        tf = {k: r["tflops"] for k, r in rows.items()}
        ratio = rows["triton"]["median_ms"] / rows["v6"]["median_ms"] if "triton" in rows else None
        report.data["shapes"][name] = {
            "mkn": [M, K, N],
            "tflops": tf,
            "ms": {k: r["median_ms"] for k, r in rows.items()},
            "floor_ms": rows["v6"]["floor_ms"],
            "setting": setting6,
            "v5_setting": setting5,
            "waves": w,
        }
        f = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
        lines.append(
            f"| {name} {M} x {K} x {N} | {rows['v6']['floor_ms']:.3g} | "
            f"{f(tf.get('cublas'))} | {f(tf.get('triton'))} | {f(tf['v4'])} | "
            f"{f(tf['v5'])} | {f(tf['v6'])} | {setting6} | {w['waves']:.2f} ({w['fill']:.0%}) | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} |"
        )
    behind = [
        n for n, d in report.data["shapes"].items() if d["ms"].get("triton", 1e9) < d["ms"]["v6"]
    ]
    if gpu and "square 4096" in report.data["shapes"]:
        report.note(
            f"v6 at 4096 cubed: {report.data['shapes']['square 4096']['tflops']['v6']:.1f} "
            f"TFLOP/s (target >= 44); v6 at or past Triton at every GPT-2 shape: "
            + ("yes" if not behind else f"no - behind at {', '.join(behind)}")
        )
    report.section(
        "every GPT-2 shape: TFLOP/s (v6 / Triton > 1: v6 faster; floor = max(FLOPs "
        "/ FP32 rate, bytes / copy bandwidth))",
        "\n".join(lines),
    )
