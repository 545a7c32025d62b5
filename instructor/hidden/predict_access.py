"""Answer key of ``predict_access`` (lesson 10): the tracer's sectors and wavefronts."""

from course.sim.trace_analysis import sectors, wavefronts


def answers(ex):
    out = {}
    for key, (_what, off, size, unit) in ex.patterns.items():
        out[key] = (
            sectors([b for t in range(32) for b in range(off(t), off(t) + size)])
            if unit == "sectors"
            else wavefronts([off(t) for t in range(32)], size)
        )
    return out
