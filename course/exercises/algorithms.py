"""Lesson 12 exercises: ``count_positive`` (write) and ``debug_max_identity`` (debug).

Both are Thrust algorithms written by hand as one grid-stride kernel: ``count_if`` with the
predicate ``x > 0`` (an int32 count, exact), and a max reduction whose given kernel starts
each thread's running max at 0 - the wrong identity, which only data with no positive value
shows.  The bytes of ``saxpy_slow`` vs ``saxpy_fast`` are ``predict_saxpy`` in predict.py.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import EXACT, Case
from .reduction import GridStride, size_cases

LOWEST = np.finfo(np.float32).min


def _float_cases(signs: tuple) -> list[Case]:
    """lesson 02's grid-stride sizes (n = 1, tpb +- 1, primes, far fewer threads than n),
    float32, each with a sign pattern for its values."""
    out = []
    for i, c in enumerate(size_cases(1, out_blocks=False, grid_stride=True)):
        sign = signs[i % len(signs)]
        out.append(
            replace(
                c,
                name=c.name.replace("int32", "float32") + f", {sign} values",
                params=dict(c.params, dtype="float32", sign=sign),
                shared_bytes=c.block[0] * 4,
            )
        )
    return out


def signed_floats(rng, n: int, sign: str) -> np.ndarray:
    mag = rng.uniform(0.5, 1.5, size=n)
    if sign == "negative":
        return (-mag).astype(np.float32)
    if sign == "positive":
        return mag.astype(np.float32)
    s = rng.choice([-1.0, 1.0], size=n)
    if n > 1:
        s[rng.integers(n)] = -1.0  # at least one of each sign
        s[rng.integers(n)] = 1.0
    return (s * mag).astype(np.float32)


class _OneValue(GridStride):
    """A grid-stride reduction of signed float32 data into one value ``OUT[0]``, which holds
    ``START`` before the launch; exact (counts and maxima have no rounding)."""

    SIGNS: tuple = ("mixed",)
    OUT, DTYPE, START = "out", np.float32, 0

    def value(self, x):
        raise NotImplementedError

    def cases(self):
        cases = _float_cases(self.SIGNS)
        for c in cases:
            c.repeats = 1
        racy = next(c for c in cases if c.params["sign"] == "mixed" and c.grid[0] > 1)
        racy.repeats = 2  # run twice (traced in the simulator): blocks racing on OUT
        return cases

    def make_inputs(self, case, rng):
        return {"x": signed_floats(rng, case.params["n"], case.params["sign"])}

    def outputs(self, case):
        return {self.OUT: ((1,), self.DTYPE)}

    def prepare(self, case, args):
        args[self.OUT].copy_to_device(np.full(1, self.START, dtype=self.DTYPE))

    def reference(self, case, inputs):
        return {
            self.OUT: np.array(
                [self.value(inputs["x"])],
                dtype=np.float64 if self.DTYPE == np.float32 else self.DTYPE,
            )
        }

    def tolerance(self, case, name):
        return EXACT

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["x"], args[self.OUT])


class CountPositive(_OneValue):
    """count[0] = how many x[i] > 0 (Thrust's count_if); zero before the launch."""

    SIGNS = ("mixed", "negative", "mixed", "positive")
    OUT, DTYPE, START = "count", np.int32, 0

    def value(self, x):
        return int(np.sum(x > 0))


class BlockMax(_OneValue):
    """out[0] = the largest x[i]; out[0] holds the lowest float32 before the launch."""

    SIGNS = ("mixed", "negative")
    OUT, DTYPE, START = "out", np.float32, LOWEST

    def value(self, x):
        return x.max()


HINTS = {
    "wrong": "What does each thread's running value start at? For a max it must be "
    "the identity of max (-inf, or the lowest float32), not 0: with no positive "
    "value in x, 0 wins."
}

EXERCISES = [
    CountPositive(
        "count_positive",
        "12_thrust_algorithms",
        "@cuda.jit def count_positive(x, count)",
        "add to count[0] the number of elements of x that are > 0 (Thrust's "
        "count_if): a grid-stride loop counts per thread, then one "
        "cuda.atomic.add per thread (or per block)",
    ),
    BlockMax(
        "debug_max_identity",
        "12_thrust_algorithms",
        "@cuda.jit def max_fixed(x, out)",
        "fix the given max reduction so that out[0] is the largest element of x for "
        "any data, negative data included",
        kind="debug",
        hints=HINTS,
    ),
]
