"""The judge's half of "every timed run judged" (the measurer's half: ``exercises/timed.py``).

Before a measured launch the judge makes a :class:`Plan`: a seed of its own (never sent to
the student's code: only the measurer's loop uses it, after each run), the outputs to
sample, and, where a reference judges only some elements (the attention board's sampled
rows), those elements.  After it, the measurer's reply carries ``sample:NAME`` arrays of
shape (runs, positions); :meth:`Plan.wrong` recomputes the positions from the seed and
compares every run's values with the float64 reference, with the case's tolerance.

Protocol (request ``measure``): ``"sample": {"seed", "names", "sim_runs"}`` plus an array
``domain:NAME`` (int64 flat positions) for each output judged only in part.  Reply
``measured``: ``"figures"`` and the arrays it was sent (the last run, whole) plus
``sample:NAME`` (dtype of NAME, shape (runs <= MAX_RUNS, min(SAMPLES, elements))); the
judge's channel refuses anything else before reading it (``wire.py``).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np

from ...exercises.timed import MAX_RUNS, positions, sample_count
from . import judge

SIM_RUNS = 0  # runs after the traced one in the simulator (the tests ask for more)


@dataclass
class Plan:
    seed: int
    names: list  # outputs and in-out arrays, in the order positions are drawn
    domains: dict  # name -> flat positions the reference judges (absent: all)
    sim_runs: int = 0

    def request(self) -> dict:
        return {"seed": self.seed, "names": self.names, "sim_runs": self.sim_runs}

    def arrays(self) -> dict:
        return {f"domain:{k}": v for k, v in self.domains.items()}

    def expect(self, prep) -> dict:
        """What the reply may carry: the buffers sent, and each output's samples."""
        out = dict(prep.buffer_shapes())
        for name in self.names:
            k = sample_count(math.prod(prep.shapes[name]), self.domains.get(name))
            out[f"sample:{name}"] = (out[name][0], (range(1, MAX_RUNS + 1), k))
        return out

    def wrong(self, spec, case, prep, samples: dict, at_least: int) -> str | None:
        """Why some run's samples are wrong (or missing), or None."""
        rows = {samples[n].shape[0] for n in self.names if n in samples}
        if set(samples) != set(self.names) or len(rows) != 1 or rows.pop() < at_least:
            return "the runs' samples did not all come back"
        runs = samples[self.names[0]].shape[0]
        for r in range(runs):
            for j, name in enumerate(self.names):
                shape = prep.shapes[name]
                pos = positions(self.seed, r, j, math.prod(shape), self.domains.get(name))
                exp = np.asarray(prep.expected[name]).reshape(-1)[pos]
                got, tol = samples[name][r], spec.tolerance(case, name)
                if judge.compare(name, got, exp, tol):
                    return _where(r, runs, name, shape, pos, got, exp, tol)
        return None


def plan(spec, prep) -> Plan:
    """A fresh plan for the measured launch ``prep`` (a seed nobody else knows)."""
    names = list(prep.out_specs) + [n for n in spec.inout if n in prep.host]
    domains = {}
    for name in names:
        exp = np.asarray(prep.expected[name])
        if exp.dtype.kind == "f" and np.isnan(exp).any():
            domains[name] = np.flatnonzero(~np.isnan(exp)).astype(np.int64)
    return Plan(secrets.randbits(63), names, domains, SIM_RUNS)


def _where(r, runs, name, shape, pos, got, exp, tol) -> str:
    bad = [k for k in range(len(pos)) if judge.compare(name, got[k : k + 1], exp[k : k + 1], tol)]
    k = bad[0]
    idx = tuple(int(i) for i in np.unravel_index(int(pos[k]), shape))
    at = f"{name}[{idx[0] if len(idx) == 1 else ', '.join(map(str, idx))}]"
    what = (
        "still held the poison value (never written)"
        if got.dtype.kind == "f" and np.isnan(got[k])
        else f"got {judge.number_text(got[k])}, expected {judge.number_text(exp[k])}"
    )
    return (
        f"no figure: timed run {r + 1} of {runs} gave wrong results at {at}: {what} "
        f"({len(bad)} of {len(pos)} sampled elements wrong) - every run must do all of "
        "the work"
    )
