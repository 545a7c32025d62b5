"""Lesson 10 exercises: ``predict_profile`` (read committed H100 profiles), ``predict_access``
(sectors and wavefronts of access patterns) and ``tune_transpose`` (remove a bank conflict).

``predict_profile``'s answers are read from the profiles in ``assets/profiles/`` by the same
code that shows them (``course.hardware.profiler``), so a new capture changes the questions' answers
and the check together.
"""

from __future__ import annotations

import math

import numpy as np

from ..platform import resources
from . import Case, Exercise, blocks_for, random_floats, sim
from .predict import Predict, Question
from .tune import Tune

PROFILES = resources.path("assets", "profiles")
DEVICE = "nvidia-h100-80gb-hbm3"
PARTS = {
    "h2d_ms": "host-to-device copy",
    "kernels_ms": "kernels",
    "d2h_ms": "device-to-host copy",
    "rest_ms": "the rest (launch, allocation, Python)",
}


def committed(name: str):
    """The committed H100 profile ``name`` (e.g. 'histogram-tuned') as a Profile."""
    from ..hardware.profiler import Profile

    return Profile.load(PROFILES / f"{DEVICE}-{name}.json")


def _row(name: str, kernel: str) -> dict:
    return next(r for r in committed(name).rows if kernel in r["kernel"])


class PredictProfile(Predict):
    """Read the committed H100 profiles; the key reads them with the same code."""

    def questions(self):
        from ..hardware.profile_rows import LIMITS

        limiters = tuple(LIMITS.values()) + ("none (100 % theoretical)",)
        flash = _row("attention-flash_tiled", "flash_fwd")
        tuned = _row("histogram-tuned", "histogram_tuned")
        three = committed("attention-three_kernels").rows
        stalls = tuple(
            sorted(
                {
                    s
                    for p in ("faces-mean_split", "attention-flash_tiled")
                    for r in committed(p).rows
                    for s, _v in r["top_stalls"]
                }
            )
        )
        return [
            Question(
                "flash_limiter",
                "flash attention (flash_fwd): what limits its occupancy?",
                f"theoretical occupancy {flash['theoretical_occupancy_pct']:.0f} %, "
                f"{flash['registers_per_thread']:.0f} registers per thread: read its "
                "occupancy section",
                choices=limiters,
            ),
            Question(
                "histogram_tuned_limiter",
                "histogram_tuned: what limits its occupancy?",
                f"{tuned['shared_bytes_per_block']:.0f} B of shared memory per block: "
                "read its occupancy section",
                choices=limiters,
            ),
            Question(
                "most_store_conflicts",
                "of the three attention kernels, which has the most shared-store bank conflicts?",
                "compare 'shared store bank conflicts' of the three profiles",
                choices=tuple(r["kernel"] for r in three),
            ),
            Question(
                "mean_sol",
                "mean face kernel: is its memory or its compute speed of light higher?",
                "compare the two speed-of-light rows of its profile",
                choices=("memory", "compute"),
            ),
            Question(
                "mean_top_stall",
                "mean face kernel: its top warp stall reason",
                "the first row of its warp-stall table (long_scoreboard = waiting for "
                "global memory)",
                choices=stalls,
            ),
            Question(
                "mean_call_part",
                "mean face host call: where does most of its time go?",
                "the largest part of the host call's breakdown table",
                choices=tuple(PARTS.values()),
            ),
        ]


