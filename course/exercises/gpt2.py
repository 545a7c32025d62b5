"""Lesson 11 exercises: ``layernorm_warp`` (write) and ``debug_layernorm_sync`` (debug).

Both are GPT-2's layernorm, ``out = (x - mean) / sqrt(var + 1e-5) * weight + bias`` over
each row of ``inp`` (rows x C float32), one row per block: ``layernorm_warp`` with one warp
of 32 threads a row and its sums by warp shuffles (no shared memory, no syncthreads);
``debug_layernorm_sync`` a given block kernel whose two shared-memory sums share one buffer
without the barrier between them.  ``predict_gpt2`` (which kernel dominates, and by how
much) is in predict.py.
"""

from __future__ import annotations

import math

import numpy as np

from . import Case, Exercise, Tolerance, random_floats

WARP = 32


def _cases(rows_cols) -> list[Case]:
    return [
        Case(f"{r} row(s) x C = {c}", {"rows": r, "C": c}, (r,), (WARP,), repeats=2 if r > 1 else 1)
        for r, c in rows_cols
    ]


class LayerNormRows(Exercise):
    """out[r, :] = layernorm(inp[r, :]) * weight + bias, eps 1e-5; one block of 32 a row."""

    def cases(self):
        return _cases([(1, 1), (3, 31), (2, 32), (4, 33), (2, 100), (3, 257)])

    def make_inputs(self, case, rng):
        rows, c = case.params["rows"], case.params["C"]
        x = random_floats(rng, (rows, c), low=-2.0, high=2.0) + rng.uniform(
            -1, 1, (rows, 1)
        ).astype(np.float32)  # rows off zero mean
        return {
            "inp": x.astype(np.float32),
            "weight": random_floats(rng, c, low=0.5, high=1.5),
            "bias": random_floats(rng, c),
        }

    def outputs(self, case):
        return {"out": ((case.params["rows"], case.params["C"]), np.float32)}

    def reference(self, case, inputs):
        x = inputs["inp"].astype(np.float64)
        m = x.mean(1, keepdims=True)
        v = ((x - m) ** 2).mean(1, keepdims=True)
        return {"out": (x - m) / np.sqrt(v + 1e-5) * inputs["weight"] + inputs["bias"]}

    def tolerance(self, case, name):
        c = case.params["C"]
        return Tolerance(
            rtol=1e-5,
            atol=2e-6 * math.sqrt(c) + 1e-6,
            why=f"float32 mean and variance of {c} terms, a division and a "
            "square root; float64 reference",
        )

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["out"], args["inp"], args["weight"], args["bias"])


HINTS = {
    "wrong": "Every lane needs the whole row's sum: shfl_down leaves it in lane 0 only "
    "(shfl_xor gives it to all). The variance divides by C, not C - 1. Two "
    "sums sharing one shared buffer need a cuda.syncthreads() between the "
    "reads of the first result and the writes of the second."
}

EXERCISES = [
    LayerNormRows(
        "layernorm_warp",
        "11_gpt2",
        "@cuda.jit def layernorm_warp(out, inp, weight, bias)",
        "GPT-2's layernorm of each row of inp with one warp of 32 threads a "
        "row: the mean and the variance summed with warp shuffles "
        "(cuda.shfl_xor_sync), eps 1e-5",
        hints=HINTS,
    ),
    LayerNormRows(
        "debug_layernorm_sync",
        "11_gpt2",
        "@cuda.jit def layernorm_fixed(out, inp, weight, bias)",
        "fix the given block layernorm so that every row is right "
        "on every run, not only on lucky ones",
        kind="debug",
        hints=HINTS,
    ),
]
