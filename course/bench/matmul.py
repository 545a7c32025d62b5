"""Lesson 04 benchmark: matmul v1, v1.5, v2, v3 at N = 4096 float32 beside cuBLAS SGEMM.

The v3 sweep over (L, V, S) is here; the GPT-2 shapes section of the report is
``matmul_gpt2.py``.
"""

from __future__ import annotations

import itertools
import json

import numpy as np

from ..kernels import matmul
from ..measure.peers import cupy_sgemm, torch_sgemm
from ..measure.timing import benchmark
from ..platform import runtime
from .matmul_gpt2 import (  # noqa: F401 - SHAPES and sweep_shapes: notebook 04 reads them here
    SHAPES,
    shapes_section,
    sweep_shapes,
)

TITLE = (
    "Lesson 04 - matmul v1 -> v3, v4, v5 and v6, N = 4096 and GPT-2's shapes, float32 "
    "(no tensor cores)"
)
SWEEP = {"L": (32, 64, 128, 256), "V": (2, 4, 8), "S": (4, 8, 16, 32)}


def size() -> int:
    """N: 4096 on a GPU (the issue's size), 32 in the simulator."""
    return runtime.size(lecture=4096, sim=32)


def time_variant(variant: str, n: int, repeat: int | None = None, data=None, **settings):
    """Timing (ms) of one variant at N x N on device arrays (launch only, no copies)."""
    A, B, d_A, d_B, d_C = data or matmul.inputs(n)
    return benchmark(
        lambda: matmul.launch(variant, d_A, d_B, d_C, **settings),
        repeat=repeat,
        warmup=1 if repeat else None,
        label=variant,
    )


def sweep(n: int, grid: dict = SWEEP, repeat: int = 5, data=None) -> dict:
    """GFLOP/s of v3 for every valid (L, V, S) of ``grid`` at N x N: {"L,V,S": gflops}."""
    data = data or matmul.inputs(n)
    out = {}
    for L, V, S in itertools.product(grid["L"], grid["V"], grid["S"]):
        if matmul.v3_invalid(L, V, S):
            continue
        t = benchmark(
            lambda: matmul.launch("v3_shared_tiled", *data[2:], L=L, V=V, S=S),
            repeat=repeat,
            warmup=1,
        )
        out[f"{L},{V},{S}"] = t.gflops(matmul.flops(n, n, n))
    return out


def run(report) -> None:
    n = size()
    fl = matmul.flops(n, n, n)
    data = matmul.inputs(n)
    A, B, d_A, d_B, d_C = data
    check = n <= 1024 or runtime.MODE == "gpu"
    slow = runtime.MODE == "gpu"
    rows = [
        ("v1_naive", {"threads": (16, 16)}, 3),
        ("v1_5_thread_tile", {"V": 4}, 3),
        ("v2_register_outer", {"V": 4}, 5),
        (
            "v3_shared_tiled",
            {"L": matmul.L_DEFAULT, "V": matmul.V3_DEFAULT, "S": matmul.S_DEFAULT},
            20,
        ),
        ("v3_tuned", {"tile": matmul.TUNED_DEFAULT, "min_blocks": matmul.MIN_BLOCKS_DEFAULT}, 20),
        ("v4", {"tile": matmul.V4_DEFAULT, "min_blocks": matmul.V4_MIN_BLOCKS}, 20),
    ]
    ref = matmul.reference(A[:256], B) if check else None
    for variant, settings, repeat in rows:
        t = benchmark(
            lambda: matmul.launch(variant, d_A, d_B, d_C, **settings),
            repeat=repeat if slow else 2,
            warmup=1,
            label=variant,
        )
        err = ""
        if check:
            got = d_C.copy_to_host()[:256]
            rtol, atol = matmul.tolerance(n)
            bad = not np.allclose(got, ref, rtol=rtol, atol=atol)
            err = "WRONG RESULT" if bad else "matches float64 (first 256 rows)"
        desc = ", ".join(f"{k}={v}" for k, v in settings.items())
        report.add(f"{variant} ({desc})", t, flops=fl, size=f"N = {n}", note=err)
    report.add_peer(
        "cupy", "cuBLAS SGEMM via CuPy (TF32 off)", cupy_sgemm(n), flops=fl, size=f"N = {n}"
    )
    report.add_peer(
        "torch", "cuBLAS SGEMM via PyTorch (TF32 off)", torch_sgemm(n), flops=fl, size=f"N = {n}"
    )
    shapes_section(report)
    sgemm = [r for r in report.rows if r["kind"] == "peer" and r["size"] == f"N = {n}"]
    tuned = [r for r in report.rows if r["name"].startswith(("v3", "v4"))]
    if sgemm and tuned:
        best = max(r["tflops"] for r in sgemm)
        for r in tuned:
            target = 75 if r["name"].startswith("v4") else 50
            report.note(
                f"{r['name']} reaches {100 * r['tflops'] / best:.1f}% of cuBLAS SGEMM "
                f"({best:.1f} TFLOP/s) at N = {n} (target >= {target}%)"
            )


def save_sweep(results: dict, n: int, path) -> None:
    """Write a sweep (from :func:`sweep`) with its device and size as JSON."""
    info = runtime.device_info()
    best = max(results, key=results.get) if results else None
    path.write_text(
        json.dumps(
            {
                "device": info.get("name"),
                "mode": runtime.MODE,
                "n": n,
                "gflops": results,
                "best": best,
            },
            indent=1,
        )
    )
