"""The one plotting layer: figure -> axes -> plot.  Every plot helper takes ``axes=``
so a slider panel, a notebook cell or a benchmark report can reuse it.

Plots never call ``plt.show``; they draw on an Agg figure that the caller displays or
saves, so they work the same headless, in JupyterLab and in CI.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg", force=False)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: E402

from ..platform import runtime  # noqa: E402

COLORS = {
    "numba": "#1f77b4",
    "peer": "#7f7f7f",
    "lecture": "#bcbd22",
    "floor": "#d62728",
    "current": "#ff7f0e",
}


def figure(figsize=(6.5, 3.6), ncols: int = 1):
    """A new Agg figure and its axes (one, or a list of ``ncols``)."""
    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def close(fig) -> None:
    """Release a figure (Agg figures are freed with their references)."""
    fig.clear()


def png_bytes(fig, dpi: int = 90) -> bytes:
    """The figure as PNG bytes (for an ipywidgets.Image or a file)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def mode_note(ax, source: str | None = None) -> None:
    """Say under the axes what its numbers mean in this mode (never over the data);
    ``source``: where they come from instead (e.g. 'recorded on NVIDIA H100, 2026-11-26')."""
    if source:
        ax.set_xlabel(ax.get_xlabel() + f"\n({source})", color="#1a4f8b")
    elif runtime.MODE != "gpu":
        ax.set_xlabel(
            ax.get_xlabel() + "\n(simulator: CPU wall time, not GPU speed)", color="#a00000"
        )


def message(text: str, figsize=(6.5, 2.2)):
    """A figure that says something instead of plotting (e.g. why there is no plot)."""
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=10)
    return fig


def sweep(
    xs,
    series: dict,
    *,
    xlabel: str,
    ylabel: str,
    axes,
    highlight=None,
    logx: bool = True,
    logy: bool = False,
    title: str = "",
    ceiling: float | None = None,
    ceiling_label: str = "",
    source: str | None = None,
    dashed=(),
) -> None:
    """Lines of y vs x for each named series; ``highlight`` = x of the current point;
    ``source``: where the numbers come from (:func:`mode_note`); ``dashed``: series names
    drawn as references (dashed)."""
    ax = axes
    for name, ys in series.items():
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if not pts:
            continue
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            ms=4,
            label=name,
            ls="--" if name in dashed else "-",
        )
        if highlight is not None:
            cur = [p for p in pts if p[0] == highlight]
            if cur:
                ax.plot(
                    [cur[0][0]],
                    [cur[0][1]],
                    marker="o",
                    ms=11,
                    mfc="none",
                    mec=COLORS["current"],
                    mew=2,
                )
    if ceiling:
        ax.axhline(ceiling, color=COLORS["floor"], ls="--", lw=1)
        ax.text(
            ax.get_xlim()[0],
            ceiling,
            f" {ceiling_label}",
            color=COLORS["floor"],
            va="bottom",
            fontsize=8,
        )
    if logx:
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(xs), [f"{x:g}" for x in xs])
        ax.xaxis.set_minor_locator(NullLocator())
    ys = [y for ys_ in series.values() for y in ys_ if y]
    if logy and ys and max(ys) / min(ys) > 20:  # a log axis only when it spans decades
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    mode_note(ax, source)


def time_bars(
    labels, times_ms, *, axes, floors=None, kinds=None, title: str = "", logx: bool = True
) -> None:
    """Horizontal bars of time (ms) per variant, with each row's floor as a red tick."""
    ax = axes
    ys = range(len(labels))
    colors = [COLORS.get(k, COLORS["numba"]) for k in (kinds or ["numba"] * len(labels))]
    ax.barh(list(ys), times_ms, color=colors)
    if floors:
        for y, f in zip(ys, floors):
            if f:
                ax.plot([f, f], [y - 0.4, y + 0.4], color=COLORS["floor"], lw=2)
    ax.set_yticks(list(ys), labels, fontsize=8)
    ax.invert_yaxis()
    from matplotlib.patches import Patch

    shown = sorted(set(kinds or ["numba"]))
    handles = [Patch(color=COLORS.get(k, COLORS["numba"]), label=k) for k in shown]
    if floors and any(floors):
        handles.append(Patch(color=COLORS["floor"], label="floor (bytes/bandwidth, FLOPs/peak)"))
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("time per call (ms, median)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    mode_note(ax)


def show(fig):
    """Display an Agg figure in a notebook (as a PNG image) and return it."""
    from IPython.display import Image, display

    display(Image(png_bytes(fig)))
    return fig
