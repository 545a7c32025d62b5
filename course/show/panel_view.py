"""What a slider panel says beside its sliders: the status lines (time, rate, the record,
the simulator's counts) and, in simulator mode, the plot of the GPU's recorded grid.

Split from ``widgets.py`` (the controls and the running); nothing here launches a kernel.
"""

from __future__ import annotations

import html

from ..measure.timing import Timing
from ..platform import runtime
from . import plots


def _escape(s: str) -> str:
    return html.escape(s)


def recorded(record, x: str, xs: list, params: dict) -> tuple[dict, dict]:
    """The record's time (ms) and rate per variant at each value of ``x``, the other
    sliders at ``params``."""
    times: dict = {}
    rates: dict = {}
    for v in xs:
        rows = record.at(dict(params, **{x: v})) or {}
        for name, row in rows.items():
            times.setdefault(name, [None] * len(xs))[xs.index(v)] = row.get("median_ms")
            rates.setdefault(name, [None] * len(xs))[xs.index(v)] = row.get("rate")
    return times, rates


def recorded_figure(record, x: str, xs: list, params: dict, title: str = ""):
    """Simulator mode's plot: the GPU's recorded grid, or a sentence when there is none."""
    times, rates = recorded(record, x, xs, params) if record else ({}, {})
    if not any(y is not None for ys in times.values() for y in ys):
        said = ", ".join(f"{k} = {v}" for k, v in params.items())
        return plots.message(
            f"{said}: no GPU record of this setting.\nThe simulator runs "
            "each CUDA thread as a CPU thread: its time says nothing\nof a "
            "GPU's, so none is plotted (python -m course bench sliders\n"
            "records a panel's grid on a GPU)."
        )
    unit = record.rate
    fig, axes = plots.figure(figsize=(9, 3.4) if unit else (5.5, 3.4), ncols=2 if unit else 1)
    numeric = all(isinstance(v, (int, float)) for v in xs)
    at = params[x] if numeric else xs.index(params[x])
    xv = xs if numeric else list(range(len(xs)))
    logx = numeric and all(isinstance(v, int) and v > 0 and v & (v - 1) == 0 for v in xs)
    plots.sweep(
        xv,
        times,
        xlabel=x,
        ylabel="GPU time (ms)",
        axes=axes[0] if unit else axes,
        highlight=at,
        logx=logx,
        logy=True,
        title=title,
        source=record.label,
    )
    if unit:
        c = record.ceilings or {}
        ceiling = (
            c.get("copy_gbps")
            if unit == "GB/s"
            else (c.get("fp32_tflops") and c["fp32_tflops"] * 1e3)
        )
        plots.sweep(
            xv,
            rates,
            xlabel=x,
            ylabel=unit,
            axes=axes[1],
            highlight=at,
            logx=logx,
            ceiling=ceiling,
            source=record.label,
            ceiling_label="measured copy bandwidth" if unit == "GB/s" else "FP32 peak",
        )
    return fig


def rate(t: Timing, params: dict, nbytes, flops) -> float:
    if nbytes:
        return t.gbps(nbytes(params) if callable(nbytes) else nbytes)
    return t.gflops(flops(params) if callable(flops) else flops)


def mode_html(record) -> str:
    said = (
        f"the plot is the GPU's time, {_escape(record.label)}"
        if record
        else "no GPU record of this panel yet (<code>python -m course bench sliders</code> on "
        "a GPU makes one)"
    )
    if runtime.MODE == "gpu":
        return (
            "<small><b>GPU</b>"
            + (f"; dashed: {_escape(record.label)}" if record else "")
            + "</small>"
        )
    return (
        f"<small><b>simulator</b>: {said}; below it, what the simulator counts of the "
        "same launch. The simulator's CPU time is not a speed.</small>"
    )


def status_html(res, params, nbytes, flops, record=None) -> str:
    """The figures of the current setting: measured on a GPU (with the record's time
    beside), the record's in the simulator (nothing is timed there when there is one)."""
    rows = (record.at(params) if record else None) or {}
    parts = []
    if runtime.MODE == "gpu":
        for name, t in (res or {}).items():
            r = (
                f", {rate(t, params, nbytes, flops):.4g} {'GB/s' if nbytes else 'GFLOP/s'}"
                if (nbytes or flops)
                else ""
            )
            rec = rows.get(name)
            ref = f" (record: {rec['median_ms']:.4g} ms)" if rec else ""
            parts.append(f"<b>{_escape(name)}</b>: {t.median_ms:.4g} ms{r}{ref}")
        return " &nbsp;|&nbsp; ".join(parts)
    if rows:
        return recorded_html(record, params)
    cpu = sum(t.median_ms for t in (res or {}).values()) / 1e3
    names = ", ".join(f"<b>{_escape(n)}</b>" for n in (res or {}))
    return f"{names or 'this setting'}: no GPU record of this setting" + (
        f"<br><small>ran in the simulator: {cpu:.2g} s of CPU time, not a speed</small>"
        if res
        else ""
    )


def recorded_html(record, params) -> str:
    """The record's figures at ``params``, marked with its card and date."""
    parts = []
    for name, rec in ((record.at(params) if record else None) or {}).items():
        r = f", {rec['rate']:.4g} {record.rate}" if record.rate and rec.get("rate") else ""
        parts.append(f"<b>{_escape(name)}</b>: {rec['median_ms']:.4g} ms{r} on the GPU")
    return " &nbsp;|&nbsp; ".join(parts) + f" <small>({_escape(record.label)})</small>"


def counts_html(counted: dict, record, params) -> str:
    floors = {
        n: r["floor_ms"]
        for n, r in ((record.at(params) if record else None) or {}).items()
        if r.get("floor_ms")
    }
    items = [f"{_escape(k)} {_escape(str(v))}" for k, v in counted.items()]
    if floors:
        f = min(floors.values())
        items.append(f"roofline floor on the GPU {f:.4g} ms")
    if not items:
        return ""
    who = "the simulator counts" if runtime.MODE != "gpu" else "counts"
    return f"<br><small>{who}: " + " &middot; ".join(items) + "</small>"
