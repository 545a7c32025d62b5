"""Lesson 08 exercises: ``online_softmax`` and ``flash_attention_forward``.

flash_attention_forward reads the tile sizes from the student's kernel module (in a
notebook: the notebook's globals): ``Br`` (query rows per block, default 16), ``Bc``
(key rows per tile, default 16) and ``THREADS_PER_BLK`` (default Br), and launches
``flash_attn[(ceil(N / Br), batch*heads), THREADS_PER_BLK](Q, K, V, O, scale)``.
"""

from __future__ import annotations

import math

import numpy as np

from . import Case, Exercise, Tolerance, prime_near, random_floats, sim

DEFAULTS = {"Br": 16, "Bc": 16}


def tile_sizes(kernel) -> dict:
    """Br, Bc, THREADS_PER_BLK as the student's module defines them (documented defaults)."""
    g = getattr(getattr(kernel, "py_func", None), "__globals__", {})
    out = {k: int(g.get(k, v)) for k, v in DEFAULTS.items()}
    out["THREADS_PER_BLK"] = int(g.get("THREADS_PER_BLK", out["Br"]))
    return out


def softmax_reference(x: np.ndarray) -> np.ndarray:
    """Row softmax in float64 with the max subtracted."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class OnlineSoftmax(Exercise):
    """out[r] = softmax(x[r]) for each row r of a (rows, n) float32 array; one block per row."""

    def cases(self):
        small, big = (32, 64) if sim() else (128, 256)
        large = 700 if sim() else 100_003
        rows = [
            (3, 1, small, 1.0),
            (2, small - 1, small, 1.0),
            (2, small + 1, small, 1.0),
            (3, prime_near(3 * big), big, 1.0),
            (2, large, small, 1.0),
            (2, prime_near(2 * big), big, 1e4),
        ]
        return [
            Case(
                f"{r} rows x n = {n}" + (f", values +-{scale:g}" if scale > 1 else ""),
                {"rows": r, "n": n, "scale": scale},
                (r,),
                (tpb,),
                repeats=2 if i == 3 else 1,
            )  # run twice (traced): races
            for i, (r, n, tpb, scale) in enumerate(rows)
        ]

    def make_inputs(self, case, rng):
        p = case.params
        return {"x": random_floats(rng, (p["rows"], p["n"]), low=-p["scale"], high=p["scale"])}

    def outputs(self, case):
        return {"out": ((case.params["rows"], case.params["n"]), np.float32)}

    def reference(self, case, inputs):
        return {"out": softmax_reference(inputs["x"])}

    def tolerance(self, case, name):
        return Tolerance(rtol=1e-5, atol=1e-7, why="float32 exp and a sum over the row")

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["x"], args["out"])


class FlashAttentionForward(Exercise):
    """O = softmax(Q K^T * scale) V for (batch*heads, N, d) float32, tiled with Br, Bc."""

    launch_names = (*DEFAULTS, "THREADS_PER_BLK")

    def cases(self):
        shapes = [
            (1, 1, 32, 1.0),
            (2, 15, 32, 1.0),
            (2, 17, 64, 1.0),
            (1, 37, 32, 1.0),
            (1, 40, 64, 8.0),
        ]
        if not sim():
            shapes += [(8, 1000, 64, 1.0), (4, 4099, 32, 1.0)]
        return [
            Case(
                f"batch*heads = {bh}, N = {n}, d = {d}"
                + (f", inputs x{big:g} (scores in the hundreds)" if big > 1 else ""),
                {"bh": bh, "n": n, "d": d, "big": big},
                (f"ceil({n} / Br)", bh),
                ("THREADS_PER_BLK",),
                repeats=2 if i == 3 else 1,
            )
            for i, (bh, n, d, big) in enumerate(shapes)
        ]

    def make_inputs(self, case, rng):
        p = case.params
        shape = (p["bh"], p["n"], p["d"])
        return {
            "Q": random_floats(rng, shape, low=-p["big"], high=p["big"]),
            "K": random_floats(rng, shape, low=-p["big"], high=p["big"]),
            "V": random_floats(rng, shape),
            "scale": np.float32(1.0 / math.sqrt(p["d"])),
        }

    def outputs(self, case):
        p = case.params
        return {"O": ((p["bh"], p["n"], p["d"]), np.float32)}

    def reference(self, case, inputs):
        from ..kernels.attention import reference

        return {"O": reference(inputs["Q"][None], inputs["K"][None], inputs["V"][None])[0]}

    def tolerance(self, case, name):
        return Tolerance(
            rtol=1e-4, atol=2e-5, why="float32 dot products of length d and sums over N keys"
        )

    def launch(self, kernel, case, args):
        t = tile_sizes(kernel)
        grid = (math.ceil(case.params["n"] / t["Br"]), case.params["bh"])
        kernel[grid, t["THREADS_PER_BLK"]](
            args["Q"], args["K"], args["V"], args["O"], args["scale"]
        )


EXERCISES = [
    OnlineSoftmax(
        "online_softmax",
        "08_flash_attention",
        "@cuda.jit def softmax_rows(x, out)",
        "write the softmax of each row of x into out: one block per row, one pass "
        "keeping a running max and sum, then the normalized row; no overflow",
    ),
    FlashAttentionForward(
        "flash_attention_forward",
        "08_flash_attention",
        "@cuda.jit def flash_attn(Q, K, V, O, scale)",
        "write O = softmax(Q K^T * scale) V for (batch*heads, N, d) float32 arrays: block "
        "(x, y) owns query rows x*Br .. x*Br+Br-1 of head y and walks K, V in tiles of Bc "
        "rows in shared memory with an online softmax",
    ),
    OnlineSoftmax(
        "debug_softmax_rescale",
        "08_flash_attention",
        "@cuda.jit def softmax_rows_fixed(x, out)",
        "fix the given one-pass softmax so that rows whose maximum is not their "
        "first element come out right",
        kind="debug",
    ),
]
