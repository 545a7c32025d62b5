"""The slider panels of the face lessons (06 centering, 07 covariance; their inputs made
with lesson 05's mean kernel) at lecture sizes, as ``python -m course bench sliders``
records them (``sliders.py``).

Where a notebook's inputs are real data (the faces), the recording uses random numbers of
the same shape: a launch's time depends on the shape, not the values (:func:`_faces`).
What a panel is: ``slider_panels.Panel``.
"""

from __future__ import annotations

from .slider_panels import Panel, sized


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
    m, shape = sized(202_599, 120), sized((55, 45), (20, 16))
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
    m, shape = sized(202_599, 120), sized((55, 45), (20, 16))
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
    m, shape = sized(202_599, 40), sized((55, 45), (8, 6))
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


PANELS = (_centering, _centering_2d, _covariance)
