"""*Predict* exercises: say what a launch will do before running it.

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
how to get the right one, never the value.  A student's copy has no key: its check says the
answers are recorded for grading, and the notebook's next cell runs the experiment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import Exercise
from .outcome import CaseResult


@dataclass
class Question:
    """One number or choice to predict, and how to work it out (never its value)."""

    key: str  # the answer dict's key
    prompt: str  # what is asked (shown in the report)
    explain: str  # the method (shown on a wrong answer)
    rtol: float = 0.0  # relative tolerance for floats (0: exact)
    choices: tuple = ()  # for multiple choice: the allowed strings


NO_KEY = (
    "answered; this copy has no answer key, so the grader checks it (run the "
    "experiment in the next cell to see for yourself)"
)


class Predict(Exercise):
    """Base class: subclasses list their :class:`Question`s."""

    def questions(self) -> list[Question]:
        raise NotImplementedError

    def cases(self):
        return []

    def judge_answer(self, answer, key: dict | None) -> list[CaseResult]:
        """One CaseResult per question against ``key`` (the instructor's answers, which the
        grader passes: ``course.grading.hidden.answers_for``; None in a student's copy);
        never raises."""
        qs = self.questions()
        if not isinstance(answer, dict):
            res = CaseResult("your answer", "")
            res.fail(
                f"expected a dict with the keys {', '.join(repr(q.key) for q in qs)}; "
                f"got a {type(answer).__name__}"
            )
            return [res]
        notes = _unanswered([q.key for q in qs], answer)
        return [
            _judge(q, answer.get(q.key, None), key, notes.get(q.key, "no answer yet")) for q in qs
        ]


def _unanswered(keys: list, answer: dict) -> dict:
    """What to say for each question with no answer when the answer has keys that are no
    question's: the unknown key that looks like it (a misspelling), or every unknown key
    that looks like none."""
    import difflib

    unknown = {str(k): k for k in answer if k not in keys}
    missing = [k for k in keys if answer.get(k) is None]
    if not unknown:
        return {}
    notes, matched = {}, set()
    for k in missing:
        near = difflib.get_close_matches(
            k, [u for u in unknown if u not in matched], n=1, cutoff=0.6
        )
        if near:
            matched.add(near[0])
            notes[k] = (
                f"no answer under {k!r}, but your answer has the unknown key "
                f"{unknown[near[0]]!r}: rename it {k!r}"
            )
    rest = [unknown[u] for u in unknown if u not in matched]
    for k in missing:
        if k not in notes and rest:
            notes[k] = (
                f"no answer under {k!r}; your answer's key{'s' * (len(rest) > 1)} "
                f"{', '.join(repr(u) for u in rest)} "
                f"{'are' if len(rest) > 1 else 'is'} no question's key "
                f"(the keys: {', '.join(repr(q) for q in keys)})"
            )
    return notes


def _judge(q: Question, got, key: dict | None, unanswered: str = "no answer yet") -> CaseResult:
    res = CaseResult(f"{q.key}: {q.prompt}", "")
    if got is None or got is ...:
        res.fail(unanswered)
    elif q.choices:
        if not isinstance(got, str) or got.strip().lower() not in q.choices:
            res.fail(f"answer one of {', '.join(repr(c) for c in q.choices)}; got {got!r}")
        elif key is None:
            res.fail(NO_KEY)
        elif got.strip().lower() != key[q.key]:
            res.fail(f"got {got!r}, which is not it: {q.explain}")
    elif isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
        res.fail(f"answer a finite number; got {got!r}")
    elif key is None:
        res.fail(NO_KEY)
    elif abs(got - key[q.key]) > q.rtol * abs(key[q.key]):
        tol = f" (within {q.rtol:.0%})" if q.rtol else ""
        res.fail(f"got {got!r}, which is not it{tol}: {q.explain}")
    return res


# ---------------------------------------------------------------------------------------
# lesson 01: how many threads a launch makes


class PredictLaunch(Predict):
    N, TPB = 1_000_000, 256
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


# ---------------------------------------------------------------------------------------
# lesson 07: covariance work and CGMA


class PredictCGMA(Predict):
    M, PIXELS = 202_599, 2_475

    def questions(self):
        m, n = self.M, self.PIXELS
        return [
            Question(
                "flops",
                f"FLOPs of the full covariance D^T D (m = {m:,}, n = {n:,})",
                "n^2 entries, each m multiply-adds of 2 FLOPs",
            ),
            Question(
                "symmetric_flops",
                "FLOPs when only the entries with x >= y are computed",
                "n (n + 1) / 2 entries, each 2 m FLOPs",
            ),
            Question(
                "naive_cgma",
                "FLOPs per global load of the naive kernel (2 loads, 1 multiply-add per term)",
                "FLOPs of one term / loads of one term",
                rtol=0.01,
            ),
            Question(
                "tiled_cgma_8",
                "FLOPs per global load with chunk_size = 8 tiles",
                "a block loads 2 c^2 floats per chunk and does 2 c^3 FLOPs on them",
                rtol=0.01,
            ),
            Question(
                "tiled_cgma_32", "... with chunk_size = 32", "the same ratio with c = 32", rtol=0.01
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 08: attention FLOPs and bytes


class PredictAttention(Predict):
    SHAPE = (4, 64, 8192, 128)  # the CS149 leaderboard shape (B, H, N, d)

    def questions(self):
        b, h, n, d = self.SHAPE
        return [
            Question(
                "flops",
                f"FLOPs of attention, (B, H, N, d) = ({b}, {h}, {n}, {d})",
                "two products (Q K^T and P V) of 2 N^2 d FLOPs per head",
            ),
            Question(
                "causal_flops",
                "... with a causal mask, counting only the (query, key) pairs inside the mask",
                "query i sees keys 0..i: N (N + 1) / 2 pairs per head, 4 d FLOPs each",
            ),
            Question(
                "score_bytes",
                "bytes of the float32 score matrices S of all heads",
                "one N x N matrix per head, 4 bytes an entry",
            ),
            Question(
                "flash_bytes",
                "bytes flash attention must move (float16 Q, K, V, O "
                "once, plus a float32 log-sum-exp per row)",
                "four B H N d arrays of 2-byte floats, plus 4 bytes per row of each head",
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 09: global atomics of a histogram


class PredictHistogram(Predict):
    LENGTH, CHANNELS, CPB, RPB = 1 << 20, 512, 4, 64

    def questions(self):
        length, ch, cpb, rpb = self.LENGTH, self.CHANNELS, self.CPB, self.RPB
        return [
            Question(
                "global_atomics",
                f"global atomic adds of the one-atomic-per-byte kernel "
                f"on {length:,} rows x {ch} channels",
                "one per input byte",
            ),
            Question(
                "blocks",
                f"blocks of the privatized kernel ({cpb} channels x {rpb} rows per block)",
                "ceil(channels / 4) x ceil(rows / 64)",
            ),
            Question(
                "max_flush_atomics",
                "at most how many global atomic adds its blocks "
                "make when they add their shared bins to hist",
                "each block adds at most 256 bins for each of its channels",
            ),
            Question(
                "worst_bank_ways",
                "bank-conflict ways of 32 lanes that all add to the "
                "same shared bin (a constant channel)",
                "the hardware serializes atomics on one word, but one word in one bank "
                "is not a bank conflict: count wavefronts as for a broadcast",
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 12: bytes of saxpy two ways (the UW lecture's saxpy_slow and saxpy_fast)


class PredictSaxpy(Predict):
    N = 1 << 26

    def questions(self):
        return [
            Question(
                "slow_bytes_per_element",
                "bytes per element saxpy_slow moves: fill temp "
                "with a, temp = temp * x, y = temp + y (float32)",
                "count each pass's reads and writes of 4-byte floats: fill writes one, "
                "each transform reads two and writes one",
            ),
            Question(
                "fast_bytes_per_element",
                "bytes per element saxpy_fast moves: one transform y = a * x + y",
                "it reads x and y and writes y once",
            ),
            Question(
                "slow_over_fast",
                "how many times longer saxpy_slow takes on a bandwidth-bound GPU",
                "the ratio of the bytes moved",
                rtol=0.02,
            ),
            Question(
                "fast_mb",
                "megabytes (10^6 bytes) saxpy_fast moves for n = 2^26",
                "bytes per element x n / 1e6",
                rtol=0.01,
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 11: where GPT-2's forward pass spends its work (the CS 483 report's table)


class PredictGPT2(Predict):
    B, T = 4, 1024  # GPT-2 124M: 12 layers, 12 heads, d_model 768, vocabulary 50257

    def questions(self):
        return [
            Question(
                "matmul_gflop",
                f"GFLOP (10^9, 2 per multiply-add) of all the matmuls of "
                f"one forward at B = {self.B}, T = {self.T}: per layer qkv (768 -> 2304), "
                "attention projection (768 -> 768), MLP up (768 -> 3072) and down "
                "(3072 -> 768), then the logits (768 -> 50257)",
                "2 x (B*T) x in x out for each; 12 layers; one logits matmul",
                rtol=0.01,
            ),
            Question(
                "attention_gflop",
                "GFLOP of causal attention (Q K^T and P V over the "
                "T (T + 1) / 2 query-key pairs of each head, all layers)",
                "2 x 2 x B x T(T+1)/2 x d_model per layer",
                rtol=0.01,
            ),
            Question(
                "matmul_percent",
                "the matmuls' share of the forward's FLOPs, in %",
                "matmul / (matmul + attention) x 100",
                rtol=0.005,
            ),
            Question(
                "layernorm_launches",
                "layernorm launches in one forward",
                "two a layer, and the final one",
            ),
            Question(
                "residual_launches",
                "residual-add kernel launches in one forward of the "
                "unfused build (the report's table; fused, the adds ride in the matmuls)",
                "one after each of a layer's two sublayers",
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
