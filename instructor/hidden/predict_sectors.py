"""Answer key of ``predict_sectors`` (lesson 06): the tracer's own sector count."""

from course.sim.trace_analysis import sectors


def answers(ex):
    return {
        key: sectors([b for t in range(32) for b in range(offset(t), offset(t) + size, 4)])
        for key, (_what, offset, size) in ex.patterns.items()
    }
