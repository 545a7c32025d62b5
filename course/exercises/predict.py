"""*Predict* exercises: say what a launch will do before running it (lessons 01 to 06
here, the whole-program questions of lessons 07 to 12 in ``predict_work.py``, the judging in
``questions.py``).

The student answers in a dict, one entry per question, and checks it::

    answer_launch = {"blocks": ..., "threads": ..., "idle": ...}   # your numbers
    course.check("predict_launch", answer_launch)

The questions are public; **the answer key is not in this package.**  It sits with the
instructor's hidden cases (``instructor/hidden/predict_*.py``, an ``answers(exercise)``
function), computed there by the course's own calculators - launch arithmetic
(``blocks_for``), the tracer's definitions of sectors and bank wavefronts
(``course.sim.trace_analysis``), the occupancy calculator (``course.hardware.occupancy``), the lecture's
matmul traffic formulas and the ``perf`` floor - which the lessons teach and a student may
call too.  The grader loads the key before any student code runs.  A wrong answer is told
how to get the right one, never the value.  A student's copy has no key: its check says,
neutrally, that the answers are recorded for grading (``Predict.record_answer``), and where a
spec names an ``experiment`` the notebook's cell right after the check runs it and sets the
student's answers beside what it finds.
"""

from __future__ import annotations

from .predict_work import (
    PredictAttention,
    PredictCGMA,
    PredictGPT2,
    PredictHistogram,
    PredictSaxpy,
)
from .questions import ANSWERED, NO_KEY, Predict, Question

__all__ = ["ANSWERED", "NO_KEY", "Predict", "Question", "EXERCISES"]

# ---------------------------------------------------------------------------------------
# lesson 01: how many threads a launch makes


