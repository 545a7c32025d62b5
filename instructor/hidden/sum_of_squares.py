"""Hidden cases for ``sum_of_squares`` (lesson 05): one block, many more threads than
elements, and a grid far smaller than n."""

from course.exercises import Case, sim

POINTS = 1


def cases(exercise):
    big = 3_001 if sim() else (1 << 22) + 3
    rows = [(5, 32, 4), (100, 64, 1), (big, 32, 2)]
    return [
        Case(
            f"n = {n}, float32, {blocks} blocks of {tpb}",
            {"n": n, "dtype": "float32", "tpb": tpb},
            (blocks,),
            (tpb,),
            shared_bytes=4 * tpb,
            repeats=2 if n == 100 else 1,
        )
        for n, tpb, blocks in rows
    ]
