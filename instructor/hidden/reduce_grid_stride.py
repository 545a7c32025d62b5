"""Hidden cases for ``reduce_grid_stride`` (lesson 02, kernel 7): grids the public cases do
not use - a block count that is not a power of two, more threads than elements, one thread
per block, n an exact multiple of the grid's thread count - and block sizes 16 and 128
(catches a stride with a hard-coded blockDim)."""

from course.exercises import Case, sim

POINTS = 1


def _case(name, n, blocks, tpb, dtype, repeats=1):
    return Case(
        f"{name}, {dtype}, {blocks} blocks of {tpb}",
        {"n": n, "dtype": dtype, "tpb": tpb},
        (blocks,),
        (tpb,),
        shared_bytes=tpb * 4,
        repeats=repeats,
    )


def cases(exercise):
    rows = [
        ("n = 1000", 1000, 7, 16, "int32"),
        ("n = 10, more threads than elements", 10, 4, 32, "int32"),
        ("n = 333, one thread per block", 333, 5, 1, "float32"),
        ("n = 2 x 4 x 128 (exact multiple)", 1024, 4, 128, "float32"),
        ("n = 3001", 3001, 2, 128, "int32"),
    ]
    if not sim():
        rows += [
            ("n = 2^24 + 1", (1 << 24) + 1, 132, 256, "int32"),
            ("n = 10^7", 10_000_000, 1000, 512, "float32"),
        ]
    return [_case(*r, repeats=2 if r[1] == 1000 else 1) for r in rows]
