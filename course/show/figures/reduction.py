"""Lesson 02 figures: the reduction trees of kernels 1-3, thread/warp activity per step,
shared-memory bank conflicts, the warp-shuffle tree and the grid-stride layout.

Every picture is computed from the same index arithmetic as the kernels in
``course/kernels/reduction.py`` (which thread adds which slot at which step).
"""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.patches import Rectangle

from .. import plots

WARP, BANKS = 32, 32


def adds(kernel: int, n: int):
    """[(step s, thread, destination slot, source slot)] of kernel 1, 2 or 3 on n slots."""
    out = []
    if kernel in (1, 2):
        s = 1
        while s < n:
            for tid in range(n):
                if kernel == 1 and tid % (2 * s) == 0:
                    out.append((s, tid, tid, tid + s))
                if kernel == 2 and 2 * s * tid < n:
                    out.append((s, tid, 2 * s * tid, 2 * s * tid + s))
            s *= 2
    else:
        s = n // 2
        while s > 0:
            out += [(s, tid, tid, tid + s) for tid in range(s)]
            s //= 2
    return out


def _tree(ax, kernel: int, n: int = 16, title: str = ""):
    steps = sorted({a[0] for a in adds(kernel, n)}, reverse=(kernel == 3))
    cmap = colormaps["tab20"]
    for x in range(n):
        ax.text(
            x,
            0,
            str(x),
            ha="center",
            va="center",
            fontsize=7,
            bbox=dict(boxstyle="round", fc="#eeeeee", ec="#999999", lw=0.5),
        )
    for row, s in enumerate(steps, start=1):
        for _s, tid, dst, src in [a for a in adds(kernel, n) if a[0] == s]:
            c = cmap(tid % 20)
            ax.annotate(
                "",
                xy=(dst, row),
                xytext=(src, row - 1),
                arrowprops=dict(arrowstyle="->", color=c, lw=1),
            )
            ax.annotate(
                "",
                xy=(dst, row),
                xytext=(dst, row - 1),
                arrowprops=dict(arrowstyle="->", color=c, lw=1),
            )
            ax.text(
                dst,
                row,
                f"t{tid}",
                ha="center",
                va="center",
                fontsize=6.5,
                bbox=dict(boxstyle="circle", fc=c, ec="none", alpha=0.85),
            )
        ax.text(-1.2, row, f"s={s}", ha="right", va="center", fontsize=7)
    ax.set_xlim(-2.5, n)
    ax.set_ylim(len(steps) + 0.6, -0.6)
    ax.axis("off")
    ax.set_title(title, fontsize=9)


def draw_trees(path):
    """The three trees on 16 slots: which thread (tN) adds which two slots at each step."""
    fig, axes = plots.figure(figsize=(13, 3.6), ncols=3)
    _tree(axes[0], 1, title="Kernel 1: interleaved, tid % (2s) == 0 (divergent)")
    _tree(axes[1], 2, title="Kernel 2: interleaved, index = 2*s*tid (contiguous threads)")
    _tree(axes[2], 3, title="Kernel 3: sequential, tid < s (contiguous slots)")
    fig.savefig(path, dpi=110)
    plots.close(fig)


def activity(kernel: int, n: int = 256) -> np.ndarray:
    """(steps, n) array: 1 where a thread adds at that step, 0 where it idles."""
    acts = adds(kernel, n)
    steps = sorted({a[0] for a in acts}, reverse=(kernel == 3))
    a = np.zeros((len(steps), n))
    for s, tid, _d, _src in acts:
        a[steps.index(s), tid] = 1
    return a


