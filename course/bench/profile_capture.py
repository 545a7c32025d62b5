"""``python -m course profiles``: the H100 profiles lesson 10 shows, measured once on a GPU.

Writes to ``assets/profiles/`` (device name and date in each file):
- ``<device>-<kernel>.json``: ``course.profile`` of the histogram's two-phase and tuned
  kernels and of flash attention's three-kernel and tiled versions (course.profile JSON);
- ``<device>-breakdown.json``: where the time of a host call goes - host-to-device copies,
  kernels, device-to-host copy and the rest (launch overhead, allocation, Python) - for the
  mean face and for flash attention, the CS 483 report's "where the time goes" table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[2] / "assets" / "profiles"


def inputs():
    """The shapes profiled (lecture shapes, scaled so each profile takes seconds)."""
    rng = np.random.default_rng(1)
    hist = rng.integers(0, 256, size=(1 << 18, 512), dtype=np.uint8)
    qkv = [rng.standard_normal((1, 8, 2048, 128)).astype(np.float16) for _ in range(3)]
    faces = rng.uniform(0, 1, size=(202_599 // 4, 2_475)).astype(np.float32)
    return hist, qkv, faces


def breakdown(fn, args, kernel_us: float) -> dict:
    """ms of: copies in, kernels (from the profile), copy out, the rest of the host call."""
    from numba import cuda

    def timed(f, repeat=5):
        best = []
        for _ in range(repeat):
            cuda.synchronize()
            t0 = time.perf_counter()
            f()
            cuda.synchronize()
            best.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(best))

    fn(*args)  # compile and warm up
    total = timed(lambda: fn(*args))
    h2d = timed(lambda: [cuda.to_device(a) for a in args])
    out = np.asarray(fn(*args))
    d_out = cuda.to_device(out)
    d2h = timed(lambda: d_out.copy_to_host())
    kernels = kernel_us / 1e3
    return {
        "total_ms": total,
        "h2d_ms": h2d,
        "kernels_ms": kernels,
        "d2h_ms": d2h,
        "rest_ms": max(0.0, total - h2d - kernels - d2h),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course profiles", description=__doc__)
    ap.add_argument("--out", type=Path, default=OUT)
    opts = ap.parse_args(argv)
    import course

    from ..kernels import attention, faces, histogram
    from ..platform.runtime import device_info, device_slug

    if course.MODE != "gpu":
        print("profiles: needs a GPU (the committed JSON files are what the simulator shows)")
        return 2
    dev = device_info().get("name", "GPU")
    slug = device_slug(dev)
    opts.out.mkdir(parents=True, exist_ok=True)
    hist, qkv, D = inputs()
    calls = {
        "histogram-two_phase": (histogram.VARIANTS["two_phase"], (hist,)),
        "histogram-tuned": (histogram.VARIANTS["tuned"], (hist,)),
        "attention-three_kernels": (attention.VARIANTS["naive_three_kernels"], qkv),
        "attention-flash_tiled": (attention.VARIANTS["flash_tiled"], qkv),
        "faces-mean_split": (faces.VARIANTS["mean_split"], (D,)),
    }
    profiles = {}
    for name, (fn, args) in calls.items():
        t0 = time.perf_counter()
        p = course.profile(fn, *args, launches=10)
        p.save(opts.out / f"{slug}-{name}.json")
        profiles[name] = p
        print(
            f"{name}: {time.perf_counter() - t0:.1f} s, {len(p.rows)} kernels"
            + (f", error: {p.error}" if p.error else ""),
            flush=True,
        )
    parts = {}
    for name in ("faces-mean_split", "attention-flash_tiled"):
        fn, args = calls[name]
        us = sum(r.get("duration_us") or 0 for r in profiles[name].rows)
        parts[name] = breakdown(fn, args, us)
        print(name, parts[name], flush=True)
    (opts.out / f"{slug}-breakdown.json").write_text(
        json.dumps({"device": dev, "date": time.strftime("%Y-%m-%d"), "calls": parts}, indent=1)
    )
    return 0
