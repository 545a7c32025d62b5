"""What the simulator can honestly say of one launch (a slider panel's ``counts=``).

The simulator cannot time a GPU, but it sees every access: :func:`launch_counts` traces one
launch (``course.sim.trace``) and reports the 32-byte sectors per global-memory request
(coalescing), the worst bank-conflict ways of a shared-memory request, the occupancy the
block's threads and shared memory allow on an H100 (``course.hardware.occupancy``; the
simulator does not know the registers a kernel uses, so they are an assumption unless
given), and the roofline floor of the launch's bytes and FLOPs on a recorded GPU's
ceilings.  Every figure is a count or a bound: none is a speed.
"""

from __future__ import annotations

from ..hardware.occupancy import blocks_per_sm
from ..measure import perf
from ..platform import runtime

ASSUMED_REGS = 32  # registers per thread when the caller does not know them


def launch_counts(
    run,
    *,
    threads: int,
    shared_bytes: int = 0,
    regs: int | None = None,
    nbytes: float = 0,
    flops: float = 0,
    ceilings: dict | None = None,
) -> dict:
    """``run()`` launches the kernel once; {label: text} of what the simulator can say.

    ``threads``: per block; ``shared_bytes``: per block; ``nbytes``/``flops``: the minimum
    the launch must move and compute; ``ceilings``: a GPU's ``copy_gbps``/``fp32_tflops``
    (a record's) for the floor."""
    out = {}
    if runtime.MODE != "gpu":
        from ..sim import trace

        with trace.recording() as traces:
            run()
        req = sec = 0
        ways = 0
        for t in traces:
            for c in t.coalescing_counts().values():
                req, sec = req + c["requests"], sec + c["sectors"]
            for c in t.bank_counts().values():
                ways = max(ways, c["max_ways"])
        if req:
            out["sectors / request"] = f"{sec / req:.2f}"
        out["bank-conflict ways"] = f"{ways}-way" if ways else "no shared memory"
    fit = blocks_per_sm(threads, regs or ASSUMED_REGS, shared_bytes)
    out["occupancy (H100)"] = f"{fit.occupancy:.0%}, limited by {fit.limiter} (at " + (
        f"~{regs} registers/thread)" if regs else f"{ASSUMED_REGS} registers/thread, assumed)"
    )
    if (nbytes or flops) and ceilings and ceilings.get("copy_gbps"):
        out["roofline floor"] = f"{perf.floor_ms(nbytes, flops, ceilings):.4g} ms"
    return out
