"""A lesson's timing table, honest in both modes: measured on a GPU, the committed GPU
report in the simulator.

The simulator runs each CUDA thread as a CPU thread: its wall time says nothing of a GPU's
(lesson 01's many-blocks vector add *looks* 54x slower than one thread there).  So in
simulator mode a timing table never shows the simulator's time as a time, a bandwidth or a
speed-up: :func:`timing_table` shows the rows of the newest committed GPU report of the
lesson (``python -m course bench``, under ``assets/benchmarks/<lesson>-<card>-<date>.json``),
titled with the card, the date and the report's size, and beside them what the simulator
can honestly say of its own small run (``counts``: threads launched, reads counted...).
On a GPU it is the measured table (``course.measure.tables.speedup_table``), as before.

    reported.timing_table(measured, nbytes, lesson="vector_add", title="Vector add",
                          counts={"one_thread": {"threads": 1}, ...})
"""

from __future__ import annotations

import json
from pathlib import Path

from ..measure import tables
from ..platform import resources, runtime

FOLDER = ("assets", "benchmarks")


class NoReport(LookupError):
    """No committed GPU report of a lesson (the table would have nothing true to show)."""


def reports(lesson: str, where: Path | None = None) -> list[dict]:
    """Every committed GPU report of ``lesson``, newest first (each with its file name)."""
    where = Path(where) if where else resources.path(*FOLDER)
    found = []
    for path in sorted(where.glob(f"{lesson}-*.json")) if where.is_dir() else []:
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        dev = d.get("device") if isinstance(d, dict) else None
        if not isinstance(dev, dict) or d.get("lesson") != lesson or dev.get("mode") != "gpu":
            continue  # another lesson's file that shares the prefix, or no GPU's
        if isinstance(d.get("rows"), list) and dev.get("name") and d.get("date"):
            found.append(dict(d, file=path.name))
    return sorted(found, key=lambda d: d["date"], reverse=True)


def report(lesson: str, where: Path | None = None) -> dict:
    """The newest committed GPU report of ``lesson``; :class:`NoReport` when there is none."""
    found = reports(lesson, where)
    if not found:
        raise NoReport(
            f"no committed GPU report of {lesson!r} under assets/benchmarks/ "
            f"(python -m course bench {lesson} on a GPU writes one)"
        )
    return found[0]


def label(rep: dict) -> str:
    """'NVIDIA H200, 2026-11-22' (the card and the date a report was measured)."""
    return f"{rep['device']['name']}, {rep['date']}"


def find(rep: dict, name: str, size: str | None = None) -> dict | None:
    """The report's row of variant ``name`` (exactly, or ``name (details)``), at ``size``
    (default: the size of the first row that matches)."""
    rows = [r for r in rep["rows"] if r.get("kind") != "lecture"]
    if size is not None:
        rows = [r for r in rows if r.get("size") == size]
    for exact in (True, False):
        for r in rows:
            n = r.get("name", "")
            if n == name if exact else n.startswith(f"{name} ("):
                return r
    return None


def gpu_table(
    lesson: str,
    names,
    *,
    title: str = "",
    size: str | None = None,
    counts: dict | None = None,
    lecture: dict | None = None,
    speedup: bool = True,
    where: Path | None = None,
) -> tables.Table:
    """The report's time, rate and speed-up (against the first name; ``speedup=False``
    leaves it out) of ``names`` (a list, or {shown name: report row name}), the lecture's
    times ({name: {device: ms}}) and the simulator's ``counts`` ({name: {what: value}})
    beside."""
    rep = report(lesson, where)
    names = names if isinstance(names, dict) else {n: n for n in names}
    counts, lecture = counts or {}, lecture or {}
    what = list(dict.fromkeys(k for c in counts.values() for k in c))
    devices = sorted({d for v in lecture.values() for d in v})
    found = {shown: find(rep, row, size) for shown, row in names.items()}
    rate = "TFLOP/s" if any(r and r.get("tflops") for r in found.values()) else "GB/s"
    cols = ["variant", "GPU time (ms)", f"GPU {rate}"] + ["speed-up (GPU)"] * speedup
    cols += [f"{d} (ms, lecture)" for d in devices] + [f"simulator: {w}" for w in what]
    sizes = sorted({r["size"] for r in found.values() if r and r.get("size")})
    t = tables.Table(
        cols,
        title=f"{title + ': ' if title else ''}recorded on {label(rep)}"
        + (f" ({', '.join(sizes)})" if sizes else ""),
        note=(
            f"GPU figures from assets/benchmarks/{rep['file']}. The simulator ran these "
            "kernels at small sizes: its CPU time is not a GPU's and is not shown."
            + (" Its counts are beside." if what else "")
        ),
    )
    first = next((r["median_ms"] for r in found.values() if r), None)
    for shown, r in found.items():
        ms = r["median_ms"] if r else None
        t.add(
            shown,
            ms,
            (r.get("tflops") if rate == "TFLOP/s" else r.get("gbps")) if r else None,
            *([first / ms if (first and ms) else None] if speedup else []),
            *[lecture.get(shown, {}).get(d) for d in devices],
            *[counts.get(shown, {}).get(w) for w in what],
        )
    return t


def timing_table(
    measured: dict,
    nbytes: float,
    *,
    lesson: str,
    lecture: dict | None = None,
    title: str = "",
    sized: str = "",
    names: dict | None = None,
    size: str | None = None,
    counts: dict | None = None,
) -> tables.Table:
    """On a GPU the measured table (time, GB/s, speed-ups, the lecture's columns), titled
    ``title, sized (card)``; in the simulator the committed GPU report's rows for the same
    variants (``names`` maps a variant to its row name in the report where they differ;
    ``size`` picks the report's size) with the lecture's and ``counts`` beside, titled with
    the report's card, date and size."""
    if runtime.MODE == "gpu":
        said = ", ".join(x for x in (title, sized) if x)
        return tables.speedup_table(
            measured, nbytes, lecture=lecture, title=f"{said} ({runtime.device_name()})"
        )
    rows = {v: (names or {}).get(v, v) for v in measured}
    return gpu_table(lesson, rows, title=title, size=size, counts=counts, lecture=lecture)
