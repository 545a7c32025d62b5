"""What "the tracer matches the hardware" means: which counts are compared, and how close.

The rules of the tracer-vs-Nsight Compute validation (``python -m course validate``, the
report builder in ``course/bench/validation.py``, which launches the lesson kernels), kept
here, below the kernels and the figures, so that the report's figure
(``course/show/figures/profiles.py``) and lesson 10 read the same rule the report applies.
"""

from __future__ import annotations

COMPARED = (
    "ld_sectors_per_request",
    "st_sectors_per_request",
    "shared_ld_wavefronts_per_request",
    "shared_st_wavefronts_per_request",
)
ALL = COMPARED + ("shared_ld_conflicts_per_request", "shared_st_conflicts_per_request")
TOTALS = (
    "shared_ld_wavefronts",
    "shared_st_wavefronts",
    "shared_ld_conflicts",
    "shared_st_conflicts",
)
# What must be equal: global sectors per request, and shared wavefronts and bank conflicts
# per launch (their per-request averages differ where the hardware counts predicated-off
# instructions as requests: shown, and explained in the report)
MATCHED = ("ld_sectors_per_request", "st_sectors_per_request") + TOTALS


def matches(measured, traced, tol: float = 0.02) -> bool:
    """Equal within 2 % (ncu's per-request averages are ratios of sums), both absent, or
    the hardware saw no requests of that kind where the tracer saw none either."""
    if measured is None or traced is None:
        return (measured or 0) == (traced or 0)
    return abs(measured - traced) <= tol * max(1.0, abs(measured))
