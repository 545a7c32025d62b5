"""Performance arithmetic: bytes and FLOPs -> GB/s, TFLOP/s, % of this GPU's ceilings.

The ceilings are *measured* once per device and cached (``~/.cache/numba-course``):
- copy bandwidth: the best of three 1 GiB device-to-device copies (cudaMemcpy, a numba copy
  kernel, PyTorch's ``copy_`` when present), counting bytes read plus bytes written;
- FP32 rate: the best of a kernel of independent fused multiply-adds (2 FLOPs each) and
  cuBLAS SGEMM through PyTorch with TF32 off (when PyTorch is present).
Peers (CuPy, PyTorch) are used when importable and skipped cleanly when not.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..platform import runtime

CACHE_DIR = Path(os.environ.get("COURSE_CACHE_DIR", Path.home() / ".cache" / "numba-course"))


def gbps(nbytes: float, ms: float) -> float:
    """Bandwidth in GB/s (1e9 B/s) of ``nbytes`` moved in ``ms`` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


def tflops(flops: float, ms: float) -> float:
    """Rate in TFLOP/s of ``flops`` done in ``ms`` milliseconds."""
    return flops / (ms * 1e-3) / 1e12


def floor_ms(nbytes: float = 0.0, flops: float = 0.0, ceilings: dict | None = None) -> float:
    """The lower bound on time (ms): max(bytes / copy bandwidth, FLOPs / FP32 rate)."""
    c = ceilings or measured_ceilings()
    if c.get("copy_gbps") is None:
        return float("nan")
    t_mem = nbytes / (c["copy_gbps"] * 1e9) * 1e3
    t_math = flops / (c["fp32_tflops"] * 1e12) * 1e3 if c.get("fp32_tflops") else 0.0
    return max(t_mem, t_math)


def percent(value: float, ceiling: float | None) -> float:
    """value as a percentage of ceiling (nan when there is no ceiling, e.g. simulator)."""
    return float("nan") if not ceiling else 100.0 * value / ceiling


# ---------------------------------------------------------------------------------------
# measured ceilings


def measured_ceilings(refresh: bool = False) -> dict:
    """{'device', 'copy_gbps', 'fp32_tflops', 'measured'}; cached per device name.

    In the simulator there is nothing meaningful to measure: values are None.
    """
    if runtime.MODE != "gpu":
        return {"device": "simulator", "copy_gbps": None, "fp32_tflops": None, "measured": None}
    name = runtime.device_name()
    path = CACHE_DIR / "ceilings.json"
    cache = {}
    if path.exists():
        try:
            cache = json.loads(path.read_text())
        except (OSError, ValueError):
            cache = {}
    if not refresh and name in cache:
        return cache[name]
    copy_gbps, copy_method = measure_copy_gbps()
    fp32, fp32_method = measure_fp32_tflops()
    result = {
        "device": name,
        "copy_gbps": copy_gbps,
        "copy_method": copy_method,
        "fp32_tflops": fp32,
        "fp32_method": fp32_method,
        "measured": time.strftime("%Y-%m-%d %H:%M"),
    }
    cache[name] = result
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cache, indent=1))
    except OSError:
        pass  # a read-only home is fine: we just measure again next time
    return result


def measure_copy_gbps(nbytes: int = 1 << 30) -> tuple[float, str]:
    """Best of three device-to-device copies of 1 GiB (cudaMemcpy, a numba copy kernel with
    4 loads in flight per thread, and PyTorch's copy_ when present); counts read + write."""
    import numpy as np
    from numba import cuda

    from .timing import benchmark

    n = nbytes // 4
    src = cuda.device_array(n, dtype=np.float32)
    dst = cuda.device_array(n, dtype=np.float32)
    kernel = _copy_kernel()
    blocks = 32 * cuda.get_current_device().MULTIPROCESSOR_COUNT
    results = {
        "cudaMemcpy": benchmark(lambda: dst.copy_to_device(src), repeat=20, warmup=3),
        "numba copy kernel": benchmark(lambda: kernel[blocks, 256](src, dst), repeat=20, warmup=3),
    }
    src = dst = None  # free the 2 GiB (the timings above have run)
    torch = peer("torch")
    if torch is not None:
        a = torch.empty(n, device="cuda")
        b = torch.empty(n, device="cuda")
        results["torch copy_"] = time_peer(torch, lambda: b.copy_(a))
        del a, b
    method = min(results, key=lambda k: results[k].median_ms)
    return round(gbps(2 * nbytes, results[method].median_ms), 1), method


