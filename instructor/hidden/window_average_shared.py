"""Hidden cases for ``window_average_shared`` (lesson 03): block sizes that are not powers
of two (catches a hard-coded THREADS_PER_BLK), exact multiples, and N = 2 (the halo is the
whole input)."""

from course.exercises import Case, blocks_for

POINTS = 1


def cases(exercise):
    rows = [
        ("N = 2, 48 threads per block", 2, 48),
        ("N = 96 (2 blocks of 48, exact)", 96, 48),
        ("N = 101, 40 threads per block", 101, 40),
    ]
    return [
        Case(name, {"N": n}, (blocks_for(n, tpb),), (tpb,), shared_bytes=4 * (tpb + 2), repeats=2)
        for name, n, tpb in rows
    ]
