"""``python -m course bench``: time every lesson's variants at lecture sizes in one run.

The reports made on a real GPU - benchmarks, the profiles lesson 10 reads
(``profile_capture``), the tracer-vs-Nsight validation (``validation``), the notebooks'
memory (``notebook_memory``).

Each lesson has a module here with ``TITLE`` and ``run(report)``, named in the lesson index
(``course/lessons.py``); ``run`` adds rows to a :class:`Report`, which sets every time
beside the floor (bytes / measured copy bandwidth, FLOPs / measured FP32 rate) and the peers
(CuPy, PyTorch) and writes a markdown table, a JSON file and a bar chart to
``assets/benchmarks/``.
"""

from __future__ import annotations

import importlib
import json
import math
import time
from pathlib import Path

from .. import lessons as index
from ..measure import perf
from ..measure import timing as _timing
from ..platform import runtime

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "benchmarks"


ONLY_BY_NAME = ("leaderboard", "grading")  # minutes of serving or grading: when asked for


def lessons() -> list[str]:
    """Names of the benchmark modules, those with ``TITLE`` and ``run(report)``: as the
    lesson index names them (``course/lessons.py``: each lesson's bench module and the
    course-wide ones).  The package's other modules are commands of their own - ``cli``,
    ``profile_capture``, ``validation``, ``notebook_memory`` - and ``python -m course
    bench`` with no names must not stop at one of them."""
    return index.bench_modules()


