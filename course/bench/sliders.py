"""``python -m course bench sliders [PANEL ...]``: record every slider panel's whole grid.

A panel in simulator mode shows the GPU's figures for the chosen setting (``course/show/
records.py``).  This command makes them: on a GPU, at the lecture's sizes, it times every
variant of a panel at every valid point of its sliders (the same settings, constraint and
launches as the notebook's panel) and writes one JSON record per panel under
``assets/sliders/`` with the device, the date, the measured ceilings and this command.

Each :class:`Panel` here is a notebook's panel at lecture sizes: its id (``NOTEBOOK/NAME``,
what the notebook passes as ``record=``), sliders, x, constraint, the bytes or FLOPs of a
launch, and ``setup()``, which makes the inputs once and returns ``{variant: run(**params)
-> Timing}``.  Where a notebook's inputs are real data (the faces), the recording uses random
numbers of the same shape: a launch's time depends on the shape, not the values.

In simulator mode the command refuses to write a record (its times are a CPU's); ``--dry-run``
runs the grids at simulator sizes into ``--out`` and marks them as such, for tests.
"""

from __future__ import annotations

import itertools
import sys
import time
from dataclasses import dataclass, field

from ..measure import perf
from ..platform import runtime

COMMAND = "python -m course bench sliders"


@dataclass
class Panel:
    """One notebook panel: what the command runs for it."""

    id: str  # NOTEBOOK/NAME, the notebook's record= argument
    title: str
    sliders: dict  # name -> options (lecture sizes on a GPU)
    setup: object  # () -> {variant: run(**params) -> Timing}
    x: str = ""
    constraint: object = None  # (**params) -> why not, or None
    nbytes: object = None  # (params) -> bytes a launch must move
    flops: object = None  # (params) -> FLOPs a launch must do
    value: dict = field(default_factory=dict)  # the notebook's default (else the middle)

    def points(self) -> list[dict]:
        """Every valid setting of the sliders."""
        names = list(self.sliders)
        pts = [dict(zip(names, c)) for c in itertools.product(*self.sliders.values())]
        return [p for p in pts if not (self.constraint and self.constraint(**p))]

    def default(self) -> dict:
        """The panel's default setting, as the notebook's SliderPanel starts."""
        return {k: self.value.get(k, list(o)[len(o) // 2]) for k, o in self.sliders.items()}


def _size(lecture, sim):
    return runtime.size(lecture=lecture, sim=sim)


# ---------------------------------------------------------------------------------------
# the notebooks' panels


def _vector_add() -> Panel:
    n = _size(1 << 20, 2_000)

    def setup():
        import numpy as np
        from numba import cuda

        from ..kernels import vector_add as lesson
        from ..measure.timing import benchmark

        rng = np.random.default_rng(0)
        d_x = cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32))
        d_y = cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32))

        def run(threads_per_block, blocks):
            return benchmark(lambda: lesson.add_grid_stride[blocks, threads_per_block](n, d_x, d_y))

        return {"grid-stride": run}

    return Panel(
        "01_vector_add/grid_stride",
        f"add_grid_stride, N = {n:,}",
        {
            "threads_per_block": _size([32, 64, 128, 256, 512, 1024], [8, 16, 32, 64]),
            "blocks": _size([1, 8, 64, 264, 1056, 4096], [1, 2, 4, 8]),
        },
        setup,
        nbytes=lambda p: 3 * n * 4,
    )


def _reduction() -> Panel:
    n = _size(1 << 26, 512)

    def setup():
        import numpy as np
        from numba import cuda

        from ..kernels import reduction as lesson
        from . import reduction as bench

        d_big = cuda.to_device(np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32))
        usable = [
            v
            for v in lesson.VARIANTS
            if v not in lesson.WARP_VARIANTS or lesson.warp_intrinsics_available()
        ]
        return {
            v: (lambda threads_per_block, v=v: bench.time_variant(v, d_big, threads_per_block))
            for v in usable
        }

    return Panel(
        "02_reduction/variants",
        f"Sum of {n:,} float32",
        {"threads_per_block": _size([64, 128, 256, 512, 1024], [64, 128])},
        setup,
        nbytes=lambda p: n * 4,
    )


