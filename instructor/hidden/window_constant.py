"""Hidden cases for ``window_constant`` (lesson 03): blocks that are not a power of two,
one thread per block, and N an exact multiple of the block."""

from course.exercises import Case, blocks_for, sim

POINTS = 1


def cases(exercise):
    big = 2_000 if sim() else (1 << 22) + 1
    return [
        Case(f"N = {n}, {tpb} threads/block", {"N": n}, (blocks_for(n, tpb),), (tpb,))
        for n, tpb in [(96, 48), (9, 1), (256, 64), (big, 96)]
    ]
