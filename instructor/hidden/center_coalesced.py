"""Hidden cases for ``center_coalesced`` (lesson 06): a single row and a single column, a
block of one warp, far more threads than elements, and m * n an exact multiple of the block."""

from course.exercises import Case, blocks_for, sim

POINTS = 1


def cases(exercise):
    big = (41, 97) if sim() else (4099, 2475)
    shapes = [((1, 77), 32), ((45, 1), 32), ((8, 8), 64), ((3, 5), 96), (big, 128)]
    return [
        Case(
            f"m x n = {m} x {n}, {tpb} threads/block",
            {"m": m, "n": n},
            (blocks_for(m * n, tpb) + (2 if i == 3 else 0),),
            (tpb,),
            repeats=2 if i == 4 else 1,
        )
        for i, ((m, n), tpb) in enumerate(shapes)
    ]
