"""``course.profile(fn, *args)``: what the hardware did during one call, in a few numbers.

    p = course.profile(add[blocks, 256], n, x, y)        # a configured launch
    p = course.profile(lesson.VARIANTS["kernel3"], x)    # or a host function
    p                     # a table per kernel: plain words, value, ncu's metric name
    p.rows                # one dict per kernel launched
    p.save("add.json"); course.profile.load("add.json")     # (this module: course.hardware.profiler)

On a GPU the call runs once under Nsight Compute in a separate process (``course/hardware/ncu.py``);
in the simulator the tracer (``course.sim.trace``) counts the same things it can see - sectors
per request, bank-conflict wavefronts, reads and writes per thread - and every other figure
says "needs a GPU" (the readings of both into rows: ``profile_rows.py``).  Nothing raises
for a student's mistake: the Profile says what went wrong instead.
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..platform import runtime
from .profile_rows import from_ncu, traced_rows

# key -> (plain words, ncu metric or formula, can the tracer count it?)
FIELDS = {
    "duration_us": ("kernel duration (us)", "gpu__time_duration.sum", False),
    "dram_read_mb": ("DRAM read (MB)", "dram__bytes_read.sum", False),
    "dram_write_mb": ("DRAM written (MB)", "dram__bytes_write.sum", False),
    "dram_pct_peak": (
        "DRAM throughput, % of peak",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        False,
    ),
    "ld_sectors_per_request": (
        "global load: 32-B sectors per request",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld / ..._requests_...",
        True,
    ),
    "st_sectors_per_request": (
        "global store: 32-B sectors per request",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st / ..._requests_...",
        True,
    ),
    "l1_hit_pct": ("L1 hit rate %", "l1tex__t_sector_hit_rate.pct", False),
    "l2_hit_pct": ("L2 hit rate %", "lts__t_sector_hit_rate.pct", False),
    "shared_ld_conflicts": (
        "shared load bank conflicts",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        True,
    ),
    "shared_st_conflicts": (
        "shared store bank conflicts",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        True,
    ),
    "shared_ld_wavefronts_per_request": (
        "shared load wavefronts per request",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld / smsp__inst_executed_op_shared_ld",
        True,
    ),
    "shared_st_wavefronts_per_request": (
        "shared store wavefronts per request",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st / smsp__inst_executed_op_shared_st",
        True,
    ),
    "achieved_occupancy_pct": (
        "achieved occupancy %",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        False,
    ),
    "theoretical_occupancy_pct": (
        "theoretical occupancy %",
        "sm__maximum_warps_per_active_cycle_pct",
        False,
    ),
    "occupancy_limiter": ("what limits occupancy", "launch__occupancy_limit_* (smallest)", False),
    "registers_per_thread": ("registers per thread", "launch__registers_per_thread", False),
    "shared_bytes_per_block": (
        "shared memory per block (B)",
        "launch__shared_mem_per_block_static + _dynamic",
        False,
    ),
    "block_size": ("threads per block", "launch__block_size", True),
    "grid_size": ("blocks", "launch__grid_size", True),
    "sol_memory_pct": (
        "memory speed of light %",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        False,
    ),
    "sol_compute_pct": (
        "compute speed of light %",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        False,
    ),
    "top_stalls": (
        "top warp stalls (cycles per issued instruction)",
        "smsp__average_warps_issue_stalled_*_per_issue_active.ratio",
        False,
    ),
    "global_lines_per_request": ("global: 128-B lines per request", "(tracer only)", True),
    "reads_per_thread": ("global reads per thread", "(tracer only)", True),
    "writes_per_thread": ("global writes per thread", "(tracer only)", True),
}


@dataclass
class Profile:
    """What ``course.profile`` returns: ``.rows`` (one dict per kernel), text and HTML views."""

    rows: list = field(default_factory=list)
    source: str = "ncu"  # "ncu" (measured) | "tracer" (simulated)
    device: str = ""
    when: str = ""
    seconds: float = 0.0
    error: str = ""

    def status(self, key: str) -> str:
        """'measured', 'simulated', 'needs a GPU' or 'simulator only' for one field."""
        traced = FIELDS[key][2]
        only_tracer = FIELDS[key][1] == "(tracer only)"
        if self.source == "tracer":
            return "simulated" if traced else "needs a GPU"
        return "simulator only" if only_tracer else "measured"

    # -- views ---------------------------------------------------------------------------
    def _title(self) -> str:
        how = (
            "Nsight Compute"
            if self.source == "ncu"
            else "course.sim.trace in the simulator: simulated counts"
        )
        return f"profile ({how}; {self.device or '?'}; {self.when or '?'}; {self.seconds:.1f} s)"

    def __repr__(self) -> str:
        if self.error:
            return f"profile: not measured - {self.error}"
        out = [self._title()]
        for r in self.rows:
            out.append(f"  kernel {r['kernel']}  grid {r.get('grid')}  block {r.get('block')}")
            for key, (words, metric, _t) in FIELDS.items():
                st = self.status(key)
                if st == "simulator only":
                    continue
                value = _fmt(r.get(key)) if st in ("measured", "simulated") else st
                tag = " (simulated)" if st == "simulated" else ""
                out.append(f"    {words:<48} {value:>14}{tag}   {metric}")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        if self.error:
            return (
                f"<div style='border:2px solid #b42318;padding:6px'><b>profile: not "
                f"measured</b> - {html.escape(self.error)}</div>"
            )
        parts = [f"<div><b>{html.escape(self._title())}</b>"]
        for r in self.rows:
            cells = []
            for key, (words, metric, _t) in FIELDS.items():
                st = self.status(key)
                if st == "simulator only":
                    continue
                value = _fmt(r.get(key)) if st in ("measured", "simulated") else f"<i>{st}</i>"
                cells.append(
                    f"<tr><td>{html.escape(words)}</td><td style='text-align:right'>"
                    f"{value if st == 'needs a GPU' else html.escape(value)}"
                    f"{' <i>(sim)</i>' if st == 'simulated' else ''}</td>"
                    f"<td><code>{html.escape(metric)}</code></td></tr>"
                )
            parts.append(
                f"<p>kernel <code>{html.escape(str(r['kernel']))}</code>, grid "
                f"{html.escape(str(r.get('grid')))}, block "
                f"{html.escape(str(r.get('block')))}</p><table>{''.join(cells)}</table>"
            )
        return "".join(parts) + "</div>"

    # -- JSON ----------------------------------------------------------------------------
    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(
            json.dumps(
                {
                    "version": 1,
                    "source": self.source,
                    "device": self.device,
                    "when": self.when,
                    "seconds": self.seconds,
                    "error": self.error,
                    "rows": self.rows,
                },
                indent=1,
            )
        )
        return path

    @classmethod
    def load(cls, path) -> Profile:
        d = json.loads(Path(path).read_text())
        return cls(
            rows=d["rows"],
            source=d["source"],
            device=d.get("device", ""),
            when=d.get("when", ""),
            seconds=d.get("seconds", 0.0),
            error=d.get("error", ""),
        )


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return ", ".join(f"{name} {x:.1f}" for name, x in v)
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


# ---------------------------------------------------------------------------------------


def profile(
    fn, *args, timeout: float = 120, launches: int = 20, clock_control: str = "none", **kwargs
) -> Profile:
    """Profile one call ``fn(*args, **kwargs)``: Nsight Compute on a GPU, the tracer in the
    simulator.  ``launches``: kernels profiled at most; ``timeout`` in seconds."""
    started = time.perf_counter()
    when = time.strftime("%Y-%m-%d")
    if runtime.MODE == "sim":
        try:
            rows = traced_rows(fn, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - said, not raised
            return Profile(
                source="tracer",
                device="simulator",
                when=when,
                error=f"the call failed in the simulator: {type(exc).__name__}: {str(exc)[:300]}",
            )
        p = Profile(rows, "tracer", "simulator", when, time.perf_counter() - started)
        if not rows:
            p.error = "the function launched no kernel, so there is nothing to profile"
        return p
    from . import ncu

    device = runtime.device_info().get("name", "GPU")
    try:
        raw = ncu.profile_call(
            fn, args, kwargs, timeout=timeout, launches=launches, clock_control=clock_control
        )
    except ncu.NcuError as exc:
        return Profile(source="ncu", device=device, when=when, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - e.g. an argument that cannot be pickled
        return Profile(
            source="ncu",
            device=device,
            when=when,
            error=f"could not hand the call to ncu: {type(exc).__name__}: {exc}",
        )
    return Profile([from_ncu(r) for r in raw], "ncu", device, when, time.perf_counter() - started)


def compare(
    rows: dict,
    keys=(
        "duration_us",
        "dram_pct_peak",
        "ld_sectors_per_request",
        "shared_ld_conflicts",
        "shared_st_conflicts",
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "occupancy_limiter",
        "sol_memory_pct",
        "sol_compute_pct",
        "top_stalls",
    ),
    title: str = "",
    note: str = "",
):
    """A Table with one column per profiled kernel: ``rows`` maps a label to a Profile row."""
    from ..measure.tables import Table

    t = Table(["", *rows], title=title, note=note)
    for key in keys:
        t.add(FIELDS[key][0], *(_fmt(r.get(key)) for r in rows.values()))
    return t


profile.load = Profile.load
