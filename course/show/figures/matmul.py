"""Lesson 04 figures: counted reads vs the lecture's formulas, and the (L, V, S) heat map."""

from __future__ import annotations

import json
from pathlib import Path

from .. import plots

SWEEP_JSON = (
    Path(__file__).resolve().parents[3] / "assets" / "benchmarks" / "matmul-sweep-nvidia-h200.json"
)


def heatmap(sweep: dict, *, axes) -> None:
    """GFLOP/s of v3 per (L, V) row and S column; ``sweep`` as saved by bench.matmul."""
    g = {tuple(int(v) for v in k.split(",")): val for k, val in sweep["gflops"].items()}
    rows = sorted({(L, V) for L, V, _ in g})
    cols = sorted({S for _, _, S in g})
    import numpy as np

    data = np.full((len(rows), len(cols)), np.nan)
    for (L, V, S), val in g.items():
        data[rows.index((L, V)), cols.index(S)] = val
    im = axes.imshow(data, cmap="viridis", aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            if data[i, j] == data[i, j]:
                axes.text(
                    j,
                    i,
                    f"{data[i, j] / 1e3:.1f}",
                    ha="center",
                    va="center",
                    color="white" if data[i, j] < np.nanmax(data) * 0.6 else "black",
                    fontsize=8,
                )
    axes.set_xticks(range(len(cols)), [str(c) for c in cols])
    axes.set_yticks(range(len(rows)), [f"L={L}, V={V}" for L, V in rows])
    axes.set_xlabel("S (K step)")
    axes.set_title(f"v3 TFLOP/s, N = {sweep.get('n')} on {sweep.get('device')}", fontsize=10)
    axes.figure.colorbar(im, ax=axes, label="GFLOP/s")


def draw_sweep(path) -> None:
    fig, ax = plots.figure(figsize=(6, 3.6))
    heatmap(json.loads(SWEEP_JSON.read_text()), axes=ax)
    fig.savefig(path, dpi=110)
    plots.close(fig)


def draw_traffic(path) -> None:
    """Bars: the lecture's global-read formulas at N = 4096 (V = 8, L = 128), log scale."""
    from ...kernels import matmul

    n, V, L = 4096, 8, 128
    f = matmul.formulas(n, V, L)
    names = list(f)
    fig, ax = plots.figure(figsize=(6.5, 3))
    ax.barh(names, [f[k]["global"] * 4 / 1e9 for k in names], color=plots.COLORS["numba"])
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("global bytes read (GB), N = 4096, V = 8, L = 128")
    ax.set_title("The lecture's traffic formulas (checked by counting at N = 32)", fontsize=10)
    fig.savefig(path, dpi=110)
    plots.close(fig)


FIGURES = {"matmul-sweep.png": draw_sweep, "matmul-traffic.png": draw_traffic}
