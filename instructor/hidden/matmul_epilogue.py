"""Hidden cases for ``matmul_epilogue`` (lesson 04): a single row and column, K = 1, and
shapes where M, N and K are all off the tile."""

import math

from course.exercises import Case, sim
from course.exercises.matmul import TILE

POINTS = 1


def cases(exercise):
    shapes = [(1, 19, 40), (23, 1, 5), (TILE + 7, TILE * 2 + 1, TILE + 9)]
    if not sim():
        shapes.append((511, 257, 333))
    return [
        Case(
            f"M x K x N = {m} x {k} x {n}",
            {"M": m, "K": k, "N": n},
            (math.ceil(n / TILE), math.ceil(m / TILE)),
            (TILE, TILE),
        )
        for m, k, n in shapes
    ]
