"""The class leaderboard on this GPU: do its times agree with the bench, alone and queued?

``python -m course bench leaderboard`` starts ``python -m course leaderboard serve`` on the
loopback interface (a database in a temp folder, the grading sandbox on, as for a class),
then, as the instructor and as students would:

1. enters the course's own kernels on the seed boards (``histogram_tuned`` on ``histogram``,
   ``flash_mma`` on ``flash_attention``: ``course/exercises/entries.py``) and sets each
   board's time (the measurer's mean ± std over its timed runs) beside the bench timer on
   the same kernel and launch in this process (``course.measure.timing.benchmark``);
2. submits one unit (a vector add, as ``course.submit`` sends it) alone, then the same unit
   from QUEUED students at once, and compares the queued times with the lone one.

It rehearses a class's GPU box before the term.  In the simulator the service tests but
does not time: the report says so, and still counts that every queued submission came back.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ..measure.timing import Timing, benchmark
from ..platform import runtime

TITLE = "Class leaderboard - the course's kernels on the seed boards, one vs a queue"
QUEUED = 30 if runtime.MODE == "gpu" else 3
UNIT_SOURCE = (
    "from numba import cuda\n\n\n@cuda.jit\ndef add_fast(n, x, y):\n"
    "    for k in range(cuda.grid(1), n, cuda.gridsize(1)):\n"
    "        y[k] = x[k] + y[k]\n"
)


@contextlib.contextmanager
def serving(folder: Path, admin: str):
    """A ``leaderboard serve`` child on a free loopback port (stopped on exit, and by
    itself if this process dies); yields its URL."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(
        os.environ,
        COURSE_LEADERBOARD_ADMIN_TOKEN=admin,
        COURSE_LEADERBOARD_EXIT_WITH=str(os.getpid()),
    )
    log = open(folder / "serve.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "course",
            "leaderboard",
            "serve",
            "--db",
            str(folder / "lb.db"),
            "--port",
            str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                raise RuntimeError(
                    "the leaderboard did not start:\n" + (folder / "serve.log").read_text()[-2000:]
                )
            try:
                urllib.request.urlopen(url + "/api/health", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        log.close()


def run(report) -> None:
    from ..leaderboard.store import Store

    with tempfile.TemporaryDirectory(prefix="course-bench-leaderboard-") as tmp:
        folder, admin = Path(tmp), secrets.token_urlsafe(16)
        store = Store(folder / "lb.db")
        tokens = dict(store.issue_tokens([f"s{i:02d}" for i in range(QUEUED + 1)])[0])
        store.close()
        with serving(folder, admin) as url:
            report.data["entries"] = _entries(report, url, admin)
            report.data["queue"] = _queue(report, url, tokens)
        report.files[".db"] = scrubbed(folder / "lb.db")


def scrubbed(db: Path) -> bytes:
    """The run's database as the service wrote it, less what must not ship: the students'
    sources and units (a course entry's one-line description stays) and the token hashes."""
    import sqlite3

    from ..leaderboard.store import COURSE_PREFIX

    copy = db.with_name("scrubbed.db")
    src, dst = sqlite3.connect(db), sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    dst.execute(
        "UPDATE submissions SET source = '', unit = NULL WHERE student NOT LIKE ?",
        (COURSE_PREFIX + "%",),
    )
    dst.execute("DELETE FROM tokens")
    dst.commit()
    dst.execute("PRAGMA journal_mode=DELETE")
    dst.execute("VACUUM")
    dst.close()
    return copy.read_bytes()


def _entries(report, url: str, admin: str) -> dict:
    from ..exercises.entries import ENTRIES
    from ..leaderboard.client import send

    out = {}
    for name, entry in ENTRIES.items():
        if entry.gpu_only and runtime.MODE != "gpu":
            report.note(
                f"{name} on {entry.board}: not entered (it links CUDA C++; the "
                "simulator cannot run it)."
            )
            continue
        sub = send(
            entry.board, None, None, server=url, token=admin, timeout=1800, course_kernel=name
        )
        out[name] = {
            k: getattr(sub, k)
            for k in (
                "status",
                "passed",
                "message",
                "mean_ms",
                "std_ms",
                "best_ms",
                "runs",
                "device",
            )
        }
        if sub.mean_ms is None:
            report.note(f"{name} on {entry.board}: {sub.status} - {sub.message}")
            continue
        work, bench = _BENCH[name]()
        board_t = Timing([sub.best_ms, sub.mean_ms, sub.mean_ms + (sub.std_ms or 0)])
        report.add(
            f"{name} on the {entry.board} board",
            board_t,
            **work,
            note=f"board: mean {sub.mean_ms:.4g} ± {sub.std_ms:.2g} ms over {sub.runs} "
            f"runs (shown: best, mean, mean + std); {sub.message.split(';')[0]}",
        )
        diff = sub.mean_ms / float(np.mean(bench.times_ms)) - 1
        report.add(
            f"{name}, bench timer",
            bench,
            **work,
            note=f"the board's mean is {diff:+.1%} of this one's",
        )
        out[name].update(
            bench_mean_ms=float(np.mean(bench.times_ms)),
            bench_median_ms=bench.median_ms,
            board_vs_bench=diff,
        )
        report.note(
            f"{name}: board {sub.mean_ms:.4g} ms vs bench timer "
            f"{np.mean(bench.times_ms):.4g} ms ({diff:+.1%}; target within 5 %)."
        )
        if name == "flash_mma":
            report.note(
                "flash_mma runs on tensor cores (float16 mma.sync): its % FP32 and "
                "x floor are against the CUDA-core FP32 rate, which tensor cores "
                "pass; the H100's dense float16 peak is 989 TFLOP/s."
            )
    return out


def _bench_histogram() -> tuple[dict, Timing]:
    from numba import cuda

    from ..kernels import histogram as H
    from . import histogram as BH

    length, n_ch = BH.shape()  # the board's: 1,048,576 x 512
    d_bytes, _ = H.to_device(H.make_data(length, n_ch, "uniform", seed=1))
    hist = cuda.device_array((n_ch, H.NUM_BINS), np.int32)
    t = BH.time_variant("tuned", d_bytes, n_ch, hist, repeat=30)
    return (
        {"nbytes": length * n_ch + n_ch * H.NUM_BINS * 4, "size": f"{length:,} x {n_ch} uint8"},
        t,
    )


def _bench_flash() -> tuple[dict, Timing]:
    from ..kernels import attention as A
    from ..kernels import attention_mma as M
    from ..kernels.attention_common import device_inputs
    from .attention import LEADERBOARD

    b, h, n, d = LEADERBOARD  # the board's shape
    q, k, v, o = device_inputs(LEADERBOARD, np.float16)
    t = benchmark(lambda: M.launch(q, k, v, o), repeat=30, warmup=1)
    return (
        {
            "flops": A.flops(b, h, n, d, False, None),
            "nbytes": A.traffic_bytes(b, h, n, d, 2)["flash"],
            "size": f"{b}x{h}x{n}x{d}",
        },
        t,
    )


_BENCH = {"histogram_tuned": _bench_histogram, "flash_mma": _bench_flash}


def _queue(report, url: str, tokens: dict) -> dict:
    """One unit submission alone, then QUEUED of them at once (one per student)."""
    import io

    from ..grading.source.unit import extract, run_cell
    from ..leaderboard.boards import get
    from ..leaderboard.client import follow, send

    ns: dict = {}
    run_cell(UNIT_SOURCE, "<course bench leaderboard>", ns)
    board = "tune_vector_add"
    unit = extract(ns["add_fast"], get(board).spec.launch_names)
    alone = send(
        board, unit["source"], "add_fast", unit, server=url, token=tokens["s00"], out=io.StringIO()
    )
    t0 = time.monotonic()
    ids = [
        send(
            board,
            unit["source"],
            "add_fast",
            unit,
            server=url,
            token=tokens[f"s{i + 1:02d}"],
            wait=False,
        ).id
        for i in range(QUEUED)
    ]
    subs = [
        follow(sid, board, server=url, token=tokens[f"s{i + 1:02d}"], timeout=3600, poll_s=0.5)
        for i, sid in enumerate(ids)
    ]
    wall = time.monotonic() - t0
    statuses = Counter(s.status for s in subs)
    done = statuses["done"]
    means = [s.mean_ms for s in subs if s.mean_ms is not None]
    out = {
        "alone": {k: getattr(alone, k) for k in ("status", "mean_ms", "std_ms", "best_ms", "runs")},
        "queued": len(ids),
        "done": done,
        "wall_s": wall,
        "means_ms": means,
        "stds_ms": [s.std_ms for s in subs if s.std_ms],
    }
    report.note(
        f"{QUEUED} submissions queued at once, each from its own student: all came "
        f"back ({', '.join(f'{v} {k}' for k, v in sorted(statuses.items()))}) in "
        f"{wall:.0f} s."
    )
    if alone.mean_ms is None or not means:
        report.note("Not timed (simulator): the queue's times cannot be compared here.")
        return out
    report.add(
        f"{board} unit, alone (board)",
        Timing([alone.best_ms, alone.mean_ms, alone.mean_ms + (alone.std_ms or 0)]),
        **_vector_add_work(),
        note=f"mean {alone.mean_ms:.4g} ± {alone.std_ms:.2g} ms over {alone.runs} runs",
    )
    report.add(
        f"{board} unit, {QUEUED} queued at once (board)",
        Timing(means),
        **_vector_add_work(),
        note=f"the {len(means)} submissions' means: {np.mean(means):.4g} ± "
        f"{np.std(means):.2g} ms; each one's own spread "
        f"{np.mean(out['stds_ms']):.2g} ms",
    )
    report.note(
        f"Queued vs alone: mean of the {len(means)} means {np.mean(means):.4g} ms "
        f"(from {min(means):.4g} to {max(means):.4g}) vs {alone.mean_ms:.4g} ± "
        f"{alone.std_ms:.2g} ms alone ({np.mean(means) / alone.mean_ms - 1:+.1%})."
    )
    return out


def _vector_add_work() -> dict:
    from ..exercises import get

    spec = get("tune_vector_add")
    case = spec.measured_case()
    return {"nbytes": int(spec.work(case)[1]), "size": case.name.split(",")[0]}
