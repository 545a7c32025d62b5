"""One profiled kernel as a row of ``course.profile``'s fields (``profiler.FIELDS``): from a
row of Nsight Compute's report (:func:`from_ncu`, on a GPU) or from the simulator's traces
of one call (:func:`traced_rows`).

Only the readings live here: what the fields mean, the Profile that holds the rows and
its views are ``profiler.py``'s; running ncu is ``ncu.py``'s.
"""

from __future__ import annotations

# ncu's occupancy limits (blocks per SM each allows) -> what the limit is, in plain words
LIMITS = {
    "launch__occupancy_limit_registers": "registers per thread",
    "launch__occupancy_limit_shared_mem": "shared memory per block",
    "launch__occupancy_limit_blocks": "blocks per SM",
    "launch__occupancy_limit_warps": "block size (warps per SM)",
}


def from_ncu(r: dict) -> dict:
    """The vocabulary's fields from one parsed ncu row (see course/hardware/ncu.py)."""

    def ratio(a, b):
        a, b = r.get(a), r.get(b)
        return a / b if isinstance(a, float) and isinstance(b, float) and b else None

    p = "l1tex__t_%s_pipe_lsu_mem_global_op_%s.sum"
    w = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_%s.sum"
    limits = {LIMITS[k]: r[k] for k in LIMITS if isinstance(r.get(k), float)}
    from .ncu import STALL_PREFIX as prefix
    from .ncu import STALL_SUFFIX as suffix

    stalls = sorted(
        (
            (k[len(prefix) : -len(suffix)], v)
            for k, v in r.items()
            if k.startswith(prefix)
            and k.endswith(suffix)
            and isinstance(v, float)
            and k[len(prefix) : -len(suffix)] != "selected"
        ),  # issuing, not a stall
        key=lambda t: -t[1],
    )
    mb = lambda k: r[k] / 1e6 if isinstance(r.get(k), float) else None  # noqa: E731
    return {
        "kernel": r["kernel"],
        "grid": r.get("grid"),
        "block": r.get("block"),
        "duration_us": r["gpu__time_duration.sum"] / 1e3
        if isinstance(r.get("gpu__time_duration.sum"), float)
        else None,
        "dram_read_mb": mb("dram__bytes_read.sum"),
        "dram_write_mb": mb("dram__bytes_write.sum"),
        "dram_pct_peak": r.get("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        "ld_sectors_per_request": ratio(p % ("sectors", "ld"), p % ("requests", "ld")),
        "st_sectors_per_request": ratio(p % ("sectors", "st"), p % ("requests", "st")),
        "l1_hit_pct": r.get("l1tex__t_sector_hit_rate.pct"),
        "l2_hit_pct": r.get("lts__t_sector_hit_rate.pct"),
        "shared_ld_conflicts": r.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
        "shared_st_conflicts": r.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        "shared_ld_wavefronts_per_request": ratio(w % "ld", "smsp__inst_executed_op_shared_ld.sum"),
        "shared_ld_requests": r.get("smsp__inst_executed_op_shared_ld.sum"),
        "shared_st_requests": r.get("smsp__inst_executed_op_shared_st.sum"),
        "shared_st_wavefronts_per_request": ratio(w % "st", "smsp__inst_executed_op_shared_st.sum"),
        "achieved_occupancy_pct": r.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        "theoretical_occupancy_pct": r.get("sm__maximum_warps_per_active_cycle_pct"),
        "occupancy_limiter": _limiter(limits, r.get("sm__maximum_warps_per_active_cycle_pct")),
        "registers_per_thread": r.get("launch__registers_per_thread"),
        "shared_bytes_per_block": (r.get("launch__shared_mem_per_block_static") or 0)
        + (r.get("launch__shared_mem_per_block_dynamic") or 0),
        "block_size": r.get("launch__block_size"),
        "grid_size": r.get("launch__grid_size"),
        "sol_memory_pct": r.get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        "sol_compute_pct": r.get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        "top_stalls": [[name, v] for name, v in stalls[:3]],
    }


def _limiter(limits: dict, theoretical) -> str | None:
    """The launch limit that allows the fewest blocks per SM ('none' at 100 % theoretical)."""
    if not limits:
        return None
    if isinstance(theoretical, float) and theoretical >= 99.5:
        return "none (100 % theoretical)"
    return min(limits, key=limits.get)


def traced_rows(fn, args, kwargs) -> list[dict]:
    """One row per kernel that ``fn(*args, **kwargs)`` launches in the simulator: what the
    tracer counts (sectors and lines per request, shared-memory wavefronts, reads and
    writes per thread, the launch's shape)."""
    import numpy as np

    from ..sim import trace
    from ..sim.trace_analysis import request_counts

    with trace.recording() as traces:
        fn(*args, **kwargs)
    rows = []
    for t in traces:
        c = request_counts(t)
        g, s = c["global"], c["shared"]
        per = lambda d, k: d[k] / d["requests"] if d and d["requests"] else None  # noqa: E731
        nthreads = max(1, t.nthreads)
        glob = {a.id for a in t.arrays if a.space == "global"}
        reads = sum(1 for r in t.records if r[2] in glob and r[4] == 0)
        writes = sum(1 for r in t.records if r[2] in glob and r[4] != 0)
        rows.append(
            {
                "kernel": t.kernel_name,
                "grid": str(tuple(t.grid)),
                "block": str(tuple(t.block)),
                "ld_sectors_per_request": per(g.get("ld"), "sectors"),
                "st_sectors_per_request": per(g.get("st"), "sectors"),
                "global_lines_per_request": (
                    sum(d["lines"] for d in g.values())
                    / max(1, sum(d["requests"] for d in g.values()))
                ),
                "shared_ld_conflicts": float(s["ld"]["wavefronts"] - s["ld"]["ideal"])
                if "ld" in s
                else 0.0,
                "shared_st_conflicts": float(s["st"]["wavefronts"] - s["st"]["ideal"])
                if "st" in s
                else 0.0,
                "shared_ld_wavefronts_per_request": per(s.get("ld"), "wavefronts"),
                "shared_ld_requests": float(s["ld"]["requests"]) if "ld" in s else 0.0,
                "shared_st_requests": float(s["st"]["requests"]) if "st" in s else 0.0,
                "shared_st_wavefronts_per_request": per(s.get("st"), "wavefronts"),
                "block_size": float(np.prod(t.block)),
                "grid_size": float(np.prod(t.grid)),
                "reads_per_thread": reads / nthreads,
                "writes_per_thread": writes / nthreads,
            }
        )
    return rows
