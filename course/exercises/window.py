"""Lesson 03 exercise: ``window_average_shared`` - the lecture's v2 with dynamic shared memory."""

from __future__ import annotations

import numpy as np

from . import Case, Exercise, Tolerance, blocks_for, prime_near, random_floats, sim


class WindowAverageShared(Exercise):
    """output[i] = (input[i] + input[i+1] + input[i+2]) / 3 for i < N, input of N + 2,
    through a per-block shared ``support`` array of blockDim.x + 2 floats given as
    *dynamic* shared memory (``cuda.shared.array(0, float32)``, size set at launch)."""

    def cases(self):
        small, big = (32, 64) if sim() else (128, 256)
        prime = prime_near(7 * small + 3)
        large = 2003 if sim() else (1 << 20) + 5
        rows = [
            ("N = 1", 1, small),
            ("N = tpb - 1", small - 1, small),
            ("N = tpb + 1", small + 1, small),
            ("N = 2 tpb (exact blocks)", 2 * small, small),
            (f"N = {prime} (prime)", prime, small),
            (f"N = {prime} (prime), second block size", prime, big),
            (f"N = {large}, second block size", large, big),
        ]
        out = []
        for name, n, tpb in rows:
            out.append(
                Case(
                    name,
                    {"N": n},
                    (blocks_for(n, tpb),),
                    (tpb,),
                    shared_bytes=4 * (tpb + 2),
                    repeats=2 if n == prime else 1,
                )
            )
        return out

    def make_inputs(self, case, rng):
        n = case.params["N"]
        return {"N": n, "input": random_floats(rng, n + 2)}

    def outputs(self, case):
        return {"output": ((case.params["N"],), np.float32)}

    def reference(self, case, inputs):
        x = inputs["input"].astype(np.float64)
        return {"output": (x[:-2] + x[1:-1] + x[2:]) / 3.0}

    def tolerance(self, case, name):
        return Tolerance(rtol=1e-6, atol=1e-6, why="a float32 sum of three values, then / 3")

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block, 0, case.shared_bytes](
            args["N"], args["input"], args["output"]
        )


def _weights(kernel):
    """The WEIGHTS array the student's cell defines (read by the kernel as constant memory)."""
    w = getattr(getattr(kernel, "py_func", None), "__globals__", {}).get("WEIGHTS")
    if not isinstance(w, np.ndarray) or w.ndim != 1 or w.dtype != np.float32:
        raise ValueError("define WEIGHTS as a 1-D float32 numpy array in the kernel's cell")
    return w


class WindowConstant(Exercise):
    """output[i] = sum_k w[k] * input[i + k], w = the 5 weights of the spec, in constant memory."""

    launch_names = ("WEIGHTS",)

    WEIGHTS = (0.0625, 0.25, 0.375, 0.25, 0.0625)  # a binomial (Gaussian-like) window

    def cases(self):
        small, big = 32, 64
        sizes = [
            (1, small),
            (small - 1, small),
            (small + 1, small),
            (prime_near(5 * big), big),
            (3001 if sim() else (1 << 20) + 7, big),
        ]
        return [
            Case(f"N = {n}, {tpb} threads/block", {"N": n}, (blocks_for(n, tpb),), (tpb,))
            for n, tpb in sizes
        ]

    def make_inputs(self, case, rng):
        return {
            "N": case.params["N"],
            "input": random_floats(rng, case.params["N"] + len(self.WEIGHTS) - 1),
        }

    def outputs(self, case):
        return {"output": ((case.params["N"],), np.float32)}

    def reference(self, case, inputs):
        x, n, w = inputs["input"].astype(np.float64), inputs["N"], self.WEIGHTS
        return {"output": sum(w[k] * x[k : k + n] for k in range(len(w)))}

    def tolerance(self, case, name):
        return Tolerance(rtol=1e-5, atol=1e-6, why="5 float32 multiply-adds vs float64")

    def launch(self, kernel, case, args):
        w = _weights(kernel)
        if not np.allclose(w, self.WEIGHTS):
            raise ValueError(f"WEIGHTS must be {list(self.WEIGHTS)}; got {list(w)}")
        kernel[case.grid, case.block](args["N"], args["input"], args["output"])


EXERCISES = [
    WindowAverageShared(
        "window_average_shared",
        "03_window_average",
        "@cuda.jit def convolve(N, input, output)",
        "set output[i] = mean(input[i:i+3]) for every i < N (input has N + 2 elements): each "
        "block loads its blockDim.x + 2 inputs once into dynamic shared memory "
        "(launched as [blocks, threads, 0, 4 * (threads + 2)]), syncs, then reads only from "
        "shared memory; N need not be a multiple of the block size",
        hints={"halo": "the last two elements of support come from the next block's inputs"},
    ),
    WindowAverageShared(
        "debug_window_halo",
        "03_window_average",
        "@cuda.jit def convolve_fixed(N, input, output)",
        "fix the given shared-memory window average so that the last outputs of every block "
        "are right",
        hints={"halo": "which elements of support does thread T - 1 read?"},
        kind="debug",
    ),
    WindowConstant(
        "window_constant",
        "03_window_average",
        "@cuda.jit def window5(N, input, output)",
        "set output[i] = sum_k WEIGHTS[k] * input[i + k] for i < N (input has N + 4 "
        "elements), reading the 5 weights from constant memory "
        "(w = cuda.const.array_like(WEIGHTS) inside the kernel)",
    ),
]
