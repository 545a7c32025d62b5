"""Hidden cases for ``debug_max_identity`` (lesson 12): a single negative value, values all
below -1, and a grid far smaller than n."""

from course.exercises import Case, sim

POINTS = 1


def cases(exercise):
    big = 2_011 if sim() else (1 << 22) + 9
    rows = [(1, 32, 1, "negative"), (97, 64, 2, "negative"), (big, 32, 2, "mixed")]
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
