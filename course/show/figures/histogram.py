"""Lesson 09 figures: which bytes one warp reads in one load instruction, for row-major
(length, channels) uint8 data read by channel, drawn analytically (addresses computed from
the kernels' index formulas; no tracer needed)."""

from __future__ import annotations

import numpy as np

from .. import plots

SECTOR = 32  # bytes per DRAM/L2 sector
CHANNELS = 512  # leaderboard shape: row = 512 bytes


def warp_addresses(pattern: str, channels: int = CHANNELS) -> np.ndarray:
    """Byte offsets read by lanes 0..31 of warp 0 in its first load, per kernel."""
    lane = np.arange(32)
    if pattern == "block_per_channel":  # block c: thread t reads data[t, c]
        return lane * channels + 0
    if pattern == "global_atomics":  # thread g reads flattened element g
        return lane
    if pattern == "two_phase":  # 8 threads x uint32 per row, 4 rows per warp
        return (lane // 8) * channels + (lane % 8) * 4
    if pattern == "tuned":  # 32 lanes x uint32 of one row
        return lane * 4
    raise ValueError(f"unknown pattern {pattern!r}")


def bytes_per_lane(pattern: str) -> int:
    """Bytes one lane loads per instruction."""
    return {"block_per_channel": 1, "global_atomics": 1, "two_phase": 4, "tuned": 4}[pattern]


def sectors(pattern: str, channels: int = CHANNELS) -> int:
    """Distinct 32-byte sectors one warp load touches."""
    a = warp_addresses(pattern, channels)
    w = bytes_per_lane(pattern)
    return len({int(x) // SECTOR for x in a} | {int(x + w - 1) // SECTOR for x in a})


PATTERNS = ["block_per_channel", "global_atomics", "two_phase", "tuned"]


def draw_access(path) -> None:
    """Left: the rows x bytes of the data one warp touches; right: useful bytes per sector."""
    fig, (ax, ax2) = plots.figure(figsize=(10, 4.2), ncols=2)
    rows, cols = 34, 96  # a window onto the first rows and bytes
    grid = np.zeros((rows, cols))
    colors = {"block_per_channel": 1, "two_phase": 2}  # 0: bytes the warp does not read
    # draw the two patterns that show the contrast, side by side in one window
    for p, (dr, dc) in {"block_per_channel": (0, 0), "two_phase": (0, 48)}.items():
        for a in warp_addresses(p):
            r, c = divmod(int(a), CHANNELS)
            for b in range(bytes_per_lane(p)):
                if r + dr < rows and c + b + dc < cols:
                    grid[r + dr, c + b + dc] = colors[p]
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    cmap = ListedColormap(["#f4f4f4", plots.COLORS["numba"], "#d62728"])
    ax.imshow(grid, cmap=cmap, aspect="auto", interpolation="nearest", vmin=0, vmax=2)
    ax.legend(
        handles=[
            Patch(color=cmap(1), label="block_per_channel: 1 byte x 32 rows"),
            Patch(color=cmap(2), label="two_phase: 4 bytes x 8 lanes x 4 rows"),
        ],
        fontsize=7,
        loc="lower right",
    )
    ax.axvline(47.5, color="w", lw=2)
    ax.set_title("one warp, one load (rows of 512 bytes, first bytes shown)", fontsize=9)
    ax.set_xlabel("byte within the row (left: block_per_channel, right: two_phase)")
    ax.set_ylabel("row")
    useful = [32 * bytes_per_lane(p) for p in PATTERNS]
    moved = [SECTOR * sectors(p) for p in PATTERNS]
    y = np.arange(len(PATTERNS))
    ax2.barh(y, moved, color="#cccccc", label="bytes moved (32-byte sectors)")
    ax2.barh(y, useful, color=plots.COLORS["numba"], label="bytes the warp uses")
    for i, p in enumerate(PATTERNS):
        ax2.text(
            moved[i],
            i,
            f" {sectors(p)} sectors, {100 * useful[i] / moved[i]:.0f}% used",
            va="center",
            fontsize=8,
        )
    ax2.set_yticks(y, PATTERNS, fontsize=8)
    ax2.invert_yaxis()
    ax2.set_xscale("log", base=2)
    ax2.set_xlim(16, 4096)
    ax2.set_xlabel("bytes per warp load instruction")
    ax2.legend(fontsize=7, loc="lower right")
    ax2.set_title("coalescing: sectors per warp load", fontsize=9)
    fig.savefig(path, dpi=110)
    plots.close(fig)


def draw_layout(path) -> None:
    """Shared-memory bank of each lane's counter for one value: padded channel-major
    (two_phase) vs lane-private bin-major (tuned), for uniform and constant data."""
    rng = np.random.default_rng(0)
    fig, axes = plots.figure(figsize=(10, 3.2), ncols=2)
    lane = np.arange(32)
    for ax, (title, v) in zip(
        axes,
        [
            ("uniform data (random values)", rng.integers(0, 256, 32)),
            ("constant channel (one value)", np.full(32, 7)),
        ],
    ):
        ch = 4 * (lane % 8)  # two_phase: byte 0 of the word
        banks_tp = (ch * 257 + v) % 32
        banks_tuned = ((v * 32) + lane) % 32
        for row, (_name, banks) in enumerate(
            [("two_phase (257-padded)", banks_tp), ("tuned (v * 32 + lane)", banks_tuned)]
        ):
            counts = np.bincount(banks, minlength=32)
            ax.scatter(banks, np.full(32, row) + 0.08 * (lane % 4), s=12)
            ax.text(32.5, row, f"{counts.max()}-way", va="center", fontsize=8)
        ax.set_yticks([0, 1], ["two_phase", "tuned"], fontsize=8)
        ax.set_xlim(-1, 37)
        ax.set_xlabel("shared-memory bank hit by each lane of a warp")
        ax.set_title(title, fontsize=9)
    fig.savefig(path, dpi=110)
    plots.close(fig)


FIGURES = {"histogram-access.png": draw_access, "histogram-banks.png": draw_layout}
