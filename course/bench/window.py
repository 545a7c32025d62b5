"""Lesson 03 benchmark: window average v1 (global) vs v2 (shared) vs v2 + constant weights."""

from __future__ import annotations

import numpy as np

from ..measure.timing import Timing, benchmark
from ..platform import runtime

TITLE = "Lesson 03 - window average (conv1d), N = 2^26 on a GPU"
TPBS = (128, 256, 512, 1024)


def sizes() -> int:
    """N outputs: 2^26 on a GPU (the issue's target size), 1024 in the simulator."""
    return runtime.size(lecture=1 << 26, sim=1024)


GRID_THREADS_PER_SM = (1024, 2048, 4096)  # grids tried for the grid-stride variants


def sweep(n: int, tpbs=TPBS) -> dict:
    """variant -> {threads_per_block: (Timing, blocks)} for N outputs on device arrays; for
    the grid-stride variants the best of a few grids (blocks=None: the one-thread-per-output
    grid of the lecture's kernels)."""
    from numba import cuda

    from ..kernels import window

    x = np.random.default_rng(0).uniform(-1, 1, n + 2).astype(np.float32)
    d_in, d_out = cuda.to_device(x), cuda.device_array(n, dtype=np.float32)
    gpu = runtime.MODE == "gpu"
    out = {}
    for variant in window.VARIANTS:
        out[variant] = {}
        for tpb in tpbs if gpu else tpbs[:1]:
            grids = [None]
            if variant in window.GRID_THREADS_PER_SM and gpu:
                sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
                grids = [t * sms // tpb for t in GRID_THREADS_PER_SM]
            best = None
            for blocks in grids:
                d_out.copy_to_device(np.full(n, np.nan, dtype=np.float32))  # stale results fail
                t = benchmark(
                    window.launch,
                    variant,
                    n,
                    d_in,
                    d_out,
                    tpb,
                    blocks,
                    label=f"{variant} tpb={tpb} blocks={blocks}",
                )
                got = d_out.copy_to_host()
                err = np.abs(got - window.reference(x)).max()
                if not err <= 1e-6:
                    raise AssertionError(f"{variant}: max error {err:g} at N = {n}")
                if best is None or t.median_ms < best[0].median_ms:
                    best = (t, blocks)
            out[variant][tpb] = best
    return out, (d_in, d_out)


def run(report) -> None:
    from ..kernels import window

    n = sizes()
    nbytes = window.moved_bytes(n)
    report.note(
        f"bytes per call = 4 (N + 2) read + 4 N written = {nbytes / 1e6:.1f} MB; "
        "the floor is that divided by the measured device-to-device copy bandwidth"
    )
    results, (d_in, d_out) = sweep(n)
    for variant, by_tpb in results.items():
        best = min(by_tpb, key=lambda t: by_tpb[t][0].median_ms)
        for tpb, (t, blocks) in by_tpb.items():
            notes = ([f"grid {blocks} blocks"] if blocks else []) + (
                ["best block size"] if tpb == best else []
            )
            report.add(
                f"{variant} (THREADS_PER_BLK={tpb})",
                t,
                nbytes=nbytes,
                size=f"N = {n}",
                note="; ".join(notes),
            )
    report.add_peer(
        "cupy",
        "cupy (x[:-2] + x[1:-1] + x[2:]) / 3",
        _cupy_fn(n),
        nbytes=nbytes,
        size=f"N = {n}",
        note="three elementwise kernels",
    )
    report.add(
        "copy (cudaMemcpy D2D) ceiling",
        _copy_timing(report, nbytes),
        nbytes=nbytes,
        size=f"{nbytes / 1e6:.0f} MB",
        kind="peer",
        note="measured ceiling, scaled",
    )


def _cupy_fn(n):
    from ..measure import perf

    cp = perf.peer("cupy")
    if cp is None:
        return lambda: None
    x = cp.random.uniform(-1, 1, n + 2, dtype=cp.float32)
    return lambda: (x[:-2] + x[1:-1] + x[2:]) / cp.float32(3.0)


def _copy_timing(report, nbytes) -> Timing:
    gbps = report.ceilings.get("copy_gbps")
    return Timing([nbytes / (gbps * 1e9) * 1e3 if gbps else float("nan")], label="copy")
