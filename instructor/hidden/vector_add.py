"""Hidden cases for ``vector_add`` (lesson 01): only ``python -m course grade`` runs them.

The exercise adds x read backwards (y[i] = x[n - 1 - i] + y[i]). The hidden cases catch
what the public cases let through: a block size that is not a power of two, one thread per
block, a grid with more threads than elements (the loop must not start past n, nor read x
at a negative index), n an exact multiple of the grid's thread count, and n = 2 (the two
elements swap their x).  debug_grid_stride and tune_vector_add (y = x + y) reuse them.
"""

from course.exercises import Case, blocks_for, prime_near, sim

POINTS = 1


def cases(exercise):
    big = 3 * 1024 + 5 if sim() else (1 << 22) + 3
    p = prime_near(700 if sim() else 100_000)
    return [
        Case("n = 96 x 3 (exact multiple), 96 threads per block", {"n": 288}, (3,), (96,)),
        Case("n = 37, one thread per block", {"n": 37}, (5,), (1,)),
        Case("n = 2, one block of 32", {"n": 2}, (1,), (32,)),
        Case("n = 100, far more threads than elements", {"n": 100}, (8,), (64,)),
        Case(
            f"n = {p} (prime), 48 threads per block",
            {"n": p},
            (blocks_for(p, 48) // 3 + 1,),
            (48,),
            repeats=2,
        ),
        Case(f"n = {big}, 2 blocks of 128", {"n": big}, (2,), (128,)),
    ]
