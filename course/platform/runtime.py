"""GPU or simulator: the one switch the whole course depends on.

``import course`` calls :func:`select_mode` before numba is imported.  If the user did
not set ``NUMBA_ENABLE_CUDASIM`` we look for a usable NVIDIA driver and GPU through
``libcuda`` with ctypes (no numba involved); if there is none we set
``NUMBA_ENABLE_CUDASIM=1`` so that numba.cuda runs kernels in its CPU simulator.

Sizes: every lesson has *lecture* sizes (the seeds' sizes, for a GPU) and *simulator*
sizes (a few thousand threads per launch: the simulator runs ~3,000 threads/s).
``COURSE_SIZE=sim|lecture`` overrides the choice.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import warnings

MODE: str = "sim"  # "gpu" or "sim"; set by select_mode()
MODE_REASON: str = ""  # one line: why this mode was chosen
GPU_MEMORY_GIB: float = 0.0  # device 0's memory (a MIG slice's own); 0 when unknown


def _libcuda():
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def libcuda():
    """The NVIDIA driver's library (ctypes), or None: what ``grading/wall/gpus.py`` asks
    which GPUs this process sees."""
    return _libcuda()


def gpu_count() -> int:
    """How many GPUs this process sees (``CUDA_VISIBLE_DEVICES`` applied by the driver):
    cuInit + cuDeviceGetCount, no CUDA context made; 0 without a usable driver."""
    lib = _libcuda()
    count = ctypes.c_int(0)
    try:
        if lib is None or lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
    except AttributeError:
        return 0
    return max(0, count.value)


def _probe_gpu() -> tuple[bool, str]:
    """Return (usable, reason) by asking libcuda directly: cuInit + cuDeviceGetCount."""
    lib = _libcuda()
    if lib is None:
        return False, "no NVIDIA driver (libcuda) found"
    try:
        if lib.cuInit(0) != 0:
            return False, "NVIDIA driver found, but cuInit failed (no usable GPU?)"
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
            return False, "NVIDIA driver found, but it reports no GPU"
    except AttributeError:
        return False, "libcuda found but it lacks cuInit/cuDeviceGetCount"
    _probe_first_device(lib)
    return True, f"{count.value} NVIDIA GPU(s) found by the driver"


def _probe_first_device(lib) -> None:
    """Memory of device 0, still without numba: what the size profile needs.

    Under MIG the CUDA device *is* the slice, so this is the slice's memory, not the whole
    GPU's.
    """
    global GPU_MEMORY_GIB
    try:
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return
        total = ctypes.c_size_t(0)
        if lib.cuDeviceTotalMem_v2(ctypes.byref(total), dev) == 0:
            GPU_MEMORY_GIB = total.value / 2**30
    except (AttributeError, OSError):  # an old or odd driver: sizes fall back to lecture
        pass


def select_mode() -> str:
    """Choose gpu/sim once, before numba loads; respects an explicit NUMBA_ENABLE_CUDASIM."""
    global MODE, MODE_REASON
    explicit = os.environ.get("NUMBA_ENABLE_CUDASIM")
    if explicit is not None and explicit.strip() != "":
        MODE = "sim" if explicit.strip() not in ("0", "") else "gpu"
        MODE_REASON = f"NUMBA_ENABLE_CUDASIM={explicit} was set by you"
    else:
        ok, why = _probe_gpu()
        MODE = "gpu" if ok else "sim"
        MODE_REASON = why
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0" if ok else "1"
    _sync_numba_if_already_imported()
    return MODE


def _sync_numba_if_already_imported() -> None:
    """numba reads NUMBA_ENABLE_CUDASIM at import: warn (or repair) if it was imported first."""
    if "numba.cuda" in sys.modules:
        from numba import config  # already loaded, so no side effect

        actual = "sim" if config.ENABLE_CUDASIM else "gpu"
        if actual != MODE:
            warnings.warn(
                f"numba.cuda was imported before `import course`, so it runs in {actual!r} mode "
                f"although the course chose {MODE!r} ({MODE_REASON}). Restart the kernel and "
                "put `import course` first in the notebook.",
                RuntimeWarning,
                stacklevel=3,
            )
    elif "numba" in sys.modules:
        from numba.core import config

        config.reload_config()  # picks up the NUMBA_ENABLE_CUDASIM we just set


def silence_known_noise() -> None:
    """Hide only the warnings we know are noise for teaching-size launches."""
    try:
        from numba.core.errors import NumbaPerformanceWarning
    except ImportError:  # pragma: no cover
        return
    # "Grid size N will likely result in GPU under-utilization": true, and the point of
    # several lessons; the course reports occupancy itself.
    warnings.filterwarnings(
        "ignore", category=NumbaPerformanceWarning, message=".*under-utilization.*"
    )
    # "Host array used in CUDA kernel will incur copy overhead": the host wrappers copy on purpose.
    warnings.filterwarnings(
        "ignore", category=NumbaPerformanceWarning, message=".*Host array used in CUDA kernel.*"
    )


# ---------------------------------------------------------------------------------------
# size profiles


def profile() -> str:
    """'lecture' (full seed sizes) or 'sim' (small); COURSE_SIZE overrides the mode default."""
    forced = os.environ.get("COURSE_SIZE", "").strip().lower()
    if forced in ("sim", "lecture"):
        return forced
    if forced:
        raise ValueError(f"COURSE_SIZE must be 'sim' or 'lecture', not {forced!r}")
    if MODE != "gpu":
        return "sim"
    from .hosting import lecture_fits

    return "lecture" if lecture_fits(GPU_MEMORY_GIB) else "sim"


def size(*, lecture, sim):
    """Pick the lecture size on a GPU and the simulator size otherwise (COURSE_SIZE overrides)."""
    return lecture if profile() == "lecture" else sim


def mode_label() -> str:
    """Short human label used in every printed timing, plot title and check report."""
    return "GPU" if MODE == "gpu" else "simulator"


# ---------------------------------------------------------------------------------------
# device facts


def sm_count() -> int:
    """Streaming multiprocessors of the GPU (2 in the simulator, to keep launches small)."""
    if MODE != "gpu":
        return 2
    from numba import cuda

    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def _device():
    """The device of the current CUDA context, else device 0 - without making a context
    (a notebook's first cell, ``banner()``, need not cost one: a grader's worker runs it
    for every submission)."""
    from numba import cuda

    current = cuda.gpus.current
    return current if current is not None else cuda.gpus[0]


def _total_memory(dev) -> int:
    """Bytes of memory on ``dev``, asked of the driver without a context where it can."""
    from numba import cuda

    try:
        from numba.cuda.cudadrv.driver import driver

        return int(driver.cuDeviceTotalMem(dev.id))
    except Exception:  # noqa: BLE001 - another binding: ask the context
        return int(cuda.current_context().get_memory_info()[1])


def device_info() -> dict:
    """Facts about the current device (GPU) or the simulator, as a plain dict."""
    import numba
    import numpy

    from .hosting import place

    info = {
        "mode": MODE,
        "mode_reason": MODE_REASON,
        "size_profile": profile(),
        "host": place() or "local",
        "python": platform.python_version(),
        "numba": numba.__version__,
        "numba_cuda": _numba_cuda_version(),
        "numpy": numpy.__version__,
    }
    if MODE == "sim":
        info.update(
            name="numba CUDA simulator (CPU)",
            compute_capability=None,
            sm_count=None,
            memory_gib=None,
        )
        return info
    dev = _device()
    info.update(
        name=dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
        compute_capability=tuple(dev.compute_capability),
        sm_count=_attr(dev, "MULTIPROCESSOR_COUNT"),
        memory_gib=round(_total_memory(dev) / 2**30, 1),
        max_threads_per_block=_attr(dev, "MAX_THREADS_PER_BLOCK"),
        max_shared_per_block=_attr(dev, "MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_per_block_optin=_attr(dev, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_shared_per_sm=_attr(dev, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        max_threads_per_sm=_attr(
            dev, "MAX_THREADS_PER_MULTIPROCESSOR", "MAX_THREADS_PER_MULTI_PROCESSOR"
        ),
        max_regs_per_block=_attr(dev, "MAX_REGISTERS_PER_BLOCK"),
        max_regs_per_sm=_attr(dev, "MAX_REGISTERS_PER_MULTIPROCESSOR"),
        max_blocks_per_sm=_attr(dev, "MAX_BLOCKS_PER_MULTIPROCESSOR"),
        warp_size=_attr(dev, "WARP_SIZE"),
        l2_mib=round((_attr(dev, "L2_CACHE_SIZE") or 0) / 2**20, 1),
        driver_cuda=_driver_version(),
    )
    from .hosting import mig_profile

    info["mig_slice"] = mig_profile(info["name"]) or "no (whole GPU)"
    return info


def _attr(dev, *names):
    """The first of the device attributes ``names`` that this driver binding knows (or None)."""
    for name in names:
        try:
            return getattr(dev, name)
        except AttributeError:
            continue
    return None


def device_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3': the device part of report names."""
    return "".join(ch if ch.isalnum() else "-" for ch in str(name)).strip("-").lower()