def _window() -> Panel:
    n = _size(1 << 24, 512)

    def setup():
        import numpy as np
        from numba import cuda

        from ..kernels import window
        from ..measure.timing import benchmark

        xs = np.random.default_rng(2).uniform(-1, 1, n + 2).astype(np.float32)
        d_in, d_out = cuda.to_device(xs), cuda.device_array(n, dtype=np.float32)

        def timed(variant):
            return lambda threads_per_block: benchmark(
                window.launch, variant, n, d_in, d_out, threads_per_block
            )

        return {"v1 global": timed("global"), "v2 shared": timed("shared")}

    from ..kernels import window

    return Panel(
        "03_window_average/variants",
        "Window average",
        {"threads_per_block": [32, 64, 128, 256, 512, 1024]},
        setup,
        nbytes=lambda p: window.moved_bytes(n),
        value={"threads_per_block": 128},
    )


def _matmul() -> Panel:
    n = _size(2048, 32)

    def setup():
        from ..kernels import matmul
        from ..measure.timing import benchmark

        dp = matmul.inputs(n)

        def v3(L, V, S):
            return benchmark(lambda: matmul.launch("v3_shared_tiled", *dp[2:], L=L, V=V, S=S))

        return {"v3": v3}

    from ..kernels import matmul

    return Panel(
        "04_matmul/v3",
        "v3: GFLOP/s vs S",
        {"S": [4, 8, 16, 32], "L": [16, 32, 64, 128, 256], "V": [2, 4, 8]},
        setup,
        x="S",
        constraint=matmul.v3_invalid,
        flops=lambda p: matmul.flops(n, n, n),
        value=_size({"L": 128, "V": 8, "S": 4}, {"L": 16, "V": 2, "S": 4}),
    )


def _reduction_ept() -> Panel:
    n = _size(1 << 26, 512)

    def setup():
        import numpy as np
        from numba import cuda

        from ..kernels import reduction as lesson
        from . import reduction as bench

        d_big = cuda.to_device(np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32))
        usable = [
            v
            for v in ("grid_stride", "single_pass")
            if v not in lesson.WARP_VARIANTS or lesson.warp_intrinsics_available()
        ]
        return {
            v: (
                lambda elements_per_thread, threads_per_block, v=v: bench.time_variant(
                    v, d_big, threads_per_block, elements_per_thread
                )
            )
            for v in usable
        }

    return Panel(
        "02_reduction/elements_per_thread",
        "Kernels 7 and 8: elements per thread",
        {
            "elements_per_thread": _size([1, 2, 4, 8, 16, 32, 64, 128, 256], [4, 16]),
            "threads_per_block": _size([128, 256, 512, 1024], [64]),
        },
        setup,
        nbytes=lambda p: n * 4,
    )


def _faces(m: int, n: int):
    """Device arrays of m images of n pixels (random: the time depends on the shape) and
    their mean (lesson 05's kernel)."""
    import numpy as np
    from numba import cuda

    from ..kernels import faces

    D = np.random.default_rng(0).uniform(0, 1, (m, n)).astype(np.float32)
    d_data, d_mean = cuda.to_device(D.ravel()), cuda.device_array(n, dtype=np.float32)
    faces.launch_mean(d_data, d_mean, m, n)
    return d_data, d_mean


def _centering() -> Panel:
    m, shape = _size(202_599, 120), _size((55, 45), (20, 16))
    n = shape[0] * shape[1]

    def setup():
        from ..kernels import faces
        from ..measure.timing import benchmark

        d_data, d_mean = _faces(m, n)

        def run_kind(kind):
            return lambda threads_per_block: benchmark(
                lambda: faces.launch_center(kind, d_data, d_mean, m, n, tpb=threads_per_block)
            )

        return {
            "correction_kernel": run_kind("coalesced"),
            "correction_kernel_ortho": run_kind("noncoalesced"),
        }

    return Panel(
        "06_centering_coalescing/threads_per_block",
        "Centering: time and bandwidth vs threads per block",
        {"threads_per_block": [32, 64, 128, 256, 512, 1024]},
        setup,
        nbytes=lambda p: 2 * m * n * 4,
        value={"threads_per_block": 32},
    )


