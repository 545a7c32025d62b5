"""Lesson 01 benchmark: the lecture's table at N = 2^20, and the bandwidth test at N = 2^26."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..kernels import vector_add as lesson
from ..measure.timing import Timing, benchmark
from ..platform import runtime
from . import fastest

TITLE = "01 vector add (CSE P 524 Lecture 9)"


def run(report) -> None:
    lecture = runtime.profile() == "lecture"
    n_small = 1 << 20 if lecture else 2_000
    n_big = 1 << 26 if lecture else 4_000
    rng = np.random.default_rng(1)

    def arrays(n):
        return (
            cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32)),
            cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32)),
        )

    x, y = arrays(n_small)
    nbytes = 3 * 4 * n_small
    for variant in ("one_thread", "one_block", "many_blocks", "grid_stride"):
        t = benchmark(
            lambda v=variant: lesson.launch(v, n_small, x, y, 256),
            repeat=3 if variant == "one_thread" else None,
            label=variant,
        )
        report.add(
            variant,
            t,
            nbytes=nbytes,
            size=f"N=2^{n_small.bit_length() - 1}" if lecture else f"N={n_small}",
            note="256 threads/block",
        )
    for name, gpus in lesson.LECTURE_TABLE.items():
        for gpu, ms in gpus.items():
            report.add(
                f"lecture {name}",
                Timing([ms]),
                nbytes=12 * 2**20,
                size="N=2^20",
                kind="lecture",
                note=gpu,
            )

    x, y = arrays(n_big)
    nbytes = 3 * 4 * n_big
    size = f"N=2^{n_big.bit_length() - 1}" if lecture else f"N={n_big}"
    report.add(
        "many_blocks",
        benchmark(lambda: lesson.launch("many_blocks", n_big, x, y, 256)),
        nbytes=nbytes,
        size=size,
        note="ceil(N/256) blocks of 256",
    )
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT if lecture else 2
    t, blocks = fastest(
        lambda b: benchmark(lambda: lesson.launch("grid_stride", n_big, x, y, 256, b)),
        [per_sm * sms for per_sm in ((4, 8, 16, 32) if lecture else (1,))],
    )
    report.add(
        "grid_stride",
        t,
        nbytes=nbytes,
        size=size,
        note=f"best grid: {blocks} blocks of 256 (tried 4-32 per SM)",
    )
    t, (blocks, tpb) = fastest(
        lambda c: benchmark(lambda: lesson.launch("grid_stride_x4", n_big, x, y, c[1], c[0])),
        [
            (per_sm * sms, tpb)
            for per_sm in ((2, 4, 8, 16) if lecture else (1,))
            for tpb in ((256, 512) if lecture else (256,))
        ],
    )
    report.add(
        "grid_stride_x4",
        t,
        nbytes=nbytes,
        size=size,
        note=f"4 loads in flight per thread; best grid: {blocks} blocks of {tpb}",
    )
    t, tpb = fastest(
        lambda c: benchmark(lambda: lesson.launch("pairs", n_big, x, y, c)),
        (128, 256, 512) if lecture else (256,),
    )
    report.add(
        "pairs",
        t,
        nbytes=nbytes,
        size=size,
        note=f"one 8-byte float pair (complex64) per thread, {tpb} threads/block",
    )
    report.add_peer("torch", "torch.add(out=)", _torch_add(n_big), nbytes=nbytes, size=size)
    report.add_peer("cupy", "cupy.add(out=)", _cupy_add(n_big), nbytes=nbytes, size=size)
    report.note(
        "pairs may pass the measured copy bandwidth by a percent or two: a copy "
        "reads one byte per byte written, the vector add two, and HBM serves reads "
        "a little faster than the turnarounds of a 1:1 mix (the H100's HBM3 peak is "
        "3.35 TB/s)."
    )
    report.note(
        "bytes per element: 12 (read x, read y, write y); lecture rows are the "
        "lecture's own GPUs (GT 750M laptop, Tesla K80 server) at N = 2^20."
    )


def _torch_add(n):
    def fn():
        import torch

        if not hasattr(fn, "a"):
            fn.a, fn.b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        torch.add(fn.a, fn.b, out=fn.b)

    return fn


def _cupy_add(n):
    def fn():
        import cupy

        if not hasattr(fn, "a"):
            fn.a = cupy.random.random(n, dtype=cupy.float32)
            fn.b = cupy.random.random(n, dtype=cupy.float32)
        cupy.add(fn.a, fn.b, out=fn.b)

    return fn
