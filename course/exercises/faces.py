"""Lessons 05 and 07 exercises: ``mean_face`` and ``covariance_tiled``.

Both use the lecture's flat layout: ``data`` holds m images of n pixels, row by row
(pixel j of image i is ``data[i * num_features + j]``).
"""

from __future__ import annotations

import numpy as np

from . import Case, Exercise, Tolerance, blocks_for, prime_near, sim


def _image_floats(rng, m, n):
    """Pixel-like values in (0, 1], never zero."""
    return rng.uniform(0.01, 1.0, size=m * n).astype(np.float32)


class MeanFace(Exercise):
    """mean[j] = (1/m) sum_i data[i * n + j]: one thread per pixel, 1-D grid."""

    def cases(self):
        tpb, tpb2 = 32, 64
        big_m = 300 if sim() else 20_011
        big_n = prime_near(300) if sim() else 2475
        return [
            Case("n = 1 pixel, m = 5", {"m": 5, "n": 1}, (1,), (tpb,)),
            Case("n = tpb - 1, m = 7", {"m": 7, "n": tpb - 1}, (1,), (tpb,)),
            Case("n = tpb + 1, m = 3", {"m": 3, "n": tpb + 1}, (2,), (tpb,)),
            Case("m = 1 image, n = 40", {"m": 1, "n": 40}, (2,), (tpb,)),
            Case(
                f"n = {prime_near(150)} (prime), m = 11, second block size",
                {"m": 11, "n": prime_near(150)},
                (blocks_for(prime_near(150), tpb2),),
                (tpb2,),
            ),
            Case(
                f"m = {big_m}, n = {big_n}",
                {"m": big_m, "n": big_n},
                (blocks_for(big_n, tpb),),
                (tpb,),
            ),
        ]

    def make_inputs(self, case, rng):
        m, n = case.params["m"], case.params["n"]
        return {"data": _image_floats(rng, m, n), "num_entries": m, "num_features": n}

    def outputs(self, case):
        return {"mean": ((case.params["n"],), np.float32)}

    def reference(self, case, inputs):
        m, n = inputs["num_entries"], inputs["num_features"]
        return {"mean": inputs["data"].astype(np.float64).reshape(m, n).mean(axis=0)}

    def tolerance(self, case, name):
        m = case.params["m"]
        return Tolerance(
            rtol=1e-6 + 2e-7 * m,
            atol=1e-6,
            why=f"a float32 sum of m = {m} values vs a float64 reference",
        )

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](
            args["data"], args["mean"], args["num_entries"], args["num_features"]
        )


class CovarianceTiled(Exercise):
    """cov[y * n + x] = (1/m) sum_i data[i, y] data[i, x], chunk_size x chunk_size tiles."""

    read_arrays = ("data",)  # what a tune target counts as the kernel's global reads

    def cases(self):
        shapes = [(5, 1, 4), (9, 7, 4), (13, 9, 8), (6, 17, 4), (prime_near(20), 11, 8)]
        if not sim():
            shapes += [(1001, 70, 16), (4097, 2475 // 9, 32)]
        out = []
        for i, (m, n, cs) in enumerate(shapes):
            g = blocks_for(n, cs)
            out.append(
                Case(
                    f"m = {m}, n = {n}, chunk_size = {cs}",
                    {"m": m, "n": n},
                    (g, g),
                    (cs, cs),
                    shared_bytes=2 * cs * cs * 4,
                    repeats=2 if i == 2 else 1,
                )
            )
        return out

    def make_inputs(self, case, rng):
        m, n = case.params["m"], case.params["n"]
        D = rng.uniform(-1.0, 1.0, size=(m, n))
        D[D == 0] = 0.5
        return {"data": D.astype(np.float32).ravel(), "num_entries": m, "num_features": n}

    def outputs(self, case):
        n = case.params["n"]
        return {"cov": ((n * n,), np.float32)}

    def reference(self, case, inputs):
        m, n = inputs["num_entries"], inputs["num_features"]
        D = inputs["data"].astype(np.float64).reshape(m, n)
        return {"cov": (D.T @ D / m).ravel()}

    def tolerance(self, case, name):
        m = case.params["m"]
        return Tolerance(
            rtol=1e-5,
            atol=2e-6 + 4e-7 * m**0.5,
            why=f"float32 dot products of length m = {m} vs float64",
        )

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block, 0, case.shared_bytes](
            args["data"], args["cov"], args["num_entries"], args["num_features"]
        )


class CenterFlat(Exercise):
    """D[i, j] -= mean[j] on an (m, n) float32 array: a 1-D grid, thread k owns one element."""

    def cases(self):
        small, big = 32, 64
        shapes = [
            ((1, 1), small),
            ((1, small - 1), small),
            ((3, 11), small),
            ((small + 1, 1), small),
            ((7, prime_near(40)), big),
            ((25, 33), big),
        ]
        if not sim():
            shapes += [((2001, 2475), 256), ((20_011, 77), 128)]
        return [
            Case(
                f"m x n = {m} x {n}, {tpb} threads/block",
                {"m": m, "n": n},
                (blocks_for(m * n, tpb),),
                (tpb,),
                repeats=2 if i == 4 else 1,
            )
            for i, ((m, n), tpb) in enumerate(shapes)
        ]

    def make_inputs(self, case, rng):
        m, n = case.params["m"], case.params["n"]
        return {"D": _image_floats(rng, m, n).reshape(m, n), "mean": _image_floats(rng, 1, n)}

    def reference(self, case, inputs):
        return {"D": inputs["D"].astype(np.float64) - inputs["mean"]}

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["D"], args["mean"])


EXERCISES = [
    MeanFace(
        "mean_face",
        "05_mean_face",
        "@cuda.jit def compute_mean(data, mean, num_entries, num_features)",
        "set mean[j] to the average of pixel j over all num_entries images, one thread "
        "per pixel, accumulating in a register",
    ),
    CovarianceTiled(
        "covariance_tiled",
        "07_covariance_pca",
        "@cuda.jit def covariance(data, cov, num_entries, num_features)",
        "set cov[y * n + x] = sum_i data[i*n + y] * data[i*n + x] / m for all "
        "x, y < n, with chunk_size x chunk_size blocks (chunk_size = blockDim.x) "
        "staging tiles of data in 2 * chunk_size**2 floats of dynamic shared memory",
    ),
    CenterFlat(
        "center_coalesced",
        "06_centering_coalescing",
        "@cuda.jit def center(D, mean)",
        "subtract mean[j] from every D[i, j] of the (m, n) array, one thread per "
        "element on a 1-D grid: thread k owns the k-th element in row-major order, "
        "so a warp touches consecutive addresses",
        inout=("D",),
    ),
    CenterFlat(
        "debug_center_guard",
        "06_centering_coalescing",
        "@cuda.jit def center_fixed(D, mean)",
        "fix the given centering kernel so that no thread touches memory past D",
        inout=("D",),
        kind="debug",
    ),
    CovarianceTiled(
        "debug_covariance_sync",
        "07_covariance_pca",
        "@cuda.jit def covariance_fixed(data, cov, num_entries, num_features)",
        "fix the given tiled covariance so that it gives the right matrix on every run",
        kind="debug",
    ),
]
