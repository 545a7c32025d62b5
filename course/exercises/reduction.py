"""Lesson 02 exercises: ``reduce_sequential`` (kernel 3), ``reduce_first_add`` (kernel 4) and
``reduce_grid_stride`` (kernel 7).

Integer cases are compared exactly.  Float32 cases use a tolerance *derived* from the order
of summation, never tuned: a sum whose longest chain of float32 additions has ``depth``
additions is within ``depth * u * sum|x_i|`` of the exact sum (u = 2^-24, float32's unit
roundoff).  A tree over 2^k values has depth k; a thread that loops over m elements adds m
more; atomics from B blocks add B more (blocks arrive in any order, so float32 results of
kernel 7 may differ in the last bits from run to run - integers never do).
"""

from __future__ import annotations

import math

import numpy as np

from . import EXACT, Case, Exercise, Tolerance, blocks_for, prime_near, sim

U32 = 2.0**-24  # float32 unit roundoff
LOW, HIGH = 0.5, 1.5  # float inputs: never zero, no cancellation, so |x_i| < 1.5


def float32_sum_tolerance(n_terms: int, depth: int) -> Tolerance:
    """The error bound of a float32 sum of ``n_terms`` values in [0.5, 1.5) with chains of
    ``depth`` additions: atol = depth * 2^-24 * 1.5 * n_terms."""
    return Tolerance(
        atol=depth * U32 * HIGH * n_terms,
        why=f"float32 sum: at most {depth} additions in a chain x 2^-24 x "
        f"sum|x| (<= 1.5 x {n_terms}); float64 reference",
    )


def _inputs(case, rng):
    n, dtype = case.params["n"], np.dtype(case.params["dtype"])
    if dtype.kind == "i":
        x = rng.integers(-1000, 1000, size=n).astype(dtype)
        x[x == 0] = 7
    else:
        x = rng.uniform(LOW, HIGH, size=n).astype(dtype)
    return x


def size_cases(per_block: int, out_blocks: bool, grid_stride: bool = False):
    """Sizes 1, tpb-1, tpb+1, a prime, a large one; two block sizes; int32 and float32."""
    small, big = (32, 64) if sim() else (128, 256)
    large = 577 if sim() else (1 << 20) + 7  # sim: 10 blocks of 64, 3 blocks x 64 << n
    rows = [
        (1, small, "int32"),
        (small * per_block - 1, small, "float32"),
        (small * per_block + 1, small, "int32"),
        (prime_near(5 * big), big, "float32"),
        (prime_near(5 * big) + 2, big, "int32"),
        (large, big, "int32"),
        (large, small, "float32"),
    ]
    cases = []
    for n, tpb, dt in rows:
        blocks = blocks_for(n, tpb * per_block)
        what = {
            1: "n = 1",
            small * per_block - 1: "n = tpb - 1",
            small * per_block + 1: "n = tpb + 1",
        }.get(n, f"n = {n}")
        if grid_stride:
            blocks = {large: 3}.get(n, blocks)  # far fewer threads than n
        label = f"{what}, {dt}, {tpb} threads/block" + (
            ", 3 blocks" if blocks == 3 and grid_stride else ""
        )
        cases.append(
            Case(
                label,
                {"n": n, "dtype": dt, "tpb": tpb},
                (blocks,),
                (tpb,),
                shared_bytes=tpb * np.dtype(dt).itemsize,
                repeats=2 if (n == large and dt == "int32") else 1,
            )
        )
    if grid_stride:
        cases.append(
            Case(
                f"n = {large}, int32, one block of {small}",
                {"n": large, "dtype": "int32", "tpb": small},
                (1,),
                (small,),
                shared_bytes=small * 4,
            )
        )
    return cases


class BlockSums(Exercise):
    """g_odata[b] = the sum of block b's elements (tpb or 2*tpb of them; past n count 0)."""

    per_block = 1

    def cases(self):
        return size_cases(self.per_block, out_blocks=True)

    def make_inputs(self, case, rng):
        return {"g_idata": _inputs(case, rng)}

    def outputs(self, case):
        return {"g_odata": ((case.grid[0],), np.dtype(case.params["dtype"]))}

    def reference(self, case, inputs):
        x = inputs["g_idata"]
        width = case.block[0] * self.per_block
        padded = np.zeros(
            case.grid[0] * width, dtype=np.float64 if x.dtype.kind == "f" else np.int64
        )
        padded[: x.size] = x
        sums = padded.reshape(case.grid[0], width).sum(axis=1)
        return {"g_odata": sums if x.dtype.kind == "f" else sums.astype(x.dtype)}

    def tolerance(self, case, name):
        if np.dtype(case.params["dtype"]).kind == "i":
            return EXACT
        width = case.block[0] * self.per_block
        return float32_sum_tolerance(width, int(math.log2(case.block[0])) + self.per_block)

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block, 0, case.shared_bytes](args["g_idata"], args["g_odata"])


