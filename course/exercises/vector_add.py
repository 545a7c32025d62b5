"""Lesson 01 exercises: ``vector_add`` (a grid-stride loop) and ``matrix_add`` (a 2-D grid).

The lecture's own kernels (``add_grid_stride``, ``matrixAdd``) are in
``course/kernels/vector_add.py``, which every student installs, so the two write exercises
ask for kernels the package does not contain, with the same teaching point: ``vector_add``
adds ``x`` read backwards (the grid-stride loop, plus index arithmetic), ``matrix_add`` adds
the transpose of ``B`` (the 2-D index, its guard, and which index is the row).  The debug
and tune exercises keep the lecture's ``y = x + y`` and ``C = A + B``: their given kernel is
there to be fixed or made fast, and ``release --check`` proves no exercise's answer is in
the package.
"""

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
            Case(
                f"n = {prime_near(5 * big)} (prime), second block size",
                {"n": prime_near(5 * big)},
                (blocks_for(prime_near(5 * big), big),),
                (big,),
                repeats=2,
            ),
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


class ReversedAdd(VectorAdd):
    """y[i] = x[n - 1 - i] + y[i] for every i < n, with a grid-stride loop (any grid)."""

    def reference(self, case, inputs):
        return {"y": inputs["x"][::-1].astype(np.float64) + inputs["y"]}


class MatrixAdd(Exercise):
    """C[j, i] = A[j, i] + B[j, i] on (Ny, Nx) arrays, one thread per element, 2-D grid."""

    def cases(self):
        shapes = [
            ((5, 11), (4, 3)),  # the lecture's Nx = 11, Ny = 5, 4 x 3 blocks
            ((1, 1), (4, 4)),
            ((17, 13), (8, 4)),
            ((7, 33), (4, 8)),
        ]
        if not sim():
            shapes += [((1000, 1003), (16, 16)), ((2049, 257), (32, 8))]
        out = []
        for (ny, nx), (bx, by) in shapes:
            out.append(
                Case(
                    f"Ny x Nx = {ny} x {nx}",
                    {"ny": ny, "nx": nx},
                    (blocks_for(nx, bx), blocks_for(ny, by)),
                    (bx, by),
                )
            )
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


class TransposedAdd(MatrixAdd):
    """C[j, i] = A[j, i] + B[i, j]: A and C are (Ny, Nx), B is (Nx, Ny); one thread per
    element of C on a 2-D grid."""

    def make_inputs(self, case, rng):
        ny, nx = case.params["ny"], case.params["nx"]
        return {"A": random_floats(rng, (ny, nx)), "B": random_floats(rng, (nx, ny))}

    def reference(self, case, inputs):
        return {"C": inputs["A"].astype(np.float64) + inputs["B"].T}


# The lecture's y = x + y as a spec of its own, not an exercise (nobody is asked to write
# it: the package holds it): the base of tune_vector_add and the tune_vector_add board.
LECTURE_ADD = VectorAdd(
    "lecture_add",
    "01_vector_add",
    "@cuda.jit def add(n, x, y)",
    "y[i] = x[i] + y[i] for every i < n, for any grid",
    inout=("y",),
)

EXERCISES = [
    ReversedAdd(
        "vector_add",
        "01_vector_add",
        "@cuda.jit def add(n, x, y)",
        "set y[i] = x[n - 1 - i] + y[i] (x read backwards) for every i < n with a "
        "grid-stride loop, for any grid",
        inout=("y",),
    ),
    TransposedAdd(
        "matrix_add",
        "01_vector_add",
        "@cuda.jit def matrix_add(A, B, C)",
        "set C[j, i] = A[j, i] + B[i, j] (B transposed: B is (Nx, Ny)) for every "
        "element of the (Ny, Nx) output, guarding threads outside the matrix",
    ),
    VectorAdd(
        "debug_grid_stride",
        "01_vector_add",
        "@cuda.jit def add_stride(n, x, y)",
        "fix the given grid-stride kernel so that y[i] = x[i] + y[i] for every i < n, for any grid",
        inout=("y",),
        kind="debug",
    ),
    MatrixAdd(
        "debug_matrix_layout",
        "01_vector_add",
        "@cuda.jit def matrix_add_fixed(A, B, C)",
        "fix the given matrixAdd so that C = A + B on (Ny, Nx) arrays that are not square",
        kind="debug",
    ),
]
