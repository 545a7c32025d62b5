"""Lesson 01 figure: which thread owns which element, partitioned vs strided (one warp)."""

from __future__ import annotations

import numpy as np

from .. import plots


def ownership(n: int = 512, threads: int = 32) -> dict:
    """element -> owning thread for the partitioned and the strided (one_block) kernel."""
    chunk = -(-n // threads)
    i = np.arange(n)
    return {
        "partitioned (thread t: a contiguous chunk)": i // chunk,
        "strided (thread t: t, t + 32, ...)": i % threads,
    }


def ownership_figure(n: int = 512, threads: int = 32):
    """Two maps of n elements in rows of 32 floats (= one 128-byte line): colour = thread.
    The first warp request (every thread's first element) is outlined."""
    from matplotlib.patches import Rectangle

    fig, axes = plots.figure(figsize=(9, 3.6), ncols=2)
    for ax, (title, owner) in zip(axes, ownership(n, threads).items()):
        grid = owner.reshape(-1, 32)
        ax.imshow(grid, cmap="twilight", aspect="auto", interpolation="nearest")
        first = [np.argmax(owner == t) for t in range(threads)]
        for e in first:
            ax.add_patch(
                Rectangle((e % 32 - 0.5, e // 32 - 0.5), 1, 1, fill=False, ec="black", lw=1.2)
            )
        lines = len({e // 32 for e in first})
        ax.set_title(f"{title}\nfirst warp request touches {lines} line(s) of 128 B", fontsize=9)
        ax.set_xlabel("float within a 128-byte line")
        ax.set_ylabel("line")
    return fig


def _draw(path):
    fig = ownership_figure()
    fig.savefig(path, dpi=110)


FIGURES = {"vector_add-partitioned-vs-strided.png": _draw}
