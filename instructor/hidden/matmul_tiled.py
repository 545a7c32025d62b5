"""Hidden cases for ``matmul_tiled`` (lesson 04): a single row of A (M = 1), a single column of
B (N = 1), K = 1 (one partial tile: catches a K loop that drops the last, partial tile),
and exact multiples of TILE in every dimension (no edge at all)."""

import math

from course.exercises import Case, sim
from course.exercises.matmul import TILE

POINTS = 1


def cases(exercise):
    t = TILE
    shapes = [
        ((1, 40, 33), "one row of A"),
        ((35, 20, 1), "one column of B"),
        ((20, 1, 18), "K = 1"),
        ((t, 2 * t, 2 * t), "exact multiples of the tile"),
    ]
    if not sim():
        shapes += [
            ((1000, 1, 1000), "K = 1, large"),
            ((1, 4097, 513), "one long row"),
            ((2048, 2048, 17), "tall, N = 17"),
        ]
    return [
        Case(
            f"M x K x N = {m} x {k} x {n} ({name})",
            {"M": m, "K": k, "N": n},
            (math.ceil(n / t), math.ceil(m / t)),
            (t, t),
        )
        for (m, k, n), name in shapes
    ]