def device_name() -> str:
    """The GPU's name, or 'simulator'."""
    return device_info()["name"] if MODE == "gpu" else "simulator"


def _numba_cuda_version() -> str:
    try:
        from importlib.metadata import version

        return version("numba-cuda")
    except Exception:  # noqa: BLE001 - only a version string
        return "not installed"


def _driver_version() -> str:
    try:
        from numba.cuda.cudadrv.driver import driver

        v = driver.get_version()
        return f"{v[0]}.{v[1]}"
    except Exception:  # noqa: BLE001
        return "unknown"


def banner() -> str:
    """One line for the top of a notebook: mode, device, sizes (and Colab / a MIG slice)."""
    from .hosting import mig_profile, place, sizes_note

    where = place()
    where = f" on {where}" if where else ""
    if MODE == "gpu":
        info = device_info()
        mig = mig_profile(info["name"])
        slice_ = f"a MIG slice {mig}: " if mig else ""
        return (
            f"Mode: GPU{where} - {info['name']} ({slice_}cc {info['compute_capability'][0]}."
            f"{info['compute_capability'][1]}, {info['sm_count']} SMs, "
            f"{info['memory_gib']} GiB); sizes: {profile()}{sizes_note(GPU_MEMORY_GIB)}"
        )
    return (
        f"Mode: simulator{where} - no usable NVIDIA GPU, so numba runs kernels on the CPU "
        f"({MODE_REASON}); sizes: {profile()}. Times and speeds shown are a GPU's, from "
        "records committed with their card and date; the simulator's own time is CPU wall "
        "time, not GPU speed."
    )
