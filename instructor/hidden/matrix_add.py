"""Hidden cases for ``matrix_add`` (lesson 01): only ``python -m course grade`` runs them.

The exercise adds A and B transposed (C[j, i] = A[j, i] + B[i, j], B of shape (Nx, Ny)).
The hidden cases catch swapped i/j (non-square blocks and shapes, where B read untransposed
leaves its bounds), a guard on one dimension only (shapes ragged in x only, then in y only),
and a single row or column.  debug_matrix_layout (C = A + B) reuses them.
"""

from course.exercises import Case, blocks_for, sim

POINTS = 1


def cases(exercise):
    shapes = [
        ((1, 37), (8, 2)),  # one row: ragged in x only
        ((29, 1), (2, 8)),  # one column: ragged in y only
        ((16, 19), (16, 4)),  # y exact, x ragged
        ((19, 16), (4, 16)),  # x exact, y ragged
        ((9, 23), (8, 4)),
    ]  # both ragged, non-square block
    if not sim():
        shapes += [((513, 1025), (32, 4)), ((2000, 3), (2, 64))]
    return [
        Case(
            f"Ny x Nx = {ny} x {nx}, block {bx} x {by}",
            {"ny": ny, "nx": nx},
            (blocks_for(nx, bx), blocks_for(ny, by)),
            (bx, by),
        )
        for (ny, nx), (bx, by) in shapes
    ]
