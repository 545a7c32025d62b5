"""Hidden cases for ``matmul_split_k`` (lesson 04): K smaller than the number of splits, K an
exact multiple of it, and a long K."""

import math

from course.exercises import Case, sim
from course.exercises.matmul import SPLITS, TILE

POINTS = 1


def cases(exercise):
    shapes = [(7, 3, 9), (TILE, 4 * SPLITS, 5), (3, 101, 2)]
    if not sim():
        shapes.append((300, 4096, 200))
    return [
        Case(
            f"M x K x N = {m} x {k} x {n}",
            {"M": m, "K": k, "N": n},
            (math.ceil(n / TILE), math.ceil(m / TILE), SPLITS),
            (TILE, TILE),
            repeats=2 if k == 101 else 1,
        )
        for m, k, n in shapes
    ]