class FirstAdd(BlockSums):
    """Kernel 4: block b covers elements [2*b*tpb, 2*(b+1)*tpb)."""

    per_block = 2


class GridStride(Exercise):
    """out[0] = sum of x, any grid: a grid-stride loop, then one atomic add per block."""

    def cases(self):
        return size_cases(1, out_blocks=False, grid_stride=True)

    def make_inputs(self, case, rng):
        return {"x": _inputs(case, rng)}

    def outputs(self, case):
        return {"out": ((1,), np.dtype(case.params["dtype"]))}

    def prepare(self, case, args):
        # The spec: out[0] is zero before the launch (the guard band stays poisoned).
        args["out"].copy_to_device(np.zeros(1, dtype=np.dtype(case.params["dtype"])))

    def reference(self, case, inputs):
        x = inputs["x"]
        total = np.sum(x, dtype=np.float64 if x.dtype.kind == "f" else np.int64)
        return {
            "out": np.array([total]) if x.dtype.kind == "f" else np.array([total], dtype=x.dtype)
        }

    def tolerance(self, case, name):
        if np.dtype(case.params["dtype"]).kind == "i":
            return EXACT
        n, tpb, blocks = case.params["n"], case.block[0], case.grid[0]
        per_thread = math.ceil(n / (tpb * blocks))
        return float32_sum_tolerance(n, per_thread + int(math.log2(tpb)) + 1 + blocks)

    def launch(self, kernel, case, args):
        # In the simulator blocks run one after another, so a plain `out[0] += v` cannot lose
        # an update there; the traced repeat run (course.sim.trace) reports it as a race between
        # blocks instead, which is what it is on a GPU.
        kernel[case.grid, case.block, 0, case.shared_bytes](args["x"], args["out"])


_SHARED = (
    "dynamic shared memory: sdata = cuda.shared.array(0, dtype=g_idata.dtype), "
    "launched as kernel[blocks, tpb, 0, tpb * itemsize]"
)
HINTS = {
    "wrong": "Is there a cuda.syncthreads() after the load and after every step of the tree? "
    "Do threads past the end of g_idata put 0 into sdata? Does the tree start at "
    "cuda.blockDim.x // 2 rather than a fixed number?",
}


class SumOfSquares(GridStride):
    """out[0] = sum of x[i]^2 (Thrust's transform_reduce with square and plus), float32."""

    def cases(self):
        cases = [c for c in super().cases() if c.params["dtype"] == "float32"]
        cases[-2].repeats = 2  # a traced repeat run: a racing `out[0] +=` is found
        return cases

    def reference(self, case, inputs):
        return {"out": np.array([np.sum(inputs["x"].astype(np.float64) ** 2)])}

    def tolerance(self, case, name):
        t = super().tolerance(case, name)
        return Tolerance(
            atol=t.atol * HIGH + 1e-6 * case.params["n"] * U32,
            why=t.why.replace("sum|x|", "sum x^2") + " (x^2 < 1.5 |x|)",
        )


EXERCISES = [
    BlockSums(
        "reduce_sequential",
        "02_reduction",
        "@cuda.jit def reduce(g_idata, g_odata)",
        "kernel 3 (sequential addressing): write the sum of block b's tpb elements "
        "to g_odata[b]; blocks = ceil(n / tpb); elements past n count as 0; " + _SHARED,
        hints=HINTS,
    ),
    FirstAdd(
        "reduce_first_add",
        "02_reduction",
        "@cuda.jit def reduce(g_idata, g_odata)",
        "kernel 4 (first add during load): block b sums elements [2*b*tpb, 2*(b+1)*tpb) "
        "into g_odata[b]; blocks = ceil(n / (2 * tpb)); elements past n count as 0; " + _SHARED,
        hints=HINTS,
    ),
    GridStride(
        "reduce_grid_stride",
        "02_reduction",
        "@cuda.jit def reduce(x, out)",
        "kernel 7: add every element of x into out[0] (zero before the launch) with a "
        "grid-stride loop and one cuda.atomic.add per block, for any grid size",
        hints=HINTS,
    ),
    BlockSums(
        "debug_reduce_sync",
        "02_reduction",
        "@cuda.jit def reduce_fixed(g_idata, g_odata)",
        "fix the given kernel 3 so that g_odata[b] is the sum of block b's elements "
        "on every run, not only on lucky ones",
        hints=HINTS,
        kind="debug",
    ),
    SumOfSquares(
        "sum_of_squares",
        "05_mean_face",
        "@cuda.jit def sum_squares(x, out)",
        "add x[i] * x[i] for every element of x into out[0] (zero before the launch) "
        "with a grid-stride loop and one cuda.atomic.add per block: the kernel behind "
        "a library's transform_reduce",
        hints=HINTS,
    ),
]
