"""Answer key of ``predict_bank_ways`` (lesson 02): the tracer's own wavefront count."""

from course.sim.trace_analysis import wavefronts


def answers(ex):
    return {
        key: wavefronts([offset(t) for t in range(32)], size)
        for key, (_what, offset, size) in ex.patterns.items()
    }
