"""Lesson 08 figures: the online softmax's running max and sum over tiles, and memory traffic."""

from __future__ import annotations

import numpy as np

from ...kernels import attention as A
from .. import plots


def online_softmax_trace(x: np.ndarray, tile: int):
    """Running max m and running sum l (in units of exp(m)) after each tile of ``x``."""
    m, l, ms, ls = -np.inf, 0.0, [], []
    for j0 in range(0, len(x), tile):
        t = x[j0 : j0 + tile]
        m_new = max(m, t.max())
        l = l * np.exp(m - m_new) + np.exp(t - m_new).sum()
        m = m_new
        ms.append(m)
        ls.append(l)
    return np.array(ms), np.array(ls)


def draw_online_softmax(path) -> None:
    """Scores of one row in tiles of Bc, with the running max and the rescaled running sum."""
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.normal(0.05, 1.0, 256))  # a drifting row: the max keeps moving
    ms, ls = online_softmax_trace(x, A.Bc)
    fig, (a0, a1) = plots.figure(figsize=(9, 3.4), ncols=2)
    a0.plot(x, lw=0.8, color="#7f7f7f", label="scores of one row")
    ends = np.arange(A.Bc, len(x) + 1, A.Bc) - 1
    a0.step(ends, ms, where="post", color="#d62728", label="running max m after each tile")
    for e in ends:
        a0.axvline(e + 0.5, color="#dddddd", lw=0.5)
    a0.set(xlabel="key index j", ylabel="score", title=f"tiles of Bc = {A.Bc} keys")
    a0.legend(fontsize=8)
    a1.plot(range(1, len(ls) + 1), ls, marker="o", color="#1f77b4")
    a1.set(
        xlabel="tiles seen",
        ylabel="l = sum exp(s - m)",
        title="running sum, rescaled by exp(m_old - m_new)",
    )
    fig.savefig(path, dpi=110)
    plots.close(fig)


def draw_traffic(path) -> None:
    """Bytes moved by the three-kernel version vs flash attention, as N grows (float16)."""
    ns = [512, 1024, 2048, 4096, 8192]
    b, h, _, d = (4, 64, 8192, 128)
    three = [A.traffic_bytes(b, h, n, d, 2)["three_kernels"] / 1e9 for n in ns]
    flash = [A.traffic_bytes(b, h, n, d, 2)["flash"] / 1e9 for n in ns]
    fig, ax = plots.figure(figsize=(6.5, 3.6))
    plots.sweep(
        ns,
        {"three kernels (N x N scores)": three, "flash attention": flash},
        xlabel="sequence length N",
        ylabel="GB moved (minimum)",
        axes=ax,
        logy=True,
        title="attention memory traffic, batch 4 x 64 heads x d 128, float16",
    )
    fig.savefig(path, dpi=110)
    plots.close(fig)


FIGURES = {
    "attention-online-softmax.png": draw_online_softmax,
    "attention-traffic.png": draw_traffic,
}
