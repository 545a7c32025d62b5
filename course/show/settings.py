"""Which slider settings a panel offers and where a move lands (``widgets.SliderPanel``):
the settings some valid point has, the nearest valid setting to a move, the default."""

from __future__ import annotations

import itertools


def launchable(sliders: dict, why_not) -> dict:
    """Each slider's options that some valid setting has (all of them without a constraint)."""
    names = list(sliders)
    valid = [c for c in itertools.product(*sliders.values()) if not why_not(dict(zip(names, c)))]
    if not valid:
        raise ValueError("no setting of the sliders is valid")
    return {
        k: [v for v in opts if any(c[i] == v for c in valid)]
        for i, (k, opts) in enumerate(sliders.items())
    }


def nearest(options: dict, params: dict, fixed: set, why_not, x: str):
    """The valid setting closest to ``params`` with the ``fixed`` sliders unchanged: fewest
    option steps in all, then fewest on the x slider; None when there is none."""
    names = list(options)
    idx = {k: options[k].index(params[k]) for k in names}
    choices = [[params[k]] if k in fixed else options[k] for k in names]
    best, best_cost = None, None
    for combo in itertools.product(*choices):
        p = dict(zip(names, combo))
        if why_not(p):
            continue
        steps = [abs(options[k].index(p[k]) - idx[k]) for k in names]
        cost = (sum(steps), steps[names.index(x)], steps)
        if best_cost is None or cost < best_cost:
            best, best_cost = p, cost
    return best


def middle(opts):
    opts = list(opts)
    return opts[len(opts) // 2]


def is_pow2(xs) -> bool:
    return all(isinstance(v, int) and v > 0 and v & (v - 1) == 0 for v in xs)
