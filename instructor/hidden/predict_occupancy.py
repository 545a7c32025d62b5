"""Answer key of ``predict_occupancy`` (lesson 04): the course's occupancy calculator."""

from course.hardware.occupancy import blocks_per_sm


def answers(ex):
    out = {}
    for key, (t, r, s) in ex.configs.items():
        fit = blocks_per_sm(t, r, s, "H100")
        out[f"{key}_blocks"], out[f"{key}_limiter"] = fit.blocks, fit.limiter
    return out
