"""Hidden cases for ``online_softmax`` (lesson 08): many elements per thread (catches a
running sum that is not rescaled when the max grows), one thread per block, a row shorter
than the block (idle threads hold -inf), 256 threads, and values past float32's exp range
(|x| > 88.7: catches a missing max subtraction)."""

from course.exercises import Case, sim

POINTS = 1


def cases(exercise):
    rows = [
        (4, 500, 16, 1.0, "many elements per thread"),
        (5, 33, 1, 1.0, "one thread per block"),
        (2, 1, 256, 1.0, "a single element, 256 threads"),
        (3, 128, 128, 1.0, "n = tpb (exact)"),
        (3, 200, 64, 100.0, "values +-100 (exp overflows float32)"),
    ]
    if not sim():
        rows += [(16, 1_000_003, 256, 1.0, "long rows"), (1024, 4097, 128, 50.0, "many rows")]
    return [
        Case(
            f"{r} rows x n = {n}, {tpb} threads/block ({what})",
            {"rows": r, "n": n, "scale": scale},
            (r,),
            (tpb,),
            repeats=2 if i == 0 else 1,
        )
        for i, (r, n, tpb, scale, what) in enumerate(rows)
    ]
