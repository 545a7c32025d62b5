"""The two seed leaderboard boards as specs: the CS149 shapes, timed like a tune exercise.

The class leaderboard (``course/leaderboard/``) has one board per tune exercise and these two,
whose shapes come from the CS149 work log (``shared/seeds``): a multi-channel histogram of
1,048,576 rows x 512 channels of uint8, and flash attention at batch 4 x 64 heads x 8192
tokens x head dim 128 with float16 inputs.  A board is a :class:`~course.exercises.tune.Tune`
without a target: its tests are the base exercise's public and hidden cases, its time is the
measured launch at the seed's shape, and that launch's outputs are judged too.

- ``histogram``: the ``tune_histogram`` kernel (``histogram_fast(data, hist)``) on a grid of
  tiles of 4 channels x ROWS rows, exact counts.
- ``flash_attention``: the ``flash_attention_forward`` kernel (``flash_attn(Q, K, V, O,
  scale)``, tile sizes Br, Bc, THREADS_PER_BLK from the submission) with float16 Q, K, V and
  a float32 O.  At the seed's shape the float64 reference of all 256 x 8192 rows would take
  the CPU hours, so the measured launch is judged on 48 random query rows (every element of
  them), drawn from the judge's seed for that submission (a kernel cannot know which); the
  small test cases are judged whole.

Not in ``all_exercises()`` (no notebook cell is graded against them); ``course.exercises.get``
finds them by name, so the grading worker and measurer launch them like any exercise.
"""

from __future__ import annotations

import numpy as np

from . import Case, Tolerance
from .attention import FlashAttentionForward
from .histogram import HistogramTiles
from .tune import Tune

SAMPLED_ROWS = 48  # query rows of the seed-shape attention launch judged against float64


class FlashAttentionHalf(FlashAttentionForward):
    """flash_attention_forward's cases with float16 Q, K, V (O stays float32), plus one at
    the seed's head dim 128 (a kernel sized for d <= 64 fails here, not at the timed launch)."""

    def cases(self):
        return super().cases() + [
            Case(
                "batch*heads = 2, N = 40, d = 128 (the seed's head dim)",
                {"bh": 2, "n": 40, "d": 128, "big": 1.0},
                ("ceil(40 / Br)", 2),
                ("THREADS_PER_BLK",),
            )
        ]

    def make_inputs(self, case, rng):
        inputs = super().make_inputs(case, rng)
        for k in "QKV":
            inputs[k] = inputs[k].astype(np.float16)
        if not self._whole(case):  # which rows are judged: from the judge's seed, not
            inputs["judged_rows_seed"] = int(rng.integers(1 << 62))  # a kernel's guess
        return inputs

    @staticmethod
    def _whole(case) -> bool:
        return case.params["bh"] * case.params["n"] <= 1 << 16

    def reference(self, case, inputs):
        p = case.params
        if self._whole(case):  # test cases: every row
            return super().reference(
                case, {k: (v.astype(np.float32) if k in "QKV" else v) for k, v in inputs.items()}
            )
        # the seed's shape: SAMPLED_ROWS rows in float64, NaN (not judged) elsewhere
        rng = np.random.default_rng(int(inputs["judged_rows_seed"]))
        rows = [
            (int(rng.integers(p["bh"])), int(rng.integers(p["n"]))) for _ in range(SAMPLED_ROWS)
        ]
        out = np.full((p["bh"], p["n"], p["d"]), np.nan, dtype=np.float32)
        for h, i in rows:
            q = inputs["Q"][h, i].astype(np.float64)
            s = inputs["K"][h].astype(np.float64) @ q * float(inputs["scale"])
            w = np.exp(s - s.max())
            out[h, i] = (w / w.sum()) @ inputs["V"][h].astype(np.float64)
        return {"O": out}

    def tolerance(self, case, name):
        return Tolerance(
            rtol=2e-3,
            atol=2e-4,
            why="float16 inputs, float32 sums over N keys "
            "(the reference uses the same float16 values)",
        )


def _board(
    name,
    signature,
    goal,
    base,
    gpu_case,
    sim_case,
    work,
    time_budget_s=0.0,
    memory_mb=0,
    peak="fp32",
):
    board = Tune(
        name,
        base.lesson,
        signature,
        goal,
        inout=base.inout,
        hints=base.hints,
        kind="tune",
        base=base,
        sim_metric="efficiency",
        sim_target=0.0,
        gpu_metric="copy_fraction",
        gpu_target=0.0,
        sim_case=sim_case,
        gpu_case=gpu_case,
        work=work,
        peak=peak,
    )
    board.time_budget_s, board.memory_mb = time_budget_s, memory_mb
    return board


def _boards():
    hist = HistogramTiles("tune_histogram", "09_histogram", "", "")
    attn = FlashAttentionHalf("flash_attention_forward", "08_flash_attention", "", "")
    n, c = 1 << 20, 512
    b, h, t, d = 4, 64, 8192, 128
    return [
        _board(
            "histogram",
            "@cuda.jit def histogram_fast(data, hist)",
            "hist[c, v] = number of rows r with data[r, c] == v (uint8 data, int32 counts)",
            hist,
            Case(
                f"length x channels = {n:,} x {c}, uniform uint8",
                {"length": n, "channels": c, "dist": "uniform"},
                ("-", "-"),
                (256,),
            ),
            Case(
                "length x channels = 256 x 8, uniform uint8",
                {"length": 256, "channels": 8, "dist": "uniform"},
                ("-", "-"),
                (64,),
            ),
            lambda k: (
                k.params["length"] * k.params["channels"],
                k.params["length"] * k.params["channels"],
                0,
            ),
        ),
        _board(
            "flash_attention",
            "@cuda.jit def flash_attn(Q, K, V, O, scale)",
            "O = softmax(Q K^T * scale) V, float16 Q, K, V and float32 O of shape "
            "(batch*heads, N, d)",
            attn,
            Case(
                f"batch x heads x N x d = {b} x {h} x {t} x {d}, float16 in",
                {"bh": b * h, "n": t, "d": d, "big": 1.0},
                (f"ceil({t} / Br)", b * h),
                ("THREADS_PER_BLK",),
            ),
            Case(
                "batch*heads x N x d = 1 x 32 x 32, float16 in",
                {"bh": 1, "n": 32, "d": 32, "big": 1.0},
                ("ceil(32 / Br)", 1),
                ("THREADS_PER_BLK",),
            ),
            lambda k: (
                k.params["bh"] * k.params["n"],
                10 * k.params["bh"] * k.params["n"] * k.params["d"],
                4 * k.params["bh"] * k.params["n"] ** 2 * k.params["d"],
            ),
            # a naive kernel takes ~20 s a launch at this shape on an H100, and the measured
            # launch's 2.7 GB of buffers cross the pipe both ways: 900 s, a 32 GB sandbox
            time_budget_s=900.0,
            memory_mb=32768,
            peak="tensor",
        ),  # flash_mma (mma.sync) runs on tensor cores
    ]


SEED_BOARDS = {b.name: b for b in _boards()}
