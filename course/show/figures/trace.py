"""Pictures of a traced launch (course.sim.trace): per-thread access counts and an access map.

``trace_figure(trace, array)`` is what ``Trace.plot`` returns; ``FIGURES`` draws the demo
``assets/trace-coalescing.png`` (a coalesced copy beside a strided one).
"""

from __future__ import annotations

import numpy as np

from .. import plots

SECTOR = 32  # bytes


def access_map(trace, array: str, *, axes, row: int | None = None, title: str = ""):
    """Which warp touched each element of ``array`` (colour = global warp id mod 10, white =
    not touched, grey lines = 32-byte sectors; an element touched by several warps shows the first).  1-D arrays are drawn in
    rows of ``row`` elements (default: one 128-byte line per row)."""
    a = trace._array(array)
    n = int(np.prod(a.shape))
    owner = np.full(n, -1.0)
    nb_warps = -(-int(np.prod(trace.block)) // 32)
    gx, gy, _ = trace.grid
    for blk, tid, aid, off, _kind, *_ in trace.records:
        e = off // a.itemsize
        if aid == a.id and 0 <= e < n and owner[e] < 0:
            owner[e] = (blk[0] + gx * (blk[1] + gy * blk[2])) * nb_warps + tid // 32
    if len(a.shape) == 2:
        grid = owner.reshape(a.shape)
    else:
        row = row or max(1, 128 // a.itemsize)
        pad = -n % row
        grid = np.concatenate([owner, np.full(pad, -1.0)]).reshape(-1, row)
    shown = np.ma.masked_less(grid, 0)
    cmap = plots.matplotlib.colormaps["tab10"].with_extremes(bad="white")
    axes.imshow(shown % 10, cmap=cmap, vmin=0, vmax=9, aspect="auto", interpolation="nearest")
    if len(a.shape) == 1:  # 32-byte sector boundaries
        for x in range(SECTOR // a.itemsize, grid.shape[1], max(1, SECTOR // a.itemsize)):
            axes.axvline(x - 0.5, color="#999", lw=0.5)
    axes.set_title(title or f"{array}: which warp touched each element", fontsize=10)
    axes.set_xlabel("element within a 128-byte line" if len(a.shape) == 1 else "column")
    axes.set_ylabel("line" if len(a.shape) == 1 else "row")
    return axes


def count_grid(trace, array: str, *, axes, title: str = ""):
    """Accesses (reads + writes) of ``array`` per thread: one row per block, one column
    per thread (linear thread id)."""
    reads, writes = trace.counts(array)
    im = axes.imshow(reads + writes, cmap="viridis", aspect="auto", interpolation="nearest")
    axes.figure.colorbar(im, ax=axes, label="accesses")
    axes.set_title(
        title
        or f"{array}: reads+writes per thread (total {reads.sum()} reads, {writes.sum()} writes)",
        fontsize=10,
    )
    axes.set_xlabel("thread (linear id in block)")
    axes.set_ylabel("block")
    return axes


def trace_figure(trace, array: str | None = None, *, max_threads: int = 1024):
    """Count grid + access map of one array (default: the first traced array)."""
    if array is None:
        if not trace.arrays:
            raise ValueError("the kernel accessed no array: nothing to plot")
        array = trace.arrays[0].name
    if trace.nthreads > max_threads:
        raise ValueError(
            f"{trace.nthreads} threads is too many to draw (max_threads="
            f"{max_threads}); print(trace.summary()) instead"
        )
    fig, (ax0, ax1) = plots.figure(figsize=(10, 3.6), ncols=2)
    count_grid(trace, array, axes=ax0)
    access_map(trace, array, axes=ax1)
    return fig


def _demo(path):
    import course.sim.trace as trace

    src = np.arange(32 * 64, dtype=np.float32)  # 64 lines of 128 bytes
    dst = np.zeros(64, dtype=np.float32)
    fig, axes = plots.figure(figsize=(10, 3.8), ncols=2)
    for ax, (kernel, label) in zip(
        axes,
        [
            (_copy_rows, "coalesced: lane i reads x[i]"),
            (_copy_cols, "strided: lane i reads x[32*i]"),
        ],
    ):
        t = trace.run(kernel, 1, 64, src, dst)  # 2 warps
        c = t.coalescing_counts()["x"]
        access_map(
            t,
            "x",
            axes=ax,
            title=f"{label}\n{c['sectors'] / c['requests']:.0f} "
            f"sectors per warp request (minimum {c['min_sectors'] / c['requests']:.0f})",
        )
    fig.savefig(path, dpi=110)


from numba import cuda  # noqa: E402 - kernels of the demo figure (module-level cuda global)


@cuda.jit
def _copy_rows(x, out):
    i = cuda.grid(1)  # thread i reads x[i]: a warp reads one 128-byte line
    out[i] = x[i]


@cuda.jit
def _copy_cols(x, out):
    i = cuda.grid(1)  # thread i reads x[32*i]: a warp touches 32 lines
    out[i] = x[32 * i]


FIGURES = {"trace-coalescing.png": _demo}
