"""Lesson 03 figure: global reads per block, v1 vs v2 (counted in the simulator)."""

from __future__ import annotations

from .. import plots


def draw_reads(path) -> None:
    from ...kernels import window

    tpbs = [32, 64, 128, 256]
    counts = [
        window.in_simulator("course.kernels.window", "count_block_reads", threads_per_blk=t)
        for t in tpbs
    ]
    fig, ax = plots.figure(figsize=(6, 3))
    xs = range(len(tpbs))
    ax.bar(
        [x - 0.2 for x in xs],
        [c["global"]["global"] for c in counts],
        0.4,
        label="v1: 3 global reads per thread",
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [c["shared"]["global"] for c in counts],
        0.4,
        label="v2: THREADS_PER_BLK + 2 via shared",
    )
    ax.set_xticks(list(xs), [str(t) for t in tpbs])
    ax.set_xlabel("THREADS_PER_BLK")
    ax.set_ylabel("global reads per block (counted)")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plots.close(fig)


FIGURES = {"window-reads-per-block.png": draw_reads}
