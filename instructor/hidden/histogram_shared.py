"""Hidden cases for ``histogram_shared`` (lesson 09): exact multiples of the default tile
(no partial block), a single row over many channels, a single channel with a ragged last
row block (3 x 64 + 1 rows), and constant data (every count lands in one bin per channel)."""

from course.exercises import Case, sim

POINTS = 1


def cases(exercise):
    shapes = [
        ((128, 8), 64, "uniform", "exact multiples of 64 rows and 4 channels"),
        ((1, 17), 128, "uniform", "a single row"),
        ((193, 1), 64, "skewed", "a single channel, 3 x 64 + 1 rows"),
        ((100, 6), 128, "constant", "constant data"),
    ]
    if not sim():
        shapes += [
            (((1 << 20) + 1, 3), 128, "skewed", "long, few channels"),
            ((4096, 513), 64, "constant", "many channels"),
        ]
    return [
        Case(
            f"length x channels = {n} x {c}, {dist} ({what})",
            {"length": n, "channels": c, "dist": dist},
            ("ceil(channels / CHANNELS_PER_BLOCK)", "ceil(length / ROWS_PER_BLOCK)"),
            (tpb,),
            repeats=2 if i == 2 else 1,
        )
        for i, ((n, c), tpb, dist, what) in enumerate(shapes)
    ]
