"""*Predict* exercises: say what a launch will do before running it.

The student answers in a dict, one entry per question, and checks it::

    answer_launch = {"blocks": 3907, "threads": 1000192, "idle": 192}
    course.check("predict_launch", answer_launch)

Every expected value is computed here by the course's own code, never typed in: launch
arithmetic (``blocks_for``), the tracer's definitions of sectors and bank wavefronts
(``course.trace_analysis``), the occupancy calculator (``course.occupancy``), the lecture's
matmul traffic formulas and the ``perf`` floor.  A wrong answer is told the right one and
how to get it.  The questions are fixed (a hidden case cannot ask a question the student
never saw), so these exercises have no hidden cases.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import Exercise, blocks_for
from ..grading.report import CaseResult


@dataclass
class Question:
    """One number or choice to predict, and how the course computes it."""

    key: str                  # the answer dict's key
    prompt: str               # what is asked (shown in the report)
    expected: object          # the course's value: int, float or str
    explain: str              # how to get it (shown on a wrong answer)
    rtol: float = 0.0         # relative tolerance for floats (0: exact)
    choices: tuple = ()       # for multiple choice: the allowed strings


class Predict(Exercise):
    """Base class: subclasses list their :class:`Question`s."""

    def questions(self) -> list[Question]:
        raise NotImplementedError

    def cases(self):
        return []

    def judge_answer(self, answer, hidden: bool = False) -> list[CaseResult]:
        """One CaseResult per question; never raises."""
        qs = self.questions()
        if not isinstance(answer, dict):
            res = CaseResult("your answer", "")
            res.fail(f"expected a dict with the keys {', '.join(repr(q.key) for q in qs)}; "
                     f"got a {type(answer).__name__}")
            return [res]
        return [_judge(q, answer.get(q.key, None)) for q in qs]


def _judge(q: Question, got) -> CaseResult:
    res = CaseResult(f"{q.key}: {q.prompt}", "")
    exp = q.expected
    if got is None or got is ...:
        res.fail("no answer yet")
    elif q.choices:
        if not isinstance(got, str) or got.strip().lower() not in q.choices:
            res.fail(f"answer one of {', '.join(repr(c) for c in q.choices)}; got {got!r}")
        elif got.strip().lower() != exp:
            res.fail(f"got {got!r}, expected {exp!r}: {q.explain}")
    elif isinstance(got, bool) or not isinstance(got, (int, float)):
        res.fail(f"answer a number; got {got!r}")
    elif not math.isfinite(got) or abs(got - exp) > q.rtol * abs(exp):
        shown = f"{exp:,}" if isinstance(exp, int) else f"{exp:.4g}"
        tol = f" (within {q.rtol:.0%})" if q.rtol else ""
        res.fail(f"got {got!r}, expected {shown}{tol}: {q.explain}")
    return res


# ---------------------------------------------------------------------------------------
# lesson 01: how many threads a launch makes

class PredictLaunch(Predict):
    def questions(self):
        n, tpb = 1_000_000, 256
        blocks = blocks_for(n, tpb)
        nx, ny, bx, by = 11, 5, 4, 3            # the lecture's matrixAdd example
        gx, gy = blocks_for(nx, bx), blocks_for(ny, by)
        return [
            Question("blocks", f"blocks of {tpb} threads for one thread per element, n = {n:,}",
                     blocks, f"ceil(n / tpb) = ceil({n} / {tpb}) = {blocks}"),
            Question("threads", "threads that launch makes", blocks * tpb,
                     f"blocks x tpb = {blocks} x {tpb} = {blocks * tpb}"),
            Question("idle", "threads of that launch that fail `if i < n`", blocks * tpb - n,
                     f"{blocks * tpb} threads - {n} elements = {blocks * tpb - n}"),
            Question("grid2d_threads", f"threads of matrixAdd on Nx = {nx}, Ny = {ny} with "
                     f"{bx} x {by} blocks and a grid that covers the matrix", gx * gy * bx * by,
                     f"grid = (ceil({nx}/{bx}), ceil({ny}/{by})) = ({gx}, {gy}); "
                     f"{gx * gy} blocks x {bx * by} threads = {gx * gy * bx * by}"),
            Question("grid2d_idle", "threads of that launch outside the matrix",
                     gx * gy * bx * by - nx * ny,
                     f"{gx * gy * bx * by} threads - {nx} x {ny} elements"),
        ]


# ---------------------------------------------------------------------------------------
# lesson 05: bytes moved and the floor time

class PredictFloor(Predict):
    GBPS = 3000.0   # the H100's measured copy bandwidth, rounded (assets/benchmarks)

    def questions(self):
        from ..perf import floor_ms

        m, n = 202_599, 2_475
        mean_bytes = 4 * m * n + 4 * n
        add_n = 1 << 26
        add_bytes = 3 * 4 * add_n
        ceil = {"copy_gbps": self.GBPS}
        return [
            Question("mean_bytes", f"bytes the mean face moves at least (m = {m:,} float32 "
                     f"images of n = {n:,} pixels, n means written)", mean_bytes,
                     f"read 4 m n + write 4 n = {mean_bytes:,} bytes"),
            Question("mean_floor_ms", f"its floor time in ms at {self.GBPS:g} GB/s",
                     floor_ms(mean_bytes, ceilings=ceil),
                     f"{mean_bytes:,} B / ({self.GBPS:g} x 1e9 B/s) x 1e3 ms/s", rtol=0.02),
            Question("add_bytes", "bytes of y = x + y on 2^26 float32 elements", add_bytes,
                     "read x and y, write y: 3 x 4 bytes per element"),
            Question("add_floor_ms", f"its floor time in ms at {self.GBPS:g} GB/s",
                     floor_ms(add_bytes, ceilings=ceil),
                     f"{add_bytes:,} B / {self.GBPS:g} GB/s", rtol=0.02),
        ]


# ---------------------------------------------------------------------------------------
# lesson 06: 32-byte sectors per warp request

SECTOR_PATTERNS = {   # key -> (description, byte offset of lane t, item size)
    "coalesced": ("x[i] (float32, i = thread index)", lambda t: 4 * t, 4),
    "stride2": ("x[2 * i] (float32)", lambda t: 8 * t, 4),
    "stride32": ("x[32 * i] (float32)", lambda t: 128 * t, 4),
    "misaligned": ("x[i + 1] (float32)", lambda t: 4 * (t + 1), 4),
    "float64": ("x[i] (float64)", lambda t: 8 * t, 8),
    "column": ("D[i, 0] of a row-major (m, 2475) float32 array", lambda t: 4 * 2475 * t, 4),
}


class PredictSectors(Predict):
    def questions(self):
        from ..trace_analysis import sectors

        out = []
        for key, (what, offset, size) in SECTOR_PATTERNS.items():
            touched = [b for t in range(32) for b in range(offset(t), offset(t) + size, 4)]
            s = sectors(touched)
            out.append(Question(key, f"sectors per request of a warp reading {what}", s,
                                f"the 32 lanes touch bytes {offset(0)}..{offset(31) + size - 1}"
                                f"; count the distinct 32-byte sectors: {s}"))
        return out


# ---------------------------------------------------------------------------------------
# lesson 02: shared-memory bank conflicts

BANK_PATTERNS = {     # key -> (description, byte offset of lane t, item size)
    "sequential": ("sdata[tid] (float32)", lambda t: 4 * t, 4),
    "stride2": ("sdata[2 * s * tid] with s = 1 (kernel 2's first step)", lambda t: 8 * t, 4),
    "stride16": ("sdata[2 * s * tid] with s = 8", lambda t: 64 * t, 4),
    "stride32": ("sdata[32 * tid] (a column of a 32 x 32 tile)", lambda t: 128 * t, 4),
    "padded": ("sdata[33 * tid] (the same column, rows padded to 33)", lambda t: 132 * t, 4),
    "broadcast": ("sdata[0] by every lane", lambda t: 0, 4),
}


class PredictBankWays(Predict):
    def questions(self):
        from ..trace_analysis import wavefronts

        out = []
        for key, (what, offset, size) in BANK_PATTERNS.items():
            w = wavefronts([offset(t) for t in range(32)], size)
            out.append(Question(key, f"wavefronts (1 = no conflict) of a warp reading {what}",
                                w, f"word index mod 32 is the bank; the most distinct words in "
                                   f"one bank is {w} (one word read by many lanes is a "
                                   "broadcast, not a conflict)"))
        return out


# ---------------------------------------------------------------------------------------
# lesson 04: occupancy, FLOPs and arithmetic intensity

OCCUPANCY_CONFIGS = {  # key -> (threads per block, registers per thread, shared bytes per block)
    "a": (128, 24, 0), "b": (256, 64, 0), "c": (256, 32, 48 * 1024), "d": (32, 16, 0),
}


class PredictOccupancy(Predict):
    def questions(self):
        from ..occupancy import LIMITERS, blocks_per_sm

        out = []
        for key, (t, r, s) in OCCUPANCY_CONFIGS.items():
            fit = blocks_per_sm(t, r, s, "H100")
            what = f"{t} threads, {r} registers/thread, {s // 1024} KB shared per block"
            rule = "; ".join(f"{k}: {v}" for k, v in fit.by_limit.items())
            out.append(Question(f"{key}_blocks", f"H100 blocks per SM ({what})", fit.blocks,
                                f"blocks each limit allows - {rule}; the smallest wins"))
            out.append(Question(f"{key}_limiter", f"what limits it ({what})", fit.limiter,
                                f"the limit that allows the fewest blocks ({rule})",
                                choices=LIMITERS))
        return out


class PredictIntensity(Predict):
    def questions(self):
        from ..kernels.matmul import flops, formulas

        n, V, L = 4096, 8, 128
        f = formulas(n, V, L)
        fl = flops(n, n, n)
        naive, tiled = 4 * f["v1_naive"]["global"], 4 * f["v3_shared_tiled"]["global"]
        return [
            Question("flops", f"floating-point operations of C = A @ B, N = {n}", fl,
                     f"2 N^3 = {fl:,} (a multiply and an add per term)"),
            Question("naive_bytes", "global bytes the naive kernel (v1) reads", naive,
                     "each of the N^3 terms reads one float of A and one of B: 2 N^3 x 4 B"),
            Question("naive_intensity", "its arithmetic intensity in FLOP per global byte",
                     fl / naive, f"{fl:,} / {naive:,}", rtol=0.01),
            Question("tiled_intensity", f"FLOP per global byte of v3 with L = {L} tiles",
                     fl / tiled, "v3 reads 2 N^3 / L floats: 2 N^3 / (2 N^3 / L x 4 B) = L / 4",
                     rtol=0.01),
        ]


# ---------------------------------------------------------------------------------------
# lesson 07: covariance work and CGMA

class PredictCGMA(Predict):
    def questions(self):
        from ..kernels.faces import cgma

        m, n = 202_599, 2_475
        full = 2 * m * n * n
        return [
            Question("flops", f"FLOPs of the full covariance D^T D (m = {m:,}, n = {n:,})",
                     full, "n^2 entries x m multiply-adds x 2 FLOPs = 2 m n^2"),
            Question("symmetric_flops", "FLOPs when only the entries with x >= y are computed",
                     m * n * (n + 1), "n (n + 1) / 2 entries x 2 m FLOPs"),
            Question("naive_cgma", "FLOPs per global load of the naive kernel (2 loads, "
                     "1 multiply-add per term)", 1.0, "2 FLOPs / 2 loads = 1", rtol=0.01),
            Question("tiled_cgma_8", "FLOPs per global load with chunk_size = 8 tiles",
                     cgma(8), "a block loads 2 c^2 floats per chunk and does 2 c^3 FLOPs: "
                              "CGMA = c", rtol=0.01),
            Question("tiled_cgma_32", "... with chunk_size = 32", cgma(32),
                     "CGMA = chunk_size", rtol=0.01),
        ]


# ---------------------------------------------------------------------------------------
# lesson 08: attention FLOPs and bytes

class PredictAttention(Predict):
    def questions(self):
        from ..kernels.attention import flops, traffic_bytes

        b, h, n, d = 4, 64, 8192, 128            # the CS149 leaderboard shape
        tb = traffic_bytes(b, h, n, d, itemsize=2)
        return [
            Question("flops", f"FLOPs of attention, (B, H, N, d) = ({b}, {h}, {n}, {d})",
                     flops(b, h, n, d), "two products of 2 N^2 d FLOPs per head: 4 B H N^2 d"),
            Question("causal_flops", "... with a causal mask, counting only the (query, key) "
                     "pairs inside the mask", flops(b, h, n, d, causal=True),
                     "query i sees keys 0..i: N (N + 1) / 2 pairs, 4 d FLOPs each"),
            Question("score_bytes", "bytes of the float32 score matrices S of all heads",
                     tb["score_matrix"], "B H N^2 x 4 bytes"),
            Question("flash_bytes", "bytes flash attention must move (float16 Q, K, V, O "
                     "once, plus a float32 log-sum-exp per row)", tb["flash"],
                     "4 x B H N d x 2 bytes + B H N x 4 bytes"),
        ]


# ---------------------------------------------------------------------------------------
# lesson 09: global atomics of a histogram

class PredictHistogram(Predict):
    def questions(self):
        from math import ceil

        length, ch, cpb, rpb = 1 << 20, 512, 4, 64
        blocks = ceil(ch / cpb) * ceil(length / rpb)
        return [
            Question("global_atomics", f"global atomic adds of the one-atomic-per-byte kernel "
                     f"on {length:,} rows x {ch} channels", length * ch,
                     "one per input byte"),
            Question("blocks", f"blocks of the privatized kernel ({cpb} channels x {rpb} rows "
                     "per block)", blocks, f"ceil({ch}/{cpb}) x ceil({length:,}/{rpb})"),
            Question("max_flush_atomics", "at most how many global atomic adds its blocks "
                     "make when they add their shared bins to hist", blocks * cpb * 256,
                     "each block adds at most 256 bins per channel: blocks x 4 x 256"),
            Question("worst_bank_ways", "bank-conflict ways of 32 lanes that all add to the "
                     "same shared bin (a constant channel)", 1,
                     "one word in one bank: the hardware serializes the atomics on it, but "
                     "it is not a bank conflict (1 wavefront per request)"),
        ]


def _answer(name, lesson, goal, cls):
    return cls(name, lesson, f"{name.replace('predict_', 'answer_')} = {{...}}", goal,
               kind="predict")


EXERCISES = [
    _answer("predict_launch", "01_vector_add", "predict blocks, threads and idle threads of "
            "1-D and 2-D launches", PredictLaunch),
    _answer("predict_bank_ways", "02_reduction", "predict the shared-memory wavefronts of "
            "six warp access patterns", PredictBankWays),
    _answer("predict_occupancy", "04_matmul", "predict H100 blocks per SM and their limiter "
            "from threads, registers and shared memory", PredictOccupancy),
    _answer("predict_intensity", "04_matmul", "predict matmul FLOPs, global bytes and "
            "arithmetic intensity, naive and tiled", PredictIntensity),
    _answer("predict_floor", "05_mean_face", "predict bytes moved and the floor time of the "
            "mean face and vector add", PredictFloor),
    _answer("predict_sectors", "06_centering_coalescing", "predict 32-byte sectors per warp "
            "request of six access patterns", PredictSectors),
    _answer("predict_cgma", "07_covariance_pca", "predict covariance FLOPs and the CGMA of "
            "naive and tiled kernels", PredictCGMA),
    _answer("predict_attention", "08_flash_attention", "predict attention FLOPs (full and "
            "causal) and the bytes of the score matrix vs flash attention", PredictAttention),
    _answer("predict_histogram", "09_histogram", "predict the global atomics of a naive and "
            "a privatized histogram", PredictHistogram),
]
