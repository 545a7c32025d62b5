"""The validation report's figure: measured vs traced counts, one marker per kernel and count
(per-request for global memory, per launch for shared memory; zeros are left out)."""

from __future__ import annotations

from .. import plots


def draw_validation(data: dict, path) -> None:
    """Scatter of measured (ncu) vs traced (course.sim.trace) per-request counts, log-log."""
    from ...hardware.validation import MATCHED, matches

    fig, ax = plots.figure(figsize=(6.5, 4.2))
    names = {
        "ld_sectors_per_request": "global load sectors per request",
        "st_sectors_per_request": "global store sectors per request",
        "shared_ld_wavefronts": "shared load wavefronts per launch",
        "shared_st_wavefronts": "shared store wavefronts per launch",
        "shared_ld_conflicts": "shared load bank conflicts per launch",
        "shared_st_conflicts": "shared store bank conflicts per launch",
    }
    for key, label in names.items():
        pts = [(r["measured"].get(key), r["traced"].get(key)) for r in data["rows"]]
        pts = [(m, t) for m, t in pts if m and t]
        if pts:
            ax.scatter([m for m, _ in pts], [t for _, t in pts], label=label, alpha=0.8)
    ax.plot([0.8, 1e4], [0.8, 1e4], color="#888", lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"measured by Nsight Compute ({data['device']})")
    ax.set_ylabel("traced in the simulator")
    ok = sum(
        all(matches(r["measured"].get(k), r["traced"].get(k)) for k in MATCHED)
        for r in data["rows"]
    )
    ax.set_title(
        f"course.sim.trace vs hardware counters: {ok} of {len(data['rows'])} kernels match",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plots.close(fig)


def breakdown_bars(calls: dict, *, axes) -> None:
    """Stacked horizontal bars: where each host call's time goes (ms)."""
    parts = [
        ("h2d_ms", "host-to-device copy"),
        ("kernels_ms", "kernels"),
        ("d2h_ms", "device-to-host copy"),
        ("rest_ms", "the rest (launch, allocation, Python)"),
    ]
    names = list(calls)
    left = [0.0] * len(names)
    for key, label in parts:
        widths = [calls[n][key] for n in names]
        axes.barh(names, widths, left=left, label=label)
        left = [a + b for a, b in zip(left, widths)]
    axes.set_xlabel("ms per call")
    axes.legend(fontsize=8, loc="lower right")