def _copy_kernel():
    from numba import cuda

    @cuda.jit
    def copy4(src, dst):
        # grid-stride copy with 4 independent loads in flight per thread
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        n = src.size
        while i + 3 * stride < n:
            a, b, c, d = src[i], src[i + stride], src[i + 2 * stride], src[i + 3 * stride]
            dst[i] = a
            dst[i + stride] = b
            dst[i + 2 * stride] = c
            dst[i + 3 * stride] = d
            i += 4 * stride
        while i < n:
            dst[i] = src[i]
            i += stride

    return copy4


def _fma_kernel():
    from numba import cuda, float32

    @cuda.jit
    def fma_chains(out, iters):
        # 8 independent FMA chains per thread keep the FP32 pipes busy.
        i = cuda.grid(1)
        a0 = float32(i) * float32(1e-9)
        a1, a2, a3, a4, a5, a6, a7 = (
            a0 + float32(1),
            a0 + float32(2),
            a0 + float32(3),
            a0 + float32(4),
            a0 + float32(5),
            a0 + float32(6),
            a0 + float32(7),
        )
        b = float32(0.999999)
        c = float32(1e-7)
        for _ in range(iters):
            a0 = a0 * b + c
            a1 = a1 * b + c
            a2 = a2 * b + c
            a3 = a3 * b + c
            a4 = a4 * b + c
            a5 = a5 * b + c
            a6 = a6 * b + c
            a7 = a7 * b + c
        out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7

    return fma_chains


def measure_fp32_tflops() -> tuple[float, str]:
    """Best of a numba FMA kernel and cuBLAS SGEMM (through PyTorch, TF32 off) when present."""
    import numpy as np
    from numba import cuda

    from .timing import benchmark

    kernel = _fma_kernel()
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    blocks, tpb, iters = sms * 8, 256, 4096
    out = cuda.device_array(blocks * tpb, dtype=np.float32)
    t = benchmark(lambda: kernel[blocks, tpb](out, iters), repeat=10, warmup=2)
    results = {"numba FMA kernel": tflops(2.0 * 8 * iters * blocks * tpb, t.median_ms)}
    torch = peer("torch")
    if torch is not None:
        n = 8192
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            a = torch.rand(n, n, device="cuda")
            b = torch.rand(n, n, device="cuda")
            c = torch.empty(n, n, device="cuda")
            ts = time_peer(torch, lambda: torch.matmul(a, b, out=c), repeat=5, warmup=2)
            results["cuBLAS SGEMM (torch, TF32 off)"] = tflops(2.0 * n**3, ts.median_ms)
            del a, b, c
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    method = max(results, key=results.get)
    return round(results[method], 2), method


# ---------------------------------------------------------------------------------------
# peers


def peer(name: str):
    """Return the module ``cupy`` or ``torch`` if it is importable and sees a GPU, else None."""
    if runtime.MODE != "gpu":
        return None
    try:
        if name == "cupy":
            import cupy

            cupy.cuda.runtime.getDeviceCount()
            return cupy
        if name == "torch":
            import torch

            return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken peer is simply skipped
        return None
    raise ValueError(f"unknown peer {name!r}: use 'cupy' or 'torch'")


def time_peer(lib, fn, repeat: int = 20, warmup: int = 3, label: str = ""):
    """Time ``fn()`` that runs CuPy or PyTorch work, exactly as course.benchmark times numba
    kernels (both libraries use the legacy default stream, which numba's events see)."""
    from .timing import benchmark

    if lib.__name__ == "torch":
        lib.cuda.synchronize()
    else:
        lib.cuda.runtime.deviceSynchronize()
    return benchmark(fn, repeat=repeat, warmup=warmup, label=label or lib.__name__)
