"""What a faces report says (lessons 05-07): how its covariance rows count FLOPs, the
recount of a saved report by that rule, and the issue's targets as sentences.

``KINDS`` maps a covariance row's name to its kernel kind, ``recount`` redoes a saved
report's FLOP columns from its measured times (``python -m course bench --recount``), and
``summary`` says how the best centering and covariance kernels compare with the copy
bandwidth, the naive kernel and cuBLAS.  The rows themselves are measured by ``faces.py``.
"""

from __future__ import annotations

from ..kernels import covariance as COV

COUNTING = (
    "FLOPs: 2 m per covariance entry a kernel computes - all n^2 for the naive "
    "kernel and cuBLAS's GEMM, n (n + 1) / 2 for the symmetric and tiled kernels, "
    "the whole lower-triangle tiles for the register-tiled and SYRK ones (mirrored entries are "
    "copies, not work); compare kernels by time."
)

KINDS = (
    ("syrk_covariance_kernel", "syrk"),
    ("register_tiled_covariance_kernel_8", "register8"),
    ("register_tiled_covariance_kernel", "register"),
    ("shared_covariance_kernel", "tiled"),
    ("symmetric_covariance_kernel", "symmetric"),
    ("covariance_kernel", "naive"),
)


def recount(report) -> int:
    """Redo the FLOP columns of a saved faces report's covariance rows with
    ``covariance.flops_performed`` (times stay: they are measurements). Rows changed."""
    from ..measure import perf

    changed = 0
    for r in report.rows:
        kind = next((k for prefix, k in KINDS if r["name"].startswith(prefix)), None)
        if kind is None or not r.get("tflops") or r["kind"] == "lecture":
            continue
        m, n = (int(v.split("=")[1].replace(",", "")) for v in str(r["size"]).split()[:2])
        flops = COV.flops_performed(kind, m, n)
        tflops = perf.tflops(flops, r["median_ms"])
        changed += abs(tflops - r["tflops"]) > 1e-9 * tflops
        r["tflops"] = tflops
        r["pct_fp32"] = perf.percent(tflops, report.ceilings.get("fp32_tflops"))
        r["floor_ms"] = perf.floor_ms(0, flops, report.ceilings)
        r["note"] = str(r.get("note") or "").replace(
            "computes the lower triangle only (~half these FLOPs)",
            "lower triangle only: FLOPs counted are the ones it performs",
        )
    if changed:
        report.note(
            COUNTING + " Recounted on 2026-11-23 from the same measured times (the "
            "lower-triangle kernels had been counted as the full product)."
        )
    return changed


def summary(rows) -> list[str]:
    """The issue's targets as sentences: centering vs copy bandwidth, tiled vs naive vs cuBLAS."""
    by = {r["name"]: r for r in rows}
    ms = lambda prefix: min(  # noqa: E731
        (r["median_ms"] for n, r in by.items() if n.startswith(prefix) and r["kind"] != "lecture"),
        default=None,
    )
    out = []
    centers = [
        r for n, r in by.items() if n.startswith(("correction_kernel_2d", "correction_kernel_flat"))
    ]
    center = min(centers, key=lambda r: r["median_ms"]) if centers else None
    if center and center.get("pct_copy") is not None:
        out.append(
            f"best coalesced centering ({center['name']}) reaches "
            f"{center['pct_copy']:.0f}% of the measured copy bandwidth (target >= 85%)"
        )
    naive, sym = ms("covariance_kernel"), ms("symmetric_covariance_kernel")
    tiled, reg = ms("shared_covariance_kernel"), ms("register_tiled")  # best of both sizes
    blas = ms("torch (cuBLAS)") or ms("cupy (cuBLAS)")
    for label, t in (
        ("shared_covariance_kernel (best chunk)", tiled),
        ("register_tiled_covariance_kernel", reg),
    ):
        if t and naive:
            out.append(
                f"{label}: {naive / t:.1f}x faster than the naive kernel, "
                f"{sym / t:.1f}x faster than the symmetric one (lecture: 18.4x)"
                + (f"; {t / blas:.2f}x the time of cuBLAS" if blas else "")
            )
    syrk, gemm = ms("syrk_covariance_kernel"), ms("cupy (cuBLAS):")
    blas_syrk = ms("cupy (cuBLAS SYRK)")
    if syrk and (gemm or blas_syrk):
        out.append(
            "syrk_covariance_kernel: "
            + "; ".join(
                f"{peer / syrk:.2f}x as fast as {name} ({peer:.1f} ms)"
                for name, peer in (("cuBLAS GEMM Dc.T @ Dc", gemm), ("cuBLAS SYRK", blas_syrk))
                if peer
            )
            + " (target: faster than cuBLAS's GEMM)"
        )
    return out
