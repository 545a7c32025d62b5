"""Hidden cases for ``mean_face`` (lesson 05): a block size that is not a power of two, one
thread per block, far more threads than pixels, and a single image of many pixels."""

from course.exercises import Case, blocks_for, sim

POINTS = 1


def cases(exercise):
    n_big = 997 if sim() else 100_003
    return [
        Case(
            "n = 100, m = 4, 48 threads per block",
            {"m": 4, "n": 100},
            (blocks_for(100, 48),),
            (48,),
        ),
        Case("n = 9, m = 6, one thread per block", {"m": 6, "n": 9}, (9,), (1,)),
        Case("n = 20, m = 3, far more threads than pixels", {"m": 3, "n": 20}, (4,), (64,)),
        Case(f"n = {n_big}, m = 2", {"m": 2, "n": n_big}, (blocks_for(n_big, 96),), (96,)),
    ]
