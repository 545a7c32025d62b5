"""Hidden cases for ``covariance_tiled`` (lesson 07): chunk sizes the public cases do not use
(1, 2, 6, 16: chunk_size is blockDim.x, not a constant), a single image (m = 1), fewer
images than chunk_size, a single pixel, and n an exact multiple of chunk_size."""

from course.exercises import Case, blocks_for, sim

POINTS = 1


def cases(exercise):
    shapes = [
        (1, 5, 4, "m = 1 image"),
        (3, 12, 6, "chunk_size 6, n an exact multiple, m < chunk_size"),
        (9, 3, 2, "chunk_size 2, 5 chunks of images"),
        (7, 3, 16, "one block, chunk_size larger than m and n"),
        (20, 1, 1, "n = 1 pixel, one thread per block"),
    ]
    if not sim():
        shapes += [(2000, 1000, 32, "large"), (1, 777, 8, "m = 1, large n")]
    out = []
    for i, (m, n, cs, what) in enumerate(shapes):
        g = blocks_for(n, cs)
        out.append(
            Case(
                f"m = {m}, n = {n}, chunk_size = {cs} ({what})",
                {"m": m, "n": n},
                (g, g),
                (cs, cs),
                shared_bytes=2 * cs * cs * 4,
                repeats=2 if i == 1 else 1,
            )
        )
    return out