class PredictLaunch(Predict):
    N, TPB = 1_000_000, 256
    experiment = "the next cell launches them in the simulator and counts the threads"
    NX, NY, BX, BY = 11, 5, 4, 3  # the lecture's matrixAdd example

    def questions(self):
        n, tpb, nx, ny, bx, by = self.N, self.TPB, self.NX, self.NY, self.BX, self.BY
        return [
            Question(
                "blocks",
                f"blocks of {tpb} threads for one thread per element, n = {n:,}",
                "ceil(n / tpb): enough blocks to cover every element",
            ),
            Question("threads", "threads that launch makes", "blocks x tpb"),
            Question(
                "idle",
                "threads of that launch that fail `if i < n`",
                "all threads of the launch minus the n that have an element",
            ),
            Question(
                "grid2d_threads",
                f"threads of matrixAdd on Nx = {nx}, Ny = {ny} with "
                f"{bx} x {by} blocks and a grid that covers the matrix",
                "grid = (ceil(Nx / bx), ceil(Ny / by)); blocks x threads per block",
            ),
            Question(
                "grid2d_idle",
                "threads of that launch outside the matrix",
                "all threads of the launch minus Nx x Ny elements",
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 05: bytes moved and the floor time


class PredictFloor(Predict):
    GBPS = 3000.0  # the H100's measured copy bandwidth, rounded (assets/benchmarks)
    M, PIXELS, ADD_N = 202_599, 2_475, 1 << 26

    def questions(self):
        m, n, g = self.M, self.PIXELS, self.GBPS
        return [
            Question(
                "mean_bytes",
                f"bytes the mean face moves at least (m = {m:,} float32 "
                f"images of n = {n:,} pixels, n means written)",
                "read every pixel of every image once (4 bytes each) and write n means",
            ),
            Question(
                "mean_floor_ms",
                f"its floor time in ms at {g:g} GB/s",
                "bytes / (GB/s x 1e9 B/s) x 1e3 ms/s",
                rtol=0.02,
            ),
            Question(
                "add_bytes",
                "bytes of y = x + y on 2^26 float32 elements",
                "read x and y, write y: three 4-byte accesses per element",
            ),
            Question(
                "add_floor_ms",
                f"its floor time in ms at {g:g} GB/s",
                "bytes / (GB/s x 1e9 B/s) x 1e3 ms/s",
                rtol=0.02,
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 06: 32-byte sectors per warp request

SECTOR_PATTERNS = {  # key -> (description, byte offset of lane t, item size)
    "coalesced": ("x[i] (float32, i = thread index)", lambda t: 4 * t, 4),
    "stride2": ("x[2 * i] (float32)", lambda t: 8 * t, 4),
    "stride32": ("x[32 * i] (float32)", lambda t: 128 * t, 4),
    "misaligned": ("x[i + 1] (float32)", lambda t: 4 * (t + 1), 4),
    "float64": ("x[i] (float64)", lambda t: 8 * t, 8),
    "column": ("D[i, 0] of a row-major (m, 2475) float32 array", lambda t: 4 * 2475 * t, 4),
}


class PredictSectors(Predict):
    patterns = SECTOR_PATTERNS

    def questions(self):
        return [
            Question(
                key,
                f"sectors per request of a warp reading {what}",
                "write down the bytes lanes 0..31 touch (lane t starts at byte "
                "offset(t)); count the distinct 32-byte sectors (byte // 32)",
            )
            for key, (what, _offset, _size) in SECTOR_PATTERNS.items()
        ]


# ---------------------------------------------------------------------------------------
# lesson 02: shared-memory bank conflicts

BANK_PATTERNS = {  # key -> (description, byte offset of lane t, item size)
    "sequential": ("sdata[tid] (float32)", lambda t: 4 * t, 4),
    "stride2": ("sdata[2 * s * tid] with s = 1 (kernel 2's first step)", lambda t: 8 * t, 4),
    "stride16": ("sdata[2 * s * tid] with s = 8", lambda t: 64 * t, 4),
    "stride32": ("sdata[32 * tid] (a column of a 32 x 32 tile)", lambda t: 128 * t, 4),
    "padded": ("sdata[33 * tid] (the same column, rows padded to 33)", lambda t: 132 * t, 4),
    "broadcast": ("sdata[0] by every lane", lambda t: 0, 4),
}


class PredictBankWays(Predict):
    patterns = BANK_PATTERNS

    def questions(self):
        return [
            Question(
                key,
                f"wavefronts (1 = no conflict) of a warp reading {what}",
                "word index mod 32 is the bank; the answer is the most distinct "
                "words any one bank must serve (one word read by many lanes is a "
                "broadcast, not a conflict)",
            )
            for key, (what, _offset, _size) in BANK_PATTERNS.items()
        ]


# ---------------------------------------------------------------------------------------
# lesson 04: occupancy, FLOPs and arithmetic intensity

OCCUPANCY_CONFIGS = {  # key -> (threads per block, registers per thread, shared bytes per block)
    "a": (128, 24, 0),
    "b": (256, 64, 0),
    "c": (256, 32, 48 * 1024),
    "d": (32, 16, 0),
}


class PredictOccupancy(Predict):
    configs = OCCUPANCY_CONFIGS

    def questions(self):
        from ..hardware.occupancy import LIMITERS

        out = []
        for key, (t, r, s) in OCCUPANCY_CONFIGS.items():
            what = f"{t} threads, {r} registers/thread, {s // 1024} KB shared per block"
            out.append(
                Question(
                    f"{key}_blocks",
                    f"H100 blocks per SM ({what})",
                    "blocks each limit allows (course.hardware.occupancy.SM_LIMITS['H100']: "
                    "warps, block slots, registers given to a warp in units of "
                    "256, shared memory plus 1 KB reserved per block); the "
                    "smallest wins",
                )
            )
            out.append(
                Question(
                    f"{key}_limiter",
                    f"what limits it ({what})",
                    "the limit that allows the fewest blocks",
                    choices=LIMITERS,
                )
            )
        return out


class PredictIntensity(Predict):
    N, V, L = 4096, 8, 128

    def questions(self):
        n, L = self.N, self.L
        return [
            Question(
                "flops",
                f"floating-point operations of C = A @ B, N = {n}",
                "a multiply and an add for each of the N^3 terms",
            ),
            Question(
                "naive_bytes",
                "global bytes the naive kernel (v1) reads",
                "each of the N^3 terms reads one float of A and one of B (4 bytes each)",
            ),
            Question(
                "naive_intensity",
                "its arithmetic intensity in FLOP per global byte",
                "FLOPs / bytes read",
                rtol=0.01,
            ),
            Question(
                "tiled_intensity",
                f"FLOP per global byte of v3 with L = {L} tiles",
                "v3 reads each float of A and B N / L times instead of N times",
                rtol=0.01,
            ),
        ]


def _answer(name, lesson, goal, cls):
    return cls(
        name, lesson, f"{name.replace('predict_', 'answer_')} = {{...}}", goal, kind="predict"
    )


EXERCISES = [
    _answer(
        "predict_launch",
        "01_vector_add",
        "predict blocks, threads and idle threads of 1-D and 2-D launches",
        PredictLaunch,
    ),
    _answer(
        "predict_bank_ways",
        "02_reduction",
        "predict the shared-memory wavefronts of six warp access patterns",
        PredictBankWays,
    ),
    _answer(
        "predict_occupancy",
        "04_matmul",
        "predict H100 blocks per SM and their limiter from threads, registers and shared memory",
        PredictOccupancy,
    ),
    _answer(
        "predict_intensity",
        "04_matmul",
        "predict matmul FLOPs, global bytes and arithmetic intensity, naive and tiled",
        PredictIntensity,
    ),
    _answer(
        "predict_floor",
        "05_mean_face",
        "predict bytes moved and the floor time of the mean face and vector add",
        PredictFloor,
    ),
    _answer(
        "predict_sectors",
        "06_centering_coalescing",
        "predict 32-byte sectors per warp request of six access patterns",
        PredictSectors,
    ),
    _answer(
        "predict_cgma",
        "07_covariance_pca",
        "predict covariance FLOPs and the CGMA of naive and tiled kernels",
        PredictCGMA,
    ),
    _answer(
        "predict_attention",
        "08_flash_attention",
        "predict attention FLOPs (full and "
        "causal) and the bytes of the score matrix vs flash attention",
        PredictAttention,
    ),
    _answer(
        "predict_histogram",
        "09_histogram",
        "predict the global atomics of a naive and a privatized histogram",
        PredictHistogram,
    ),
    _answer(
        "predict_gpt2",
        "11_gpt2",
        "predict GPT-2's FLOPs by kind and its launch counts before reading the per-kernel table",
        PredictGPT2,
    ),
    _answer(
        "predict_saxpy",
        "12_thrust_algorithms",
        "predict the bytes saxpy moves through a temporary and fused into one transform",
        PredictSaxpy,
    ),
]
