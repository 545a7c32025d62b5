"""Lessons 05-07 at the lecture's sizes: mean face, centering, covariance (m = 202,599, n = 2,475).

Rows: copies (pageable and pinned), every mean/centering/covariance kernel, the lecture's
Titan X times, and PyTorch/CuPy peers (cuBLAS for Dc^T Dc).  Kernels slower than a few
seconds are timed on a slice of the images and scaled (the row says so).  How the rows
count FLOPs, and the summary sentences: ``faces_summary.py``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..kernels import covariance as COV
from ..kernels import faces as K
from ..measure.timing import Timing, benchmark
from ..platform import runtime
from . import fastest
from .faces_summary import COUNTING, recount, summary  # noqa: F401 - recount re-exported

TITLE = "Lessons 05-07 - faces: mean, centering, covariance (CSE P 524 Lecture 9)"
LECTURE_TITAN_X_MS = {
    "H2D copy": 170.136,
    "compute_mean_kernel": 8.82074,
    "mean D2H": 0.03174,
    "correction_kernel": 60.0,
    "correction_kernel_ortho": 500.0,
    "symmetric_covariance_kernel": 18_000.0,
    "shared_covariance_kernel (chunk 8)": 980.0,
}
SLOW_MS = 4000.0  # predicted longer than this per call -> time on a slice and scale
_CACHE: dict = {}


def sizes() -> tuple[int, tuple[int, int]]:
    """(m, image shape): the lecture's on a GPU, tiny in the simulator."""
    from ..platform.data import LECTURE_M, LECTURE_SHAPE

    return (LECTURE_M, LECTURE_SHAPE) if runtime.profile() == "lecture" else (16, (4, 3))


def faces_matrix() -> np.ndarray:
    """The (m, n) float32 face matrix at benchmark size (loaded once per process)."""
    from ..platform.data import load_faces

    m, shape = sizes()
    if ("D", m, shape) not in _CACHE:
        _CACHE.clear()
        _CACHE[("D", m, shape)] = load_faces(m, shape=shape)
    return _CACHE[("D", m, shape)]


def _timed(fn, slow_guess_ms: float | None = None, repeat: int | None = None) -> Timing:
    if slow_guess_ms is not None and slow_guess_ms > 1000:
        return benchmark(fn, repeat=1, warmup=1)
    return benchmark(fn, repeat=repeat)


