"""Answer key of ``predict_attention`` (lesson 08): the attention lesson's own counts."""

from course.kernels.attention import flops, traffic_bytes


def answers(ex):
    b, h, n, d = ex.SHAPE
    tb = traffic_bytes(b, h, n, d, itemsize=2)
    return {
        "flops": flops(b, h, n, d),
        "causal_flops": flops(b, h, n, d, causal=True),
        "score_bytes": tb["score_matrix"],
        "flash_bytes": tb["flash"],
    }
