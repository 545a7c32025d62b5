"""Lesson 03 benchmark: window average v1 (global) vs v2 (shared) vs v2 + constant weights."""
from __future__ import annotations

import numpy as np

from .. import runtime
from ..timing import Timing, benchmark

TITLE = "Lesson 03 - window average (conv1d), N = 2^26 on a GPU"
TPBS = (128, 256, 512, 1024)


def sizes() -> int:
    """N outputs: 2^26 on a GPU (the issue's target size), 1024 in the simulator."""
    return runtime.size(lecture=1 << 26, sim=1024)


def sweep(n: int, tpbs=TPBS) -> dict:
    """variant -> {threads_per_block: Timing} for N outputs on device arrays."""
    from numba import cuda

    from ..kernels import window

    x = np.random.default_rng(0).uniform(-1, 1, n + 2).astype(np.float32)
    d_in, d_out = cuda.to_device(x), cuda.device_array(n, dtype=np.float32)
    out = {}
    for variant in window.VARIANTS:
        out[variant] = {}
        for tpb in tpbs if runtime.MODE == "gpu" else tpbs[:1]:
            out[variant][tpb] = benchmark(window.launch, variant, n, d_in, d_out, tpb,
                                          label=f"{variant} tpb={tpb}")
        got = d_out.copy_to_host()
        err = np.abs(got - window.reference(x)).max()
        if err > 1e-6:
            raise AssertionError(f"{variant}: max error {err:g} at N = {n}")
    return out


def run(report) -> None:
    from ..kernels import window

    n = sizes()
    nbytes = window.moved_bytes(n)
    report.note(f"bytes per call = 4 (N + 2) read + 4 N written = {nbytes / 1e6:.1f} MB; "
                "the floor is that divided by the measured device-to-device copy bandwidth")
    results = sweep(n)
    for variant, by_tpb in results.items():
        best = min(by_tpb, key=lambda t: by_tpb[t].median_ms)
        for tpb, t in by_tpb.items():
            report.add(f"{variant} (THREADS_PER_BLK={tpb})", t, nbytes=nbytes, size=f"N = {n}",
                       note="best block size" if tpb == best else "")
    report.add_peer("cupy", "cupy (x[:-2] + x[1:-1] + x[2:]) / 3", _cupy_fn(n), nbytes=nbytes,
                    size=f"N = {n}", note="three elementwise kernels")
    report.add("copy (cudaMemcpy D2D) ceiling", _copy_timing(report, nbytes), nbytes=nbytes,
               size=f"{nbytes / 1e6:.0f} MB", kind="peer", note="measured ceiling, scaled")


def _cupy_fn(n):
    from .. import perf

    cp = perf.peer("cupy")
    if cp is None:
        return lambda: None
    x = cp.random.uniform(-1, 1, n + 2, dtype=cp.float32)
    return lambda: (x[:-2] + x[1:-1] + x[2:]) / cp.float32(3.0)


def _copy_timing(report, nbytes) -> Timing:
    gbps = report.ceilings.get("copy_gbps")
    return Timing([nbytes / (gbps * 1e9) * 1e3 if gbps else float("nan")], label="copy")