ACCESS = {  # key -> (description, byte offset of lane t, item size, "sectors"|"wavefronts")
    "uint8": ("global x[i], uint8", lambda t: t, 1, "sectors"),
    "stride4": ("global x[4 * i], float32", lambda t: 16 * t, 4, "sectors"),
    "pairs": (
        "global x[i // 2], float32 (two lanes per element)",
        lambda t: 4 * (t // 2),
        4,
        "sectors",
    ),
    "f64_stride2": ("global x[2 * i], float64", lambda t: 16 * t, 8, "sectors"),
    "f64_shared": ("shared sdata[tid], float64", lambda t: 8 * t, 8, "wavefronts"),
    "mod_broadcast": (
        "shared sdata[(tid * 4) % 32], float32",
        lambda t: 4 * ((t * 4) % 32),
        4,
        "wavefronts",
    ),
    "stride4_shared": ("shared sdata[tid * 4], float32", lambda t: 16 * t, 4, "wavefronts"),
    "xor": ("shared sdata[tid ^ 1], float32", lambda t: 4 * (t ^ 1), 4, "wavefronts"),
}


class PredictAccess(Predict):
    patterns = ACCESS

    def questions(self):
        out = []
        for key, (what, _off, _size, unit) in ACCESS.items():
            why = (
                "count the distinct 32-byte sectors the 32 lanes touch"
                if unit == "sectors"
                else "bank = 4-byte word mod 32; the most distinct words in one bank (a "
                "word read by several lanes is a broadcast)"
            )
            out.append(Question(key, f"{unit} per request of a warp reading {what}", why))
        return out


# ---------------------------------------------------------------------------------------
# tune_transpose

TILE_T = 32  # the tile is TILE_T x TILE_T; blocks are (TILE_T, 8) threads


class Transpose(Exercise):
    """B = A.T for float32 A (m, n): (32, 8)-thread blocks, one 32 x 32 tile per block."""

    def cases(self):
        shapes = [(1, 1), (31, 33), (33, 31), (64, 40)]
        if not sim():
            shapes += [(1000, 777), (2048, 2048)]
        return [
            Case(
                f"m x n = {m} x {n}",
                {"m": m, "n": n},
                (blocks_for(n, TILE_T), blocks_for(m, TILE_T)),
                (TILE_T, 8),
                repeats=2 if i == 3 else 1,
            )
            for i, (m, n) in enumerate(shapes)
        ]

    def make_inputs(self, case, rng):
        return {"A": random_floats(rng, (case.params["m"], case.params["n"]))}

    def outputs(self, case):
        return {"B": ((case.params["n"], case.params["m"]), np.float32)}

    def reference(self, case, inputs):
        return {"B": inputs["A"].astype(np.float64).T}

    def launch(self, kernel, case, args):
        kernel[case.grid, case.block](args["A"], args["B"])


def _tune_transpose():
    base = Transpose("transpose", "10_profiling", "", "")
    big = 4096
    return Tune(
        "tune_transpose",
        "10_profiling",
        "@cuda.jit def transpose_fast(A, B)",
        "make the given (correct) tiled transpose free of shared-memory bank conflicts",
        kind="tune",
        base=base,
        sim_metric="replays",
        sim_target=0,
        sim_also=(("efficiency", 0.9),),  # without shared memory: no conflict, uncoalesced
        # the tile is staged through shared memory: written and read once per element
        balanced=lambda c, t: -(-2 * c.params["m"] * c.params["n"] // t),
        speedup=1.04,  # H100, 4096^2: 0.464 of copy with the conflict, 0.503 without (1.08x)
        starter_floor=0.2,
        issue_limit=92,
        sim_case=Case("m x n = 64 x 64", {"m": 64, "n": 64}, (2, 2), (TILE_T, 8)),
        gpu_case=Case(
            f"m x n = {big} x {big}",
            {"m": big, "n": big},
            (math.ceil(big / TILE_T),) * 2,
            (TILE_T, 8),
        ),
        work=lambda c: (c.params["m"] * c.params["n"], 8 * c.params["m"] * c.params["n"], 0),
    )


EXERCISES = [
    PredictProfile(
        "predict_profile",
        "10_profiling",
        "answer_profile = {...}",
        "read the committed H100 profiles and say what limits each kernel",
        kind="predict",
    ),
    PredictAccess(
        "predict_access",
        "10_profiling",
        "answer_access = {...}",
        "predict sectors and wavefronts per request of eight access patterns",
        kind="predict",
    ),
    _tune_transpose(),
]
