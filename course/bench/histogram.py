"""Lesson 09 benchmark: every histogram variant at the CS149 leaderboard shape
(1,048,576 x 512 uint8, 512 MiB) beside torch/cupy bincount and the bandwidth floor,
then the tuned and two-phase kernels on skewed and constant data."""

from __future__ import annotations

import numpy as np

from ..kernels import histogram as H
from ..measure.timing import Timing, benchmark
from ..platform import runtime

TITLE = "Lesson 09 - multi-channel histogram (CS149 leaderboard shape)"
LEADERBOARD_MS = {
    "leaderboard #1 (CS149, H100)": 0.315,
    "seed team CUDA two-phase (CS149 work log, H100)": 0.351,
}
# launch settings from the tuning sweeps on the GPU (H200, 2026-11-22, runs 1 and 2; tuned:
# course.kernels.histogram.TUNED_GPU)
SETTINGS = {
    "global_atomics": {},
    "block_per_channel": {},
    "two_phase": {"threads_per_block": 512, "channels_per_block": 32, "chunks": 66},
    "tuned": H.TUNED_GPU,
}


def shape() -> tuple[int, int]:
    """(length, channels): the leaderboard shape on a GPU, a small one in the simulator."""
    return runtime.size(lecture=(1 << 20, 512), sim=(64, 12))


def time_variant(
    name: str, d_bytes, n_ch: int, hist, repeat: int | None = None, **settings
) -> Timing:
    """Device time (ms) of one variant on uploaded data, output preallocated."""
    base = SETTINGS[name] if runtime.MODE == "gpu" else {}
    return benchmark(
        lambda: H.launch(name, d_bytes, n_ch, hist=hist, **{**base, **settings}),
        repeat=repeat,
        label=name,
    )


def run(report) -> None:
    from numba import cuda

    length, n_ch = shape()
    nbytes = length * n_ch + n_ch * H.NUM_BINS * 4  # read the data once, write the counts
    size = f"{length} x {n_ch}"
    report.note(
        f"floor: {nbytes / 2**20:.0f} MiB read at the measured copy bandwidth "
        "(the copy counts read + write, so this is the memory-bound minimum)."
    )
    data = H.make_data(length, n_ch, "uniform", seed=1)
    expected = H.reference(data)
    d_bytes, _ = H.to_device(data)
    hist = cuda.device_array((n_ch, H.NUM_BINS), np.int32)
    for name in H.VARIANTS:
        time_variant(name, d_bytes, n_ch, hist, repeat=1)
        ok = bool((hist.copy_to_host() == expected).all())
        slow = name in ("global_atomics", "block_per_channel")
        t = time_variant(name, d_bytes, n_ch, hist, repeat=5 if slow else None)
        report.add(
            name,
            t,
            nbytes=nbytes,
            size=size + " uniform",
            note=("exact" if ok else "WRONG RESULT") + _settings_note(name),
        )
    for label, ms in LEADERBOARD_MS.items():
        report.add(label, Timing([ms], mode="gpu"), nbytes=nbytes, size=size, kind="lecture")

    for label, (lib, fn) in peers(d_bytes, n_ch).items():
        report.add_peer(lib, label, fn, nbytes=nbytes, size=size + " uniform")

    for dist in ("skewed", "constant"):
        data = H.make_data(length, n_ch, dist, seed=2)
        expected = H.reference(data)
        d_bytes, _ = H.to_device(data)
        for name in ("global_atomics", "two_phase", "tuned"):
            time_variant(name, d_bytes, n_ch, hist, repeat=1)
            ok = bool((hist.copy_to_host() == expected).all())
            t = time_variant(
                name, d_bytes, n_ch, hist, repeat=5 if name == "global_atomics" else None
            )
            report.add(
                f"{name} ({dist})",
                t,
                nbytes=nbytes,
                size=size + " " + dist,
                note="exact" if ok else "WRONG RESULT",
            )
    report.note("skewed: 90% of values fall in 4 bins; constant: each channel holds one value.")


def peers(d_bytes, n_ch: int) -> dict:
    """label -> (library, callable): torch and cupy bincount of the uploaded data, each
    channel's values offset by 256 x channel so one bincount gives every histogram."""
    offsets = np.arange(n_ch, dtype=np.int64) * H.NUM_BINS
    n_out = n_ch * H.NUM_BINS

    def torch_fn():
        import torch

        t = torch.as_tensor(d_bytes, device="cuda")[:, :n_ch]
        off = torch.as_tensor(offsets, device="cuda")
        return torch.bincount((t.to(torch.int64) + off).flatten(), minlength=n_out)

    def cupy_fn():
        import cupy

        c = cupy.asarray(d_bytes)[:, :n_ch]
        return cupy.bincount(
            (c.astype(cupy.int64) + cupy.asarray(offsets)).ravel(), minlength=n_out
        )

    return {
        "torch.bincount (channel-offset values)": ("torch", torch_fn),
        "cupy.bincount (channel-offset values)": ("cupy", cupy_fn),
    }


def _settings_note(name: str) -> str:
    s = SETTINGS[name]
    return "; " + ", ".join(f"{k}={v}" for k, v in s.items()) if s else ""
