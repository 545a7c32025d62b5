"""Answer key of ``predict_floor`` (lesson 05): bytes moved and the ``perf`` floor."""

from course.measure.perf import floor_ms


def answers(ex):
    mean_bytes = 4 * ex.M * ex.PIXELS + 4 * ex.PIXELS
    add_bytes = 3 * 4 * ex.ADD_N
    ceil = {"copy_gbps": ex.GBPS}
    return {
        "mean_bytes": mean_bytes,
        "mean_floor_ms": floor_ms(mean_bytes, ceilings=ceil),
        "add_bytes": add_bytes,
        "add_floor_ms": floor_ms(add_bytes, ceilings=ceil),
    }
