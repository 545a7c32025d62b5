"""``python -m course bench sliders [PANEL ...] [--panel PANEL]``: record slider panels' grids.

A panel in simulator mode shows the GPU's figures for the chosen setting (``course/show/
records.py``).  This command makes them: on a GPU, at the lecture's sizes, it times every
variant of a panel at every valid point of its sliders (the same settings, constraint and
launches as the notebook's panel) and writes one JSON record per panel under
``assets/sliders/`` with the device, the date, the measured ceilings and this command.

The panels (a :class:`Panel` per notebook panel: its id, sliders, constraint, the bytes or
FLOPs of a launch and the ``setup()`` that makes its inputs) are ``slider_panels.py``'s and
``face_panels.py``'s; this module times them (:func:`record`) and is the command
(:func:`main`).

``--panel NAME`` (repeatable, like a positional ``PANEL``) records just those panels, e.g.
``python -m course bench sliders --panel 08_flash_attention/N_d --out DIR``.

In simulator mode the command refuses to write a record (its times are a CPU's); ``--dry-run``
runs the grids at simulator sizes into ``--out`` and marks them as such, for tests.
"""

from __future__ import annotations

import sys
import time

from ..measure import perf
from ..platform import runtime
from . import face_panels, slider_panels
from .slider_panels import Panel

COMMAND = "python -m course bench sliders"


def panels() -> dict[str, Panel]:
    """Every panel the command can record, by id (in lesson order)."""
    found = {}
    for make in (*slider_panels.PANELS, *face_panels.PANELS):
        p = make()
        found[p.id] = p
    return dict(sorted(found.items()))


# ---------------------------------------------------------------------------------------
# recording


def record(panel: Panel, quiet: bool = False):
    """Time every variant of ``panel`` at every valid point; a show.records.Record."""
    from ..show.records import Record

    ceilings = perf.measured_ceilings()
    runs = panel.setup()
    unit = "GB/s" if panel.nbytes else "GFLOP/s" if panel.flops else None
    points = []
    for params in panel.points():
        nbytes = panel.nbytes(params) if panel.nbytes else 0
        flops = panel.flops(params) if panel.flops else 0
        results = {}
        for name, run in runs.items():
            t = run(**params)
            ms = t.median_ms
            results[name] = {
                "median_ms": ms,
                "min_ms": t.min_ms,
                "max_ms": t.max_ms,
                "n": len(t.times_ms),
                "rate": (
                    perf.gbps(nbytes, ms)
                    if nbytes
                    else perf.tflops(flops, ms) * 1e3
                    if flops
                    else None
                ),
                "floor_ms": (
                    perf.floor_ms(nbytes, flops, ceilings)
                    if (nbytes or flops) and ceilings.get("copy_gbps")
                    else None
                ),
            }
            if not quiet:
                print(f"  {panel.id:<28} {name:<22} {params}  {ms:.4g} ms", flush=True)
        points.append({"params": params, "results": results})
    device = runtime.device_info().get("name") or runtime.mode_label()
    if runtime.MODE != "gpu":
        device = "simulator (dry run: CPU time, not a GPU's)"
    return Record(
        panel=panel.id,
        device=str(device),
        date=time.strftime("%Y-%m-%d"),
        points=points,
        x=panel.x or next(iter(panel.sliders)),
        sliders={k: list(v) for k, v in panel.sliders.items()},
        rate=unit,
        value=panel.default(),
        ceilings={k: ceilings.get(k) for k in ("copy_gbps", "fp32_tflops")},
        command=f"{COMMAND} {panel.id}",
        title=panel.title,
    )


def main(argv=None) -> int:
    import argparse

    known = panels()
    ap = argparse.ArgumentParser(
        prog=COMMAND, description="record every slider panel's grid on this GPU (assets/sliders/)"
    )
    ap.add_argument("panels", nargs="*", help=f"panels (default all: {', '.join(known)})")
    ap.add_argument(
        "--panel",
        action="append",
        default=[],
        metavar="NAME",
        help="record just this panel (repeatable; the same as naming it positionally)",
    )
    ap.add_argument("--out", default=None, help="folder (default assets/sliders)")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="in the simulator: run the grids at simulator sizes (for tests)",
    )
    args = ap.parse_args(argv)
    chosen = list(dict.fromkeys([*args.panels, *args.panel]))  # in order, once each
    unknown = [p for p in chosen if p not in known]
    if unknown:
        print(f"unknown panel(s) {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    if runtime.MODE != "gpu" and not args.dry_run:
        print(
            "no GPU: a record is a GPU's times (the simulator's are a CPU's); run this on "
            "a GPU, or pass --dry-run --out DIR to try the grids in the simulator",
            file=sys.stderr,
        )
        return 2
    if args.dry_run and not args.out:
        print("--dry-run needs --out (a dry run never writes into assets/)", file=sys.stderr)
        return 2
    for pid in chosen or list(known):
        print(record(known[pid]).save(args.out))
    return 0
