"""Hidden cases for ``reduce_sequential`` (lesson 02, kernel 3): block sizes the public cases
do not use (1, 16, 128, 256: catches a hard-coded blockDim or tree start), n an exact
multiple of the block size (no partial last block), and many small blocks."""

from course.exercises import Case, blocks_for, sim

POINTS = 1


def _case(name, n, tpb, dtype, repeats=1):
    itemsize = 4  # int32 and float32
    return Case(
        f"{name}, {dtype}, {tpb} threads/block",
        {"n": n, "dtype": dtype, "tpb": tpb},
        (blocks_for(n, tpb),),
        (tpb,),
        shared_bytes=tpb * itemsize,
        repeats=repeats,
    )


def cases(exercise):
    rows = [
        ("n = 5, one thread per block", 5, 1, "int32"),
        ("n = 16 x 5 (exact multiple)", 80, 16, "int32"),
        ("n = 300", 300, 128, "float32"),
        ("n = 257 (256 + 1)", 257, 256, "int32"),
        ("n = 61, blocks of 8", 61, 8, "float32"),
    ]
    if not sim():
        rows += [
            ("n = 2^22 (exact multiple)", 1 << 22, 1024, "int32"),
            ("n = 3 x 10^6 + 1", 3_000_001, 512, "float32"),
        ]
    return [_case(*r, repeats=2 if r[1] == 80 else 1) for r in rows]