def _over_1024(threads_per_block, block_y):
    return None if threads_per_block * block_y <= 1024 else "over 1024 threads"


def _centering_2d() -> Panel:
    m, shape = _size(202_599, 120), _size((55, 45), (20, 16))
    n = shape[0] * shape[1]

    def setup():
        from ..kernels import faces
        from ..measure.timing import benchmark

        d_data, d_mean = _faces(m, n)

        def run(threads_per_block, block_y):
            return benchmark(
                lambda: faces.launch_center(
                    "2d", d_data, d_mean, m, n, tpb=threads_per_block, block_y=block_y
                )
            )

        return {"correction_kernel_2d": run}

    return Panel(
        "06_centering_coalescing/2d",
        "2-D centering kernel",
        {"threads_per_block": [32, 64, 128, 256], "block_y": [1, 2, 4, 8]},
        setup,
        constraint=_over_1024,
        nbytes=lambda p: 2 * m * n * 4,
        value={"threads_per_block": 128, "block_y": 4},
    )


def _covariance() -> Panel:
    m, shape = _size(202_599, 40), _size((55, 45), (8, 6))
    n = shape[0] * shape[1]

    def setup():
        import numpy as np
        from numba import cuda

        from ..kernels import faces
        from ..measure.timing import benchmark

        d_data, _mean = _faces(m, n)
        d_cov = cuda.device_array(n * n, dtype=np.float32)
        return {
            "shared_covariance_kernel": lambda chunk_size: benchmark(
                lambda: faces.launch_cov("tiled", d_data, d_cov, m, n, chunk_size=chunk_size)
            )
        }

    from ..kernels import faces

    return Panel(
        "07_covariance_pca/chunk_size",
        "Tiled covariance: CGMA = chunk_size",
        {"chunk_size": [2, 4, 8, 16, 32]},
        setup,
        flops=lambda p: faces.flops_performed("tiled", m, n),
        value={"chunk_size": 8},
    )


def _attention() -> Panel:
    def setup():
        import numpy as np
        from numba import cuda

        from ..kernels import attention as A
        from ..measure.timing import benchmark

        rng = np.random.default_rng(0)

        def run_variant(name):
            def run(N, d):
                q, k, v = (
                    cuda.to_device(rng.uniform(-1, 1, (2, N, d)).astype(np.float32))
                    for _ in range(3)
                )
                o = cuda.device_array((2, N, d), np.float32)
                scratch = cuda.device_array((2, N, N), np.float32)
                return benchmark(lambda: A.launch(name, q, k, v, o, scratch=scratch))

            return run

        return {n: run_variant(n) for n in ["naive_three_kernels", "flash_tiled"]}

    from ..kernels import attention as A

    return Panel(
        "08_flash_attention/N_d",
        "attention: time vs N",
        {"N": _size([256, 512, 1024, 2048, 4096], [16, 33]), "d": _size([32, 64, 128], [16, 32])},
        setup,
        flops=lambda p: A.flops(1, 2, p["N"], p["d"]),
        value=_size({}, {"N": 16, "d": 16}),
    )


