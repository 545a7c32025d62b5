"""Hidden cases for ``flash_attention_forward`` (lesson 08): N = 1 over several heads, N an
exact multiple of Br and Bc, a head dimension that is not a power of two, and many key
tiles with scores large enough that exp overflows without the running max (catches a
missing rescale of the accumulator and a missing max subtraction)."""

from course.exercises import Case, sim

POINTS = 1


def cases(exercise):
    shapes = [
        (3, 1, 16, 1.0, "one query and key per head"),
        (1, 32, 8, 1.0, "N an exact multiple of the tiles"),
        (2, 21, 48, 1.0, "d = 48"),
        (1, 50, 16, 12.0, "inputs x12: scores past float32's exp range"),
    ]
    if not sim():
        shapes += [(16, 2049, 64, 1.0, "long"), (2, 1023, 32, 12.0, "long, large scores")]
    return [
        Case(
            f"batch*heads = {bh}, N = {n}, d = {d} ({what})",
            {"bh": bh, "n": n, "d": d, "big": big},
            (f"ceil({n} / Br)", bh),
            ("THREADS_PER_BLK",),
            repeats=2 if i == 1 else 1,
        )
        for i, (bh, n, d, big, what) in enumerate(shapes)
    ]
