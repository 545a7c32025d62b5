"""Lesson 01 exercises: ``vector_add`` (grid-stride loop) and ``matrix_add`` (2-D grid)."""
from __future__ import annotations

import numpy as np

from . import Case, Exercise, blocks_for, prime_near, random_floats, sim


class VectorAdd(Exercise):
    """y[i] = x[i] + y[i] for every i < n, with a grid-stride loop (any grid size)."""

    def cases(self):
        small, big = (32, 64) if sim() else (128, 256)
        large = 3001 if sim() else (1 << 20) + 7
        return [
            Case("n = 1", {"n": 1}, (1,), (small,)),
            Case("n = tpb - 1", {"n": small - 1}, (1,), (small,)),
            Case("n = tpb + 1", {"n": small + 1}, (2,), (small,)),
            Case(f"n = {prime_near(5 * big)} (prime), second block size",
                 {"n": prime_near(5 * big)}, (blocks_for(prime_near(5 * big), big),), (big,),
                 repeats=2),
            Case(f"n = {large}, far fewer threads than n", {"n": large}, (3,), (big,)),
            Case(f"n = {large}, one block", {"n": large}, (1,), (small,)),
        ]

    def make_inputs(self, case, rng):
        n = case.params["n"]
        return {"n": n, "x": random_floats(rng, n), "y": random_floats(rng, n)}

    def reference(self, case, inputs):
        return {"y": inputs["x"].astype(np.float64) + inputs["y"]}

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["n"], args["x"], args["y"])


class MatrixAdd(Exercise):
    """C[j, i] = A[j, i] + B[j, i] on (Ny, Nx) arrays, one thread per element, 2-D grid."""

    def cases(self):
        shapes = [((5, 11), (4, 3)),        # the lecture's Nx = 11, Ny = 5, 4 x 3 blocks
                  ((1, 1), (4, 4)),
                  ((17, 13), (8, 4)),
                  ((7, 33), (4, 8))]
        if not sim():
            shapes += [((1000, 1003), (16, 16)), ((2049, 257), (32, 8))]
        out = []
        for (ny, nx), (bx, by) in shapes:
            out.append(Case(f"Ny x Nx = {ny} x {nx}", {"ny": ny, "nx": nx},
                            (blocks_for(nx, bx), blocks_for(ny, by)), (bx, by)))
        return out

    def make_inputs(self, case, rng):
        shape = (case.params["ny"], case.params["nx"])
        return {"A": random_floats(rng, shape), "B": random_floats(rng, shape)}

    def outputs(self, case):
        return {"C": ((case.params["ny"], case.params["nx"]), np.float32)}

    def reference(self, case, inputs):
        return {"C": inputs["A"].astype(np.float64) + inputs["B"]}

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["A"], args["B"], args["C"])


EXERCISES = [
    VectorAdd("vector_add", "01_vector_add", "@cuda.jit def add(n, x, y)",
              "set y[i] = x[i] + y[i] for every i < n with a grid-stride loop, for any grid",
              inout=("y",)),
    MatrixAdd("matrix_add", "01_vector_add", "@cuda.jit def matrix_add(A, B, C)",
              "set C[j, i] = A[j, i] + B[j, i] for every element of the (Ny, Nx) arrays, "
              "guarding threads outside the matrix"),
    VectorAdd("debug_grid_stride", "01_vector_add", "@cuda.jit def add_stride(n, x, y)",
              "fix the given grid-stride kernel so that y[i] = x[i] + y[i] for every i < n, "
              "for any grid", inout=("y",), kind="debug"),
    MatrixAdd("debug_matrix_layout", "01_vector_add", "@cuda.jit def matrix_add_fixed(A, B, C)",
              "fix the given matrixAdd so that C = A + B on (Ny, Nx) arrays that are not "
              "square", kind="debug"),
]
