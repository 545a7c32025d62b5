"""Answer key of ``predict_intensity`` (lesson 04): the lecture's traffic formulas."""

from course.kernels.matmul import flops, formulas


def answers(ex):
    f = formulas(ex.N, ex.V, ex.L)
    fl = flops(ex.N, ex.N, ex.N)
    naive, tiled = 4 * f["v1_naive"]["global"], 4 * f["v3_shared_tiled"]["global"]
    return {
        "flops": fl,
        "naive_bytes": naive,
        "naive_intensity": fl / naive,
        "tiled_intensity": fl / tiled,
    }
