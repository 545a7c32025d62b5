"""Per-kernel time of a program of many launches: the CS 483 report's Nsight Systems table.

    tl = Timeline()
    model(tokens, run=tl.run)        # the program calls tl.run(name, launch) per launch
    tl.table()                       # kernel, time %, total ms, launches, average ms

On a GPU each launch is bracketed by two CUDA events queued behind a kernel that holds the
GPU for 2 ms (``timing``'s hold kernel), so the events see the kernel's device time only -
not the host's time to launch it - as in Nsight Systems' kernel summary.  In the simulator the row is the synchronized wall time of
the launch on the CPU, and :attr:`simulated` says so.
"""

from __future__ import annotations

import time

from ..platform import runtime
from .timing import events_ms


class Timeline:
    def __init__(self):
        self.rows: dict[str, list[float]] = {}
        self.simulated = runtime.MODE != "gpu"

    def run(self, name: str, launch) -> None:
        """Run ``launch()`` (which enqueues one kernel, or a few under one name) and add its
        time to ``name``'s row."""
        from numba import cuda

        if self.simulated:
            t0 = time.perf_counter()
            launch()
            cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3
        else:  # the benchmark's events, one call behind the hold kernel
            ms = events_ms(cuda, launch, (), 1, hold=True)
        self.rows.setdefault(name, []).append(ms)

    def total_ms(self) -> float:
        return sum(sum(v) for v in self.rows.values())

    def table(self) -> list[dict]:
        """Rows: kernel, percent, total_ms, launches, avg_ms; the largest first."""
        total = self.total_ms() or 1.0
        rows = [
            {
                "kernel": k,
                "percent": 100 * sum(v) / total,
                "total_ms": sum(v),
                "launches": len(v),
                "avg_ms": sum(v) / len(v),
            }
            for k, v in self.rows.items()
        ]
        return sorted(rows, key=lambda r: -r["total_ms"])

    def markdown(self, rows: list[dict] | None = None) -> str:
        """The table as markdown (the report's columns)."""
        rows = self.table() if rows is None else rows
        unit = "simulated ms" if self.simulated else "ms"
        lines = [
            f"| kernel | time % | total ({unit}) | launches | average ({unit}) |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['kernel']} | {r['percent']:.1f} | {r['total_ms']:.4g} | "
            f"{r['launches']} | {r['avg_ms']:.4g} |"
            for r in rows
        ]
        return "\n".join(lines)
