"""Hidden cases for ``reduce_first_add`` (lesson 02, kernel 4): block sizes the public cases do
not use (1, 16, 128: catches a hard-coded blockDim), n = tpb + 1 (the last block's second
half is nearly empty), n an exact multiple of 2 * tpb, and many small blocks."""

from course.exercises import Case, blocks_for, sim

POINTS = 1


def _case(name, n, tpb, dtype, repeats=1):
    return Case(
        f"{name}, {dtype}, {tpb} threads/block",
        {"n": n, "dtype": dtype, "tpb": tpb},
        (blocks_for(n, 2 * tpb),),
        (tpb,),
        shared_bytes=tpb * 4,
        repeats=repeats,
    )


def cases(exercise):
    rows = [
        ("n = 2, one thread per block", 2, 1, "int32"),
        ("n = 7, one thread per block", 7, 1, "float32"),
        ("n = 2 x 16 x 4 (exact multiple)", 128, 16, "int32"),
        ("n = 129 (tpb + 1)", 129, 128, "int32"),
        ("n = 301", 301, 128, "float32"),
        ("n = 61, blocks of 8", 61, 8, "int32"),
    ]
    if not sim():
        rows += [
            ("n = 2^22 (exact multiple)", 1 << 22, 512, "int32"),
            ("n = 3 x 10^6 + 1", 3_000_001, 256, "float32"),
        ]
    return [_case(*r, repeats=2 if r[1] == 128 else 1) for r in rows]