def _cov_row(report, label, kind, d_full, m, n, flops, note="", **kw):
    """Time one covariance kernel; on a slice of images when the full run would be slow."""
    d_cov = cuda.device_array(n * n, dtype=np.float32)
    m_probe = max(1, min(m, m // 20 if runtime.MODE == "gpu" else m))
    t_probe = benchmark(
        lambda: K.launch_cov(kind, d_full, d_cov, m_probe, n, **kw), repeat=1, warmup=1
    )
    predicted = t_probe.median_ms * m / m_probe
    if predicted > SLOW_MS:
        t = Timing([predicted], label=label)
        note = (
            note + "; " if note else ""
        ) + f"timed on {m_probe:,} images ({t_probe.median_ms:.0f} ms) and scaled to m"
    else:
        t = _timed(lambda: K.launch_cov(kind, d_full, d_cov, m, n, **kw), predicted)
    return report.add(label, t, flops=flops, size=f"m={m:,} n={n:,}", note=note)


def run(report) -> None:
    D = faces_matrix()
    m, n = D.shape
    size = f"m={m:,} n={n:,}"
    nb = float(m) * n * 4
    lec = lambda name: report.add(  # noqa: E731
        name,
        Timing([LECTURE_TITAN_X_MS[name]]),
        kind="lecture",
        size="m=202,599 n=2,475",
        note="Titan X, from the lecture",
    )

    # ---- copies: pageable vs pinned host memory -------------------------------------------
    d_data = cuda.device_array(m * n, dtype=np.float32)
    flat = D.ravel()
    report.add(
        "H2D copy, pageable numpy array",
        benchmark(lambda: d_data.copy_to_device(flat), repeat=5, warmup=1),
        nbytes=nb,
        size=size,
    )
    pinned = cuda.pinned_array(m * n, dtype=np.float32)
    pinned[:] = flat
    report.add(
        "H2D copy, pinned (page-locked) array",
        benchmark(lambda: d_data.copy_to_device(pinned), repeat=5, warmup=1),
        nbytes=nb,
        size=size,
    )
    lec("H2D copy")
    pinned = None  # free the 2 GB of page-locked memory (its timing has run)

    # ---- 05 mean ---------------------------------------------------------------------------
    d_mean = cuda.device_array(n, dtype=np.float32)
    report.add(
        "compute_mean_kernel (lecture, 32 tpb)",
        benchmark(lambda: K.launch_mean(d_data, d_mean, m, n), repeat=5),
        nbytes=nb,
        size=size,
        note=f"{math.ceil(n / 32)} blocks of 32 threads",
    )
    lec("compute_mean_kernel")
    gpu = runtime.MODE == "gpu"
    t, (tpb, split) = fastest(
        lambda c: benchmark(lambda: K.launch_mean(d_data, d_mean, m, n, split=c[1], tpb=c[0])),
        [
            (tpb, min(m, K.default_split(m, n, tpb) * mult))
            for tpb in ((64, 128, 256) if gpu else (64,))
            for mult in ((1, 2, 4) if gpu else (1,))
        ],
    )
    report.add(
        "mean_split_kernel (images split over blocks)",
        t,
        nbytes=nb,
        size=size,
        note=f"best of a sweep: tpb={tpb}, {split} image slices, atomics combine",
    )
    t, (tpb, split) = fastest(
        lambda c: benchmark(
            lambda: K.launch_mean(d_data, d_mean, m, n, split=c[1], tpb=c[0], unroll=True)
        ),
        [
            (tpb, min(m, split))
            for tpb in ((128, 256) if gpu else (64,))
            for split in ((256, 512, 1024, 2048) if gpu else (4,))
        ],
    )
    report.add(
        "mean_split_x4_kernel (4 loads in flight)",
        t,
        nbytes=nb,
        size=size,
        note=f"best of a sweep: tpb={tpb}, {split} image slices; includes zeroing "
        "the mean on the device",
    )
    report.add(
        "mean D2H copy", benchmark(lambda: d_mean.copy_to_host()), nbytes=n * 4, size=f"n={n:,}"
    )
    lec("mean D2H")
    K.launch_mean(d_data, d_mean, m, n)

    # ---- 06 centering (in place: each call subtracts the mean once more) ---------------------
    report.add(
        "correction_kernel (coalesced, lecture 32 tpb)",
        benchmark(lambda: K.launch_center("coalesced", d_data, d_mean, m, n), repeat=5),
        nbytes=2 * nb,
        size=size,
    )
    lec("correction_kernel")
    report.add(
        "correction_kernel_ortho (not coalesced)",
        benchmark(lambda: K.launch_center("noncoalesced", d_data, d_mean, m, n), repeat=5),
        nbytes=2 * nb,
        size=size,
    )
    lec("correction_kernel_ortho")
    blocks = ((32, 8), (64, 4), (128, 2), (128, 4), (256, 1), (256, 2)) if gpu else ((32, 2),)
    for kind, label in (
        ("2d", "correction_kernel_2d (coalesced, fills the GPU)"),
        ("2d_ilp", "correction_kernel_2d_ilp (4 loads in flight)"),
    ):
        per_thread = 1 if kind == "2d" else 4
        t, (tpb, by, gy) = fastest(
            lambda c, kind=kind: benchmark(
                lambda: K.launch_center(
                    kind, d_data, d_mean, m, n, tpb=c[0], block_y=c[1], blocks_y=c[2]
                )
            ),
            [
                (tpb, by, gy)
                for tpb, by in blocks
                for gy in (
                    (None, min(65_535, math.ceil(m / (by * per_thread)))) if gpu else (None,)
                )
            ],
        )
        report.add(
            label,
            t,
            nbytes=2 * nb,
            size=size,
            note=f"best of a sweep: block ({tpb}, {by}), "
            + ("~32 blocks per SM" if gy is None else f"{gy:,} blocks in y"),
        )
    t, tpb = fastest(
        lambda c: benchmark(lambda: K.launch_center("flat", d_data, d_mean, m, n, tpb=c)),
        (128, 256, 512) if gpu else (32,),
    )
    report.add(
        f"correction_kernel_flat (8-byte pairs, {K.CENTER_ILP} in flight)",
        t,
        nbytes=2 * nb,
        size=size,
        note=f"best of a sweep: {tpb} threads per block, "
        f"{K.CENTER_ILP * tpb:,} consecutive pairs per block",
    )

    # ---- 07 covariance on the centered data -------------------------------------------------
    host_mean = D.mean(axis=0, dtype=np.float64).astype(np.float32)
    d_data.copy_to_device((D - host_mean).ravel())
    flops = 2.0 * m * n * n  # the full product, as cuBLAS computes it
    done = lambda kind: COV.flops_performed(kind, m, n)  # noqa: E731 - what a kernel does
    note_sym = "lower triangle only: FLOPs counted are the ones it performs"
    _cov_row(report, "covariance_kernel (naive, 8x8)", "naive", d_data, m, n, done("naive"))
    _cov_row(
        report,
        "symmetric_covariance_kernel (8x8)",
        "symmetric",
        d_data,
        m,
        n,
        done("symmetric"),
        note=note_sym,
    )
    lec("symmetric_covariance_kernel")
    for cs in (2, 4, 8, 16, 32) if runtime.MODE == "gpu" else (4,):
        _cov_row(
            report,
            f"shared_covariance_kernel (chunk {cs}, CGMA {K.cgma(cs):g})",
            "tiled",
            d_data,
            m,
            n,
            done("tiled"),
            note=note_sym,
            chunk_size=cs,
        )
    lec("shared_covariance_kernel (chunk 8)")
    _cov_row(
        report,
        "register_tiled_covariance_kernel (64x64, 4x4/thread)",
        "register",
        d_data,
        m,
        n,
        done("register"),
        note=note_sym + " (whole tiles)",
    )
    _cov_row(
        report,
        "register_tiled_covariance_kernel_8 (128x128, 8x8/thread)",
        "register8",
        d_data,
        m,
        n,
        done("register8"),
        note=note_sym + " (whole tiles)",
    )
    splits = COV.syrk_grid(m, n)[2]
    _cov_row(
        report,
        f"syrk_covariance_kernel (v4 tiles, lower only, {splits} image slices)",
        "syrk",
        d_data,
        m,
        n,
        done("syrk"),
        note=note_sym + " (whole tiles)",
    )
    report.note(COUNTING)

    # ---- peers --------------------------------------------------------------------------------
    _peers(report, D, host_mean, nb, flops, size)
    for line in summary(report.rows):
        report.note(line)


def _peers(report, D, host_mean, nb, flops, size):
    from ..measure import perf

    torch = perf.peer("torch")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        tD = torch.from_numpy(D).cuda()
        tmu = tD.mean(dim=0)
        report.add_peer("torch", "torch: D.mean(0)", lambda: tD.mean(dim=0), nbytes=nb, size=size)
        report.add_peer(
            "torch", "torch: D - mean (out of place)", lambda: tD - tmu, nbytes=2 * nb, size=size
        )
        report.add_peer(
            "torch",
            "torch: D.sub_(mean) (in place)",
            lambda: tD.sub_(tmu),
            nbytes=2 * nb,
            size=size,
        )
        tDc = torch.from_numpy(D - host_mean).cuda()
        report.add_peer(
            "torch",
            "torch (cuBLAS): Dc.T @ Dc / m, FP32, no TF32",
            lambda: (tDc.T @ tDc) / tDc.shape[0],
            flops=flops,
            size=size,
        )
        del tD, tDc
        torch.cuda.empty_cache()
    else:
        report.note("PyTorch not available: no torch peer rows.")
    m, n = D.shape
    tri = COV.flops_performed("symmetric", m, n)
    for label, fn in cublas_cov(D - host_mean).items():
        report.add_peer("cupy", label, fn, flops=tri if "SYRK" in label else flops, size=size)


def cublas_cov(Dc) -> dict:
    """label -> callable computing cuBLAS's covariance of Dc on the GPU through CuPy: the full
    GEMM ``Dc.T @ Dc / m`` and SYRK (the lower triangle, scaled by 1/m). {} without CuPy."""
    from ..measure import perf

    cp = perf.peer("cupy")
    if cp is None:
        return {}
    import cupy.cublas

    cDc = cp.asarray(Dc)
    m = cDc.shape[0]
    return {
        "cupy (cuBLAS): Dc.T @ Dc / m": lambda: (cDc.T @ cDc) / m,
        "cupy (cuBLAS SYRK): lower triangle of Dc.T Dc / m": lambda: cupy.cublas.syrk(
            "T", cDc, alpha=1.0 / m, lower=True
        ),
    }
