"""Answer key of ``predict_cgma`` (lesson 07): covariance work and the tiles' CGMA."""

from course.kernels.faces import cgma


def answers(ex):
    m, n = ex.M, ex.PIXELS
    return {
        "flops": 2 * m * n * n,
        "symmetric_flops": m * n * (n + 1),
        "naive_cgma": 1.0,
        "tiled_cgma_8": cgma(8),
        "tiled_cgma_32": cgma(32),
    }
