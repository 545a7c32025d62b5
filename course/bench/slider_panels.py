"""What a slider panel is (:class:`Panel`), and the panels of lessons 01-04, 08 and 09 at
lecture sizes: what ``python -m course bench sliders`` records (``sliders.py``).

Each :class:`Panel` is a notebook's panel at lecture sizes: its id (``NOTEBOOK/NAME``, what
the notebook passes as ``record=``), sliders, x, constraint, the bytes or FLOPs of a launch,
and ``setup()``, which makes the inputs once and returns ``{variant: run(**params) ->
Timing}``.  In the simulator the sizes are the simulator's (:func:`sized`).  The panels of
the face lessons (06, 07) are ``face_panels.py``'s.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..platform import runtime


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


def sized(lecture, sim):
    """``lecture`` on a GPU (the lecture's sizes), ``sim`` in the simulator."""
    return runtime.size(lecture=lecture, sim=sim)


# ---------------------------------------------------------------------------------------
# the notebooks' panels (the faces' are face_panels.py's)


def _vector_add() -> Panel:
    n = sized(1 << 20, 2_000)

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
            "threads_per_block": sized([32, 64, 128, 256, 512, 1024], [8, 16, 32, 64]),
            "blocks": sized([1, 8, 64, 264, 1056, 4096], [1, 2, 4, 8]),
        },
        setup,
        nbytes=lambda p: 3 * n * 4,
    )


def _reduction() -> Panel:
    n = sized(1 << 26, 512)

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
        {"threads_per_block": sized([64, 128, 256, 512, 1024], [64, 128])},
        setup,
        nbytes=lambda p: n * 4,
    )


def _window() -> Panel:
    n = sized(1 << 24, 512)

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
    n = sized(2048, 32)

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
        value=sized({"L": 128, "V": 8, "S": 4}, {"L": 16, "V": 2, "S": 4}),
    )


def _reduction_ept() -> Panel:
    n = sized(1 << 26, 512)

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
            "elements_per_thread": sized([1, 2, 4, 8, 16, 32, 64, 128, 256], [4, 16]),
            "threads_per_block": sized([128, 256, 512, 1024], [64]),
        },
        setup,
        nbytes=lambda p: n * 4,
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
        {"N": sized([256, 512, 1024, 2048, 4096], [16, 33]), "d": sized([32, 64, 128], [16, 32])},
        setup,
        flops=lambda p: A.flops(1, 2, p["N"], p["d"]),
        value=sized({}, {"N": 16, "d": 16}),
    )


def _histogram() -> Panel:
    length, channels = sized(1 << 20, 40), sized(512, 9)

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
            "chunks": sized([4, 16, 33, 66, 132], [1, 2]),
            "channels_per_block": [8, 16, 32],
            "threads_per_block": sized([128, 256, 512], [32]),
        },
        setup,
        nbytes=lambda p: length * channels,
    )


PANELS = (_vector_add, _reduction, _reduction_ept, _window, _matmul, _attention, _histogram)