def _histogram() -> Panel:
    length, channels = _size(1 << 20, 40), _size(512, 9)

    def setup():
        from ..kernels import histogram as H
        from ..measure.timing import benchmark

        d_bytes, n = H.to_device(H.make_data(length, channels, "uniform", seed=1))

        def run(channels_per_block, chunks, threads_per_block):
            return benchmark(
                lambda: H.launch(
                    "two_phase",
                    d_bytes,
                    n,
                    chunks=chunks,
                    channels_per_block=channels_per_block,
                    threads_per_block=threads_per_block,
                )
            )

        return {"two_phase": run}

    return Panel(
        "09_histogram/two_phase",
        "two-phase histogram",
        {
            "chunks": _size([4, 16, 33, 66, 132], [1, 2]),
            "channels_per_block": [8, 16, 32],
            "threads_per_block": _size([128, 256, 512], [32]),
        },
        setup,
        nbytes=lambda p: length * channels,
    )


PANELS = (
    _vector_add,
    _reduction,
    _reduction_ept,
    _window,
    _matmul,
    _centering,
    _centering_2d,
    _covariance,
    _attention,
    _histogram,
)


def panels() -> dict[str, Panel]:
    """Every panel the command can record, by id."""
    found = {}
    for make in PANELS:
        p = make()
        found[p.id] = p
    return found


# ---------------------------------------------------------------------------------------
# recording


def record(panel: Panel, quiet: bool = False):
    """Time every variant of ``panel`` at every valid point; a show.records.Record."""
    from ..show.records import Record

    ceilings = perf.measured_ceilings()
    runs = panel.setup()
    unit = "GB/s" if panel.nbytes else "GFLOP/s" if panel.flops else None
    points = []
    for params in panel.points():
        nbytes = panel.nbytes(params) if panel.nbytes else 0
        flops = panel.flops(params) if panel.flops else 0
        results = {}
        for name, run in runs.items():
            t = run(**params)
            ms = t.median_ms
            results[name] = {
                "median_ms": ms,
                "min_ms": t.min_ms,
                "max_ms": t.max_ms,
                "n": len(t.times_ms),
                "rate": (
                    perf.gbps(nbytes, ms)
                    if nbytes
                    else perf.tflops(flops, ms) * 1e3
                    if flops
                    else None
                ),
                "floor_ms": (
                    perf.floor_ms(nbytes, flops, ceilings)
                    if (nbytes or flops) and ceilings.get("copy_gbps")
                    else None
                ),
            }
            if not quiet:
                print(f"  {panel.id:<28} {name:<22} {params}  {ms:.4g} ms", flush=True)
        points.append({"params": params, "results": results})
    device = runtime.device_info().get("name") or runtime.mode_label()
    if runtime.MODE != "gpu":
        device = "simulator (dry run: CPU time, not a GPU's)"
    return Record(
        panel=panel.id,
        device=str(device),
        date=time.strftime("%Y-%m-%d"),
        points=points,
        x=panel.x or next(iter(panel.sliders)),
        sliders={k: list(v) for k, v in panel.sliders.items()},
        rate=unit,
        value=panel.default(),
        ceilings={k: ceilings.get(k) for k in ("copy_gbps", "fp32_tflops")},
        command=f"{COMMAND} {panel.id}",
        title=panel.title,
    )


def main(argv=None) -> int:
    import argparse

    known = panels()
    ap = argparse.ArgumentParser(
        prog=COMMAND, description="record every slider panel's grid on this GPU (assets/sliders/)"
    )
    ap.add_argument("panels", nargs="*", help=f"panels (default all: {', '.join(known)})")
    ap.add_argument("--out", default=None, help="folder (default assets/sliders)")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="in the simulator: run the grids at simulator sizes (for tests)",
    )
    args = ap.parse_args(argv)
    unknown = [p for p in args.panels if p not in known]
    if unknown:
        print(f"unknown panel(s) {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    if runtime.MODE != "gpu" and not args.dry_run:
        print(
            "no GPU: a record is a GPU's times (the simulator's are a CPU's); run this on "
            "a GPU, or pass --dry-run --out DIR to try the grids in the simulator",
            file=sys.stderr,
        )
        return 2
    if args.dry_run and not args.out:
        print("--dry-run needs --out (a dry run never writes into assets/)", file=sys.stderr)
        return 2
    for pid in args.panels or list(known):
        print(record(known[pid]).save(args.out))
    return 0
