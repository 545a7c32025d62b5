"""Answer key of ``predict_launch`` (lesson 01), computed with the course's launch arithmetic.

Kept here, with the hidden cases, so that the package a student imports holds no key.
"""

from course.exercises import blocks_for


def answers(ex):
    blocks = blocks_for(ex.N, ex.TPB)
    gx, gy = blocks_for(ex.NX, ex.BX), blocks_for(ex.NY, ex.BY)
    threads2d = gx * gy * ex.BX * ex.BY
    return {
        "blocks": blocks,
        "threads": blocks * ex.TPB,
        "idle": blocks * ex.TPB - ex.N,
        "grid2d_threads": threads2d,
        "grid2d_idle": threads2d - ex.NX * ex.NY,
    }
