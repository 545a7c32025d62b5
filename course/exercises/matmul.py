"""Lesson 04 exercise: ``matmul_tiled`` - C = A @ B with shared-memory tiles of TILE x TILE.

The spec launches ``matmul[(ceil(N / TILE), ceil(M / TILE)), (TILE, TILE)](A, B, C)`` for
A (M x K), B (K x N), C (M x N), float32, with ``TILE = 16`` (this module's constant, which
the student's kernel uses for its ``cuda.shared.array((TILE, TILE), float32)`` tiles).
Block (bx, by) owns the tile C[by*TILE : +TILE, bx*TILE : +TILE]; thread (tx, ty) owns
C[by*TILE + ty, bx*TILE + tx].
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from . import Case, Exercise, Tolerance, random_floats, sim

TILE = 16  # threads per block side, and the side of the shared tiles sA, sB


class MatmulTiled(Exercise):
    """C = A @ B (float32, any compatible shapes) with TILE x TILE shared-memory tiles."""

    read_arrays = ("A", "B")  # what a tune target counts as the kernel's global reads

    def cases(self):
        t = TILE
        shapes = [
            ((1, 1, 1), "1 x 1 @ 1 x 1"),
            ((t, t, t), "one tile, exact"),
            ((t - 1, t + 1, t + 3), "tile - 1 rows, K = tile + 1"),
            ((t + 1, 37, t // 2 + 1), "37 (prime) = K, neither M nor N a multiple"),
            ((5, 2 * t + 3, 3 * t - 1), "wide and short, K not a multiple"),
        ]
        if not sim():
            shapes += [((257, 1000, 129), "large, odd"), ((1024, 1024, 1024), "1024^3")]
        out = []
        for (m, k, n), name in shapes:
            out.append(
                Case(
                    f"M x K x N = {m} x {k} x {n} ({name})",
                    {"M": m, "K": k, "N": n},
                    (math.ceil(n / t), math.ceil(m / t)),
                    (t, t),
                    repeats=2 if k == 37 else 1,
                )
            )
        return out

    def make_inputs(self, case, rng):
        p = case.params
        return {
            "A": random_floats(rng, (p["M"], p["K"])),
            "B": random_floats(rng, (p["K"], p["N"])),
        }

    def outputs(self, case):
        return {"C": ((case.params["M"], case.params["N"]), np.float32)}

    def reference(self, case, inputs):
        return {"C": inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)}

    def tolerance(self, case, name):
        k = case.params["K"]
        return Tolerance(
            rtol=1e-5,
            atol=1e-6 * math.sqrt(k) * 4 + 1e-6,
            why=f"float32 dot products of K = {k} terms in [-1, 1]",
        )

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["A"], args["B"], args["C"])


class MatmulEpilogue(MatmulTiled):
    """C = relu(A @ B + bias) in one kernel: the epilogue fused into the matmul's store."""

    def make_inputs(self, case, rng):
        return {**super().make_inputs(case, rng), "bias": random_floats(rng, case.params["N"])}

    def reference(self, case, inputs):
        c = super().reference(case, inputs)["C"] + inputs["bias"]
        return {"C": np.maximum(c, 0.0)}

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["A"], args["B"], args["bias"], args["C"])


SPLITS = 4  # split-K: blocks along z, each summing one K-chunk into C with atomics


@cuda.jit
def zero_2d(C):
    # The spec's helper (not the student's): C = 0 before a split-K launch adds into it.
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = 0.0


class MatmulSplitK(MatmulTiled):
    """C = A @ B with the K dimension split over gridDim.z = SPLITS blocks of atomics."""

    def cases(self):
        return [
            Case(
                c.name + f", {SPLITS} K-splits",
                c.params,
                (*c.grid, SPLITS),
                c.block,
                repeats=c.repeats,
            )
            for c in super().cases()
        ]

    def tolerance(self, case, name):
        k = case.params["K"]
        return Tolerance(
            rtol=1e-5,
            atol=1e-6 * math.sqrt(k) * 4 + 1e-6 * SPLITS,
            why=f"float32 dot products of K = {k} terms, {SPLITS} partial sums added in any order",
        )

    def launch(self, kernel, case, args):
        zero_2d[case.grid[:2], case.block](args["C"])
        kernel[case.grid, case.block](args["A"], args["B"], args["C"])


EXERCISES = [
    MatmulTiled(
        "matmul_tiled",
        "04_matmul",
        "@cuda.jit def matmul(A, B, C)",
        f"set C = A @ B for float32 A (M x K), B (K x N): blocks of (TILE, TILE) = "
        f"({TILE}, {TILE}) threads, one C element per thread, stepping over K in tiles loaded "
        "cooperatively into shared sA, sB (TILE x TILE each) with syncthreads after loading "
        "and after using them; zero-fill tile elements past the matrix edges",
        hints={"guard": "a tile element past the edge must be 0, not left over from before"},
    ),
    MatmulEpilogue(
        "matmul_epilogue",
        "04_matmul",
        "@cuda.jit def matmul_bias_relu(A, B, bias, C)",
        "set C = max(A @ B + bias, 0) (bias[j] added to column j) in one kernel: the same "
        "launch as matmul_tiled, with the bias add and the ReLU applied to the accumulator "
        "before the single store of C",
    ),
    MatmulTiled(
        "debug_matmul_sync",
        "04_matmul",
        "@cuda.jit def matmul_fixed(A, B, C)",
        "fix the given tiled matmul so that it gives the right C on every run",
        kind="debug",
    ),
    MatmulSplitK(
        "matmul_split_k",
        "04_matmul",
        "@cuda.jit def matmul_split_k(A, B, C)",
        f"add A @ B into C (zeroed before the launch) with blocks of (TILE, TILE) threads on a "
        f"grid of (ceil(N / TILE), ceil(M / TILE), {SPLITS}): block z sums its share "
        f"ceil(K / gridDim.z) of the K terms of each C element and adds it with "
        "cuda.atomic.add",
    ),
]
