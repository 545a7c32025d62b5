"""``python -m course doctor``: is this set-up able to run the course, and in which mode?

Prints mode, device and versions; on a broken set-up says what is wrong and what to do,
and exits non-zero.  With no GPU at all it reports simulator mode and exits 0.
"""

from __future__ import annotations

import argparse

from numba import cuda  # module-level: the simulator swaps this global inside kernels

from . import runtime

FIX_TOOLKIT = (
    "pip install 'numba-cuda[cu12]>=0.30,<0.31'  (or [cu13] for a CUDA 13 driver): "
    "it brings NVVM/NVRTC, which numba needs to compile kernels for a GPU"
)


def numpy_problem(version: str) -> str | None:
    """numba-cuda 0.30 cannot compile any kernel under numpy >= 2.5."""
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) >= (2, 5):
        return (
            f"numpy {version} breaks numba-cuda 0.30 (every kernel compile fails); "
            "fix: pip install 'numpy<2.5'"
        )
    return None


def explain_gpu_error(exc: BaseException) -> str:
    """Map a failure of the GPU smoke test to the fix a user needs."""
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if "nvvm" in low or "libnvvm" in low or "nvrtc" in low:
        return f"no usable CUDA toolkit (NVVM/NVRTC) was found ({text[:160]}); fix: {FIX_TOOLKIT}"
    if "unsupported_ptx_version" in low or "ptx" in low and "version" in low:
        return (
            "the CUDA toolkit is newer than the GPU driver (PTX version not supported); "
            "fix: update the NVIDIA driver, or install the toolkit that matches it, e.g. "
            "pip install 'cuda-toolkit[nvcc,nvrtc,cudart]==12.4.*' for a CUDA 12.4 driver"
        )
    if "numpy" in low:
        return f"{text[:200]}; fix: pip install 'numpy<2.5'"
    return f"the GPU smoke test failed: {text[:300]}"


def smoke_test() -> None:
    """Compile and run a tiny kernel; raises on failure."""
    import numpy as np

    @cuda.jit
    def twice(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= 2

    a = np.arange(40, dtype=np.float32)
    d = cuda.to_device(a)
    twice[2, 32](d)
    if not np.array_equal(d.copy_to_host(), 2 * a):
        raise RuntimeError("the smoke-test kernel ran but gave a wrong result")


def diagnose() -> tuple[dict, list[str]]:
    """(facts, problems): an empty problem list means the set-up is usable."""
    problems = []
    import numpy

    p = numpy_problem(numpy.__version__)
    if p:
        problems.append(p)
    info = {}
    try:
        info = runtime.device_info()
    except Exception as exc:  # noqa: BLE001
        problems.append(explain_gpu_error(exc))
    if runtime.MODE == "sim" and "cuInit failed" in runtime.MODE_REASON:
        problems.append(
            f"an NVIDIA driver is installed but unusable ({runtime.MODE_REASON}); "
            "check `nvidia-smi`. The course falls back to the simulator."
        )
    if not p:
        try:
            smoke_test()
        except Exception as exc:  # noqa: BLE001
            problems.append(explain_gpu_error(exc))
    if runtime.MODE == "gpu" and info.get("numba_cuda") == "not installed":
        problems.append(f"numba-cuda is not installed; fix: {FIX_TOOLKIT}")
    return info, problems


def main(argv=None) -> int:
    argparse.ArgumentParser(
        prog="python -m course doctor", description=__doc__.splitlines()[0]
    ).parse_args(argv)
    info, problems = diagnose()
    print(runtime.banner() if info else f"Mode: {runtime.MODE} ({runtime.MODE_REASON})")
    keys = [
        "mode",
        "mode_reason",
        "host",
        "name",
        "mig_slice",
        "compute_capability",
        "sm_count",
        "memory_gib",
        "driver_cuda",
        "size_profile",
        "python",
        "numba",
        "numba_cuda",
        "numpy",
    ]
    for k in keys:
        if k in info:
            print(f"  {k:<20} {info[k]}")
    if problems:
        print("\nProblems:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(
        "\nOK: kernels compile and run"
        + (
            " on the GPU."
            if runtime.MODE == "gpu"
            else " in the simulator (no GPU: small sizes, timings are not GPU speed)."
        )
    )
    return 0
