"""Hidden cases for ``tune_transpose`` (lesson 10): a single row and a single column, a
tall and a wide matrix off the tile, and (on a GPU) a large odd one."""

from course.exercises import Case, blocks_for, sim
from course.exercises.profiling import TILE_T

POINTS = 1


def cases(exercise):
    shapes = [(1, 70), (45, 1), (97, 13), (9, 65)]
    if not sim():
        shapes.append((3001, 1999))
    return [
        Case(
            f"m x n = {m} x {n}",
            {"m": m, "n": n},
            (blocks_for(n, TILE_T), blocks_for(m, TILE_T)),
            (TILE_T, 8),
            repeats=2 if i == 2 else 1,
        )
        for i, (m, n) in enumerate(shapes)
    ]