class Report:
    """Rows of one lesson's benchmark on one device, with ceilings and peers."""

    def __init__(self, lesson: str, title: str = "", quiet: bool = False):
        self.lesson, self.title, self.quiet = lesson, title or lesson, quiet
        self.info = runtime.device_info()
        self.ceilings = perf.measured_ceilings()
        self.rows: list[dict] = []
        self.notes: list[str] = []
        self.sections: list[tuple[str, str]] = []  # (title, markdown) after the notes
        self.data: dict = {}  # a lesson's own results, in the JSON
        self.files: dict = {}  # suffix -> bytes saved beside it
        self.date = time.strftime("%Y-%m-%d")

    caught: list = []  # warnings recorded while this report's rows were timed

    def _low_occupancy(self) -> list[str]:
        """Grid sizes numba warned about since the last row (other warnings are printed)."""
        import re
        import sys
        import warnings

        grids = []
        while self.caught:
            w = self.caught.pop(0)
            m = re.search(r"Grid size (\d+)", str(w.message))
            if w.category.__name__ == "NumbaPerformanceWarning" and m:
                if m.group(1) not in grids:
                    grids.append(m.group(1))
            else:
                print(
                    warnings.formatwarning(w.message, w.category, w.filename, w.lineno),
                    file=sys.stderr,
                    end="",
                )
        return grids

    @classmethod
    def load(cls, path) -> Report:
        """A report from its saved JSON (to redraw its markdown and chart)."""
        data = json.loads(Path(path).read_text())
        rep = cls.__new__(cls)
        rep.lesson, rep.title, rep.quiet = data["lesson"], data["title"], True
        rep.info, rep.ceilings = data["device"], data["ceilings"]
        rep.rows, rep.notes, rep.date = data["rows"], data["notes"], data["date"]
        rep.sections = [tuple(x) for x in data.get("sections", [])]
        rep.data = data.get("data", {})
        rep.files = {}
        return rep

    def add(
        self,
        name: str,
        timing,
        *,
        nbytes: float = 0,
        flops: float = 0,
        size: str = "",
        kind: str = "numba",
        note: str = "",
    ) -> dict:
        """Add one measured row; ``nbytes``/``flops``: the minimum the operation must do."""
        ms = timing.median_ms
        c = self.ceilings
        row = {
            "name": name,
            "kind": kind,
            "size": size,
            "median_ms": ms,
            "min_ms": timing.min_ms,
            "max_ms": timing.max_ms,
            "n": len(timing.times_ms),
            "gbps": perf.gbps(nbytes, ms) if nbytes else None,
            "tflops": perf.tflops(flops, ms) if flops else None,
            "floor_ms": perf.floor_ms(nbytes, flops, c) if (nbytes or flops) else None,
            "note": note,
        }
        grids = self._low_occupancy()
        if grids:
            row["note"] = "; ".join(
                x
                for x in (
                    note,
                    f"grid {', '.join(grids)} on purpose (numba's low-occupancy warning silenced)",
                )
                if x
            )
        row["pct_copy"] = perf.percent(row["gbps"], c["copy_gbps"]) if row["gbps"] else None
        row["pct_fp32"] = perf.percent(row["tflops"], c["fp32_tflops"]) if row["tflops"] else None
        self.rows.append(row)
        if not self.quiet:
            print(
                f"  {name:<34} {size:<22} {_fmt(ms, 4)} ms"
                + (f"  {row['gbps']:8.1f} GB/s" if row["gbps"] else "")
                + (f"  {row['tflops']:7.2f} TFLOP/s" if row["tflops"] else ""),
                flush=True,
            )
        return row

    def add_peer(self, lib_name: str, name: str, fn, **kw) -> dict | None:
        """Time a CuPy/PyTorch callable as a peer row; skipped (None) when not installed."""
        lib = perf.peer(lib_name)
        if lib is None:
            self.note(f"{lib_name} not available: its peer row ({name}) was skipped.")
            return None
        return self.add(name, perf.time_peer(lib, fn, label=name), kind="peer", **kw)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def section(self, title: str, markdown: str) -> None:
        """A titled block of markdown (e.g. a per-kernel table) after the notes."""
        self.sections.append((title, markdown))

    # -- output ------------------------------------------------------------------------
    def markdown(self) -> str:
        c, i = self.ceilings, self.info
        lines = [
            f"# {self.title}",
            "",
            f"- device: **{i.get('name')}** (cc {i.get('compute_capability')}, "
            f"{i.get('sm_count')} SMs), mode {i.get('mode')}, date {self.date}",
            f"- measured ceilings: copy {c['copy_gbps']} GB/s (read + write, best of "
            f"cudaMemcpy / numba copy kernel / torch copy_: {c.get('copy_method')}), "
            f"FP32 {c['fp32_tflops']} TFLOP/s (best of numba FMA kernel / cuBLAS SGEMM: "
            f"{c.get('fp32_method')})",
            f"- software: numba {i['numba']}, numba-cuda {i['numba_cuda']}, "
            f"numpy {i['numpy']}, Python {i['python']}",
            "- time: device time per call, median of repeated runs after warm-up (CUDA "
            f"events; calls under {_timing.BATCH_BELOW_MS:g} ms are queued up to {_timing.BATCH} "
            f"at a time - as many as the host enqueues in time - behind a "
            f"{_timing.HOLD_US / 1000:g} ms hold kernel, "
            "so numba's ~20 us host launch overhead is not counted); "
            "floor = max(bytes / copy bandwidth, FLOPs / FP32 rate)",
            "",
            "| variant | kind | size | median ms | min-max ms | GB/s | % copy | TFLOP/s "
            "| % FP32 | x floor | note |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in self.rows:
            xfloor = r["median_ms"] / r["floor_ms"] if r["floor_ms"] else None
            lines.append(
                f"| {r['name']} | {r['kind']} | {r['size']} | {_fmt(r['median_ms'], 4)} | "
                f"{_fmt(r['min_ms'], 3)}-{_fmt(r['max_ms'], 3)} | {_fmt(r['gbps'], 4)} | "
                f"{_fmt(r['pct_copy'], 3)} | {_fmt(r['tflops'], 3)} | {_fmt(r['pct_fp32'], 3)} | "
                f"{_fmt(xfloor, 3)} | {r['note']} |"
            )
        if self.notes:
            lines += ["", "Notes:", ""] + [f"- {n}" for n in self.notes]
        for title, text in self.sections:
            lines += ["", f"## {title}", "", text]
        return "\n".join(lines) + "\n"

    def save(self, outdir: Path | None = None) -> list[Path]:
        """Write <lesson>-<device>-<date>.md/.json/.png (no chart without rows) and any
        ``files``; returns the paths."""
        outdir = Path(outdir or ASSETS)
        outdir.mkdir(parents=True, exist_ok=True)
        stem = outdir / f"{self.lesson}-{runtime.device_slug(self.info.get('name'))}-{self.date}"
        md, js, png = stem.with_suffix(".md"), stem.with_suffix(".json"), stem.with_suffix(".png")
        md.write_text(self.markdown())
        js.write_text(
            json.dumps(
                {
                    "lesson": self.lesson,
                    "title": self.title,
                    "date": self.date,
                    "device": self.info,
                    "ceilings": self.ceilings,
                    "rows": self.rows,
                    "notes": self.notes,
                    "sections": self.sections,
                    "data": self.data,
                },
                indent=1,
                default=str,
            )
        )
        extra = []
        for suffix, data in self.files.items():
            extra.append(stem.with_suffix(suffix))
            extra[-1].write_bytes(data)
        if not self.rows:  # nothing timed (e.g. the leaderboard in the simulator)
            return [md, js, *extra]
        self.plot(png)
        return [md, js, png, *extra]

    def plot(self, path: Path) -> None:
        from ..show import plots

        fig, ax = plots.figure(figsize=(8, 0.45 * len(self.rows) + 1.5))
        plots.time_bars(
            [
                r["name"]
                + (f" ({r['note']})" if r["kind"] == "lecture" else "")
                + (f" [{r['size']}]" if r["size"] else "")
                for r in self.rows
            ],
            [r["median_ms"] for r in self.rows],
            floors=[r["floor_ms"] for r in self.rows],
            kinds=[r["kind"] for r in self.rows],
            axes=ax,
            title=f"{self.title} - {self.info.get('name')} ({self.date})",
        )
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plots.close(fig)


def fastest(run, configs):
    """(Timing, config) for the config whose ``run(config)`` has the smallest median time
    (the first such config on a tie): the "best of a sweep" rows of the reports."""
    return min(((run(c), c) for c in configs), key=lambda tc: tc[0].median_ms)


def _fmt(x, digits: int) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}"


def run(names: list[str] | None = None, outdir: Path | None = None) -> list[Path]:
    """Run the named lessons' benchmarks (all when empty) and save their reports.

    numba's NumbaPerformanceWarning ("Grid size N will likely result in GPU
    under-utilization") is not printed: rows that launch small grids do so on purpose (the
    lecture's one-block kernels, peers' helpers), and each such row's note says so."""
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    names = names or [n for n in lessons() if n not in ONLY_BY_NAME]
    unknown = sorted(set(names) - set(lessons()))
    if unknown:
        raise SystemExit(f"no benchmark for {unknown}; known: {', '.join(lessons())}")
    if runtime.MODE != "gpu":
        print(
            "warning: simulator mode - these are CPU wall times at simulator sizes, not GPU "
            "numbers; the report will say so.",
            flush=True,
        )
    written = []
    for name in names:
        mod = importlib.import_module(f"{__name__}.{name}")
        print(f"== {name}: {mod.TITLE}", flush=True)
        report = Report(name, mod.TITLE)
        with warnings.catch_warnings(record=True) as caught:  # attached to the rows' notes
            warnings.simplefilter("always", NumbaPerformanceWarning)
            report.caught = caught
            mod.run(report)
            report._low_occupancy()
        paths = report.save(outdir)
        written += paths
        print(f"   wrote {paths[0].name}", flush=True)
    return written
