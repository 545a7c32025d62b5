"""Hidden cases for ``count_positive`` (lesson 12): all negative, all positive, one block,
and a grid far smaller than n."""

from course.exercises import Case, sim

POINTS = 1


def cases(exercise):
    big = 2_003 if sim() else (1 << 22) + 5
    rows = [(7, 32, 1, "negative"), (130, 64, 1, "positive"), (big, 32, 2, "mixed")]
    return [
        Case(
            f"n = {n}, float32, {blocks} blocks of {tpb}, {sign} values",
            {"n": n, "dtype": "float32", "tpb": tpb, "sign": sign},
            (blocks,),
            (tpb,),
            shared_bytes=4 * tpb,
        )
        for n, tpb, blocks, sign in rows
    ]
