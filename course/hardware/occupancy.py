"""How many blocks of a kernel fit on one SM at once, and what stops a few more.

The per-SM limits are the table of the UCSD CSE/DSC 291 lecture (V100, A100, H100; NVIDIA's
data sheets).  A block needs threads, registers and shared memory; the SM has so many of
each, and a fixed number of block slots.  The fewest blocks any limit allows is what runs::

    blocks_per_sm(threads=256, regs=64, smem=0)  ->  Fit(blocks=4, limiter="registers", ...)
"""

from __future__ import annotations

from dataclasses import dataclass

# per SM: threads, warps, blocks, 32-bit registers, shared memory (bytes, most configurable)
SM_LIMITS = {
    "V100": dict(threads=2048, warps=64, blocks=32, registers=65536, shared=96 * 1024),
    "A100": dict(threads=2048, warps=64, blocks=32, registers=65536, shared=164 * 1024),
    "H100": dict(threads=2048, warps=64, blocks=32, registers=65536, shared=228 * 1024),
}
REG_UNIT = 256  # registers are given to a warp in units of 256
SHARED_RESERVED = 1024  # bytes of shared memory the system keeps per block (sm_80 and newer)
LIMITERS = ("threads", "registers", "shared", "blocks")


@dataclass
class Fit:
    """Blocks per SM, the limit that decided it, and the occupancy it gives."""

    blocks: int
    limiter: str  # one of LIMITERS
    occupancy: float  # resident warps / max warps, 0..1
    by_limit: dict  # limit -> blocks that limit alone would allow


def blocks_per_sm(threads: int, regs: int, smem: int = 0, gpu: str = "H100") -> Fit:
    """Resident blocks per SM for blocks of ``threads`` threads using ``regs`` registers per
    thread and ``smem`` bytes of shared memory per block."""
    if gpu not in SM_LIMITS:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(SM_LIMITS)}")
    if not (1 <= threads <= 1024 and 1 <= regs <= 255 and smem >= 0):
        raise ValueError(
            "need 1..1024 threads per block, 1..255 registers per thread and smem >= 0 bytes"
        )
    lim = SM_LIMITS[gpu]
    warps = -(-threads // 32)
    regs_per_warp = -(-regs * 32 // REG_UNIT) * REG_UNIT
    by = {
        "threads": lim["warps"] // warps,
        "registers": (lim["registers"] // regs_per_warp) // warps,
        "blocks": lim["blocks"],
    }
    if smem:  # no shared memory: no limit from it
        by["shared"] = lim["shared"] // (smem + SHARED_RESERVED)
    blocks = min(by.values())
    limiter = next(k for k in LIMITERS if by.get(k) == blocks)
    return Fit(blocks, limiter, blocks * warps / lim["warps"], by)
