"""Figures for lessons 05-07: the face set, the cache-line picture, eigenfaces."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from .. import plots


def face_grid(images, *, axes, cols: int = 10, title: str = "", cmap: str = "gray") -> None:
    """Images (k, rows, cols) tiled into one picture on ``axes``."""
    images = np.asarray(images, dtype=np.float32)
    k, h, w = images.shape
    rows = -(-k // cols)
    canvas = np.full((rows * (h + 1) - 1, cols * (w + 1) - 1), np.nan, dtype=np.float32)
    for i, img in enumerate(images):
        r, c = divmod(i, cols)
        canvas[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = img
    axes.imshow(canvas, cmap=cmap, interpolation="nearest")
    axes.set_axis_off()
    if title:
        axes.set_title(title, fontsize=10)


def draw_samples(path) -> None:
    """20 real faces (top) and 20 augmented copies (bottom) at the lecture's 55 x 45."""
    from ...platform import data

    D = data.load_faces(220, progress=False)
    imgs = data.as_images(D)
    fig, axes = plots.figure(figsize=(9, 4.4), ncols=2)
    face_grid(imgs[:20], axes=axes[0], cols=5, title="real LFW faces (resized to 55 x 45)")
    face_grid(
        imgs[100:120],
        axes=axes[1],
        cols=5,
        title="augmented copies of the same faces (flip, shift, light, noise)",
    )
    fig.savefig(path, dpi=110)
    plots.close(fig)


def cache_line_picture(*, axes, n: int = 10, line: int = 8, step: int = 2) -> None:
    """The lecture's 10 x 10 picture: 8 threads reading a row (one line) vs a column."""
    titles = [
        "correction_kernel: warp reads a row\n(1 cache line per step)",
        "correction_kernel_ortho: warp reads a column\n(1 cache line per thread per step)",
    ]
    for panel, ax in enumerate(axes):
        for i in range(n):
            for j in range(n):
                ax.add_patch(Rectangle((j, n - 1 - i), 1, 1, fill=False, lw=0.4, ec="#999"))
        if panel == 0:
            cells = [(step, t) for t in range(line)]  # image step, pixels 0..7
            boxes = [(step, 0, line)]
        else:
            cells = [(t, step) for t in range(line)]  # images 0..7, pixel step
            boxes = [(t, (step // line) * line, line) for t in range(line)]
        for i, j0, width in boxes:
            ax.add_patch(Rectangle((j0, n - 1 - i), width, 1, color="#cccccc", zorder=0))
        for t, (i, j) in enumerate(cells):
            ax.add_patch(Rectangle((j + 0.1, n - 1 - i + 0.1), 0.8, 0.8, color="#1f77b4"))
            ax.text(
                j + 0.5,
                n - 1 - i + 0.5,
                str(t),
                ha="center",
                va="center",
                color="white",
                fontsize=7,
            )
        ax.set_xlim(0, n)
        ax.set_ylim(0, n)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("pixel j (row-major: neighbours in memory) ->", fontsize=8)
        ax.set_ylabel("<- image i", fontsize=8)
        ax.set_title(titles[panel], fontsize=9)


def draw_cache_lines(path) -> None:
    fig, axes = plots.figure(figsize=(8.5, 4.4), ncols=2)
    cache_line_picture(axes=axes)
    fig.suptitle(
        "Blue: what 8 threads read in one step; grey: the cache lines (8 floats) they pull in",
        fontsize=9,
    )
    fig.savefig(path, dpi=110)
    plots.close(fig)


def draw_eigenfaces(path) -> None:
    """Mean face and the first 9 eigenfaces of the 100 real faces (numpy on the host)."""
    from ...platform import data

    D = data.load_faces().astype(np.float64)
    mu = D.mean(axis=0)
    C = (D - mu).T @ (D - mu) / D.shape[0]
    L, V = np.linalg.eigh(C)
    V = V[:, ::-1]
    imgs = [mu] + [V[:, k] for k in range(9)]
    imgs = [(x - x.min()) / (x.max() - x.min()) for x in imgs]
    fig, ax = plots.figure(figsize=(9, 1.9))
    face_grid(
        np.array(imgs).reshape(10, 55, 45),
        axes=ax,
        cols=10,
        title="mean face and eigenfaces 1-9 of the 100 LFW faces",
    )
    fig.savefig(path, dpi=110)
    plots.close(fig)


FIGURES = {
    "faces-samples.png": draw_samples,
    "faces-cache-lines.png": draw_cache_lines,
    "faces-eigenfaces.png": draw_eigenfaces,
}