def draw_activity(path, n: int = 256):
    """Thread activity per step for 256 threads (8 warps), and busy warps per step."""
    fig, axes = plots.figure(figsize=(12, 3.6), ncols=4)
    names = {1: "Kernel 1 (divergent)", 2: "Kernel 2 (strided index)", 3: "Kernel 3 (sequential)"}
    busy = {}
    for k, ax in zip((1, 2, 3), axes):
        a = activity(k, n)
        ax.imshow(a, aspect="auto", cmap="Greens", vmin=0, vmax=1.3, interpolation="nearest")
        for w in range(0, n + 1, WARP):
            ax.axvline(w - 0.5, color="#555", lw=0.4)
        ax.set_title(names[k], fontsize=9)
        ax.set_xlabel("thread (lines = warp borders)")
        ax.set_ylabel("step")
        busy[k] = [len({t // WARP for t in np.nonzero(row)[0]}) for row in a]
    for k, ys in busy.items():
        axes[3].plot(
            range(1, len(ys) + 1),
            ys,
            marker="o",
            label=names[k],
            ls="--" if k == 2 else "-",
            ms=7 if k == 2 else 4,
        )
    axes[3].set_xlabel("step")
    axes[3].set_ylabel("warps that must issue the add")
    axes[3].set_title(f"Warps busy per step ({n} threads)", fontsize=9)
    axes[3].legend(fontsize=7)
    axes[3].grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    plots.close(fig)


def conflict_degree(kernel: int, s: int, n: int = 256) -> int:
    """Worst n-way bank conflict in one warp's reads of sdata[dst] at step s (4-byte words)."""
    worst = 1
    for w in range(n // WARP):
        slots = [d for (ss, tid, d, _src) in adds(kernel, n) if ss == s and tid // WARP == w]
        if slots:
            banks = np.bincount([d % BANKS for d in slots], minlength=BANKS)
            worst = max(worst, int(banks.max()))
    return worst


def draw_banks(path, n: int = 256):
    """Kernel 2's strided index makes threads of one warp hit the same bank; kernel 3 never."""
    fig, ax = plots.figure(figsize=(6, 3.2))
    for k, label in ((2, "Kernel 2: sdata[2*s*tid]"), (3, "Kernel 3: sdata[tid]")):
        steps = sorted({a[0] for a in adds(k, n)})
        ax.plot(steps, [conflict_degree(k, s, n) for s in steps], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("stride s")
    ax.set_ylabel("n-way bank conflict (worst warp)")
    ax.set_title("Shared-memory bank conflicts (32 banks of 4 bytes)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    plots.close(fig)


def draw_shuffle(path, lanes: int = 16):
    """shfl_down_sync: lane l adds lane l + offset's register (shown for 16 lanes)."""
    fig, ax = plots.figure(figsize=(7, 3))
    offsets = [lanes // 2**k for k in range(1, int(np.log2(lanes)) + 1)]
    for row, off in enumerate([None] + offsets):
        for lane in range(lanes):
            useful = row == 0 or lane < offsets[row - 1]
            ax.text(
                lane,
                row,
                str(lane),
                ha="center",
                va="center",
                fontsize=7,
                bbox=dict(
                    boxstyle="round", fc="#cde4f7" if useful else "#f2f2f2", ec="#999", lw=0.5
                ),
            )
            if off and lane + off < lanes:
                ax.annotate(
                    "",
                    xy=(lane, row - 0.2),
                    xytext=(lane + off, row - 0.8),
                    arrowprops=dict(
                        arrowstyle="->", lw=0.7, color="#1f77b4" if lane < off else "#cccccc"
                    ),
                )
        ax.text(
            -1, row, "load" if off is None else f"offset {off}", ha="right", va="center", fontsize=7
        )
    ax.set_xlim(-3.5, lanes)
    ax.set_ylim(len(offsets) + 0.5, -0.5)
    ax.axis("off")
    ax.set_title(
        "Warp shuffle (kernel 6): registers, no shared memory, no barrier; "
        "lane 0 ends with the sum (grey: results nobody uses)",
        fontsize=8,
    )
    fig.savefig(path, dpi=110)
    plots.close(fig)


def draw_grid_stride(path, n: int = 48, tpb: int = 4, blocks: int = 3):
    """Kernel 7: which thread of which block sums which element (grid-stride loop)."""
    fig, ax = plots.figure(figsize=(9, 1.9))
    T = tpb * blocks
    cmap = colormaps["tab20"]
    for i in range(n):
        g = i % T
        ax.add_patch(Rectangle((i, 0), 0.95, 1, fc=cmap(g % 20)))
        ax.text(i + 0.47, 0.5, f"b{g // tpb}\nt{g % tpb}", ha="center", va="center", fontsize=5.5)
    for k in range(0, n + 1, T):
        ax.axvline(k - 0.03, color="k", lw=1)
    ax.set_xlim(0, n)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xlabel("element index i (each sweep of T = blocks x tpb elements is coalesced)")
    ax.set_title(
        f"Grid-stride loop: {blocks} blocks x {tpb} threads, n = {n}: thread g sums "
        f"elements g, g+T, g+2T, ...; then one atomic per block",
        fontsize=8,
    )
    fig.savefig(path, dpi=110)
    plots.close(fig)


FIGURES = {
    "reduction-trees.png": draw_trees,
    "reduction-thread-activity.png": draw_activity,
    "reduction-bank-conflicts.png": draw_banks,
    "reduction-warp-shuffle.png": draw_shuffle,
    "reduction-grid-stride.png": draw_grid_stride,
}
