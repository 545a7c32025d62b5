"""Probe (issue #47): the simulator's count and the GPU's own count (``gpu_count``, a
notebook's way: no sandbox) of the counted exercises' solution, given kernel and every one
of bench grading's attackers, with Nsight Compute's figures recorded, whatever the
simulator's verdict.  ``python instructor/gpu/counted_debug.py OUT``."""

from __future__ import annotations

import importlib
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from course.bench.grading_attacks import ATTACKS
from course.exercises import get
from course.grading.classroom.solutions import defined
from course.grading.judging import gpu_count
from course.grading.judging.measurer_calls import SIM_ENV, count_in_simulator
from course.grading.source.unit import extract
from course.grading.wall.child import Child
from course.grading.wall.counter import COUNTER, ncu_env

seen: list = []
parse = gpu_count.parse


def spy(table: str, said: str = ""):
    c = parse(table, said)
    seen.append(c.__dict__)
    return c


def attacks(name: str, folder: Path) -> dict:
    """bench grading's attackers of ``name``, each a function imported from a file."""
    out = {}
    for student, (_lesson, ex, src) in ATTACKS.items():
        if ex != name:
            continue
        (folder / f"{student}.py").write_text(
            "from numba import cuda\nimport numpy as np\n\n" + src
        )
        fn_name = re.search(r"^def (\w+)", src, re.M).group(1)  # type: ignore[union-attr]
        out[student] = lambda s=student, f=fn_name: getattr(importlib.import_module(s), f)
    return out


gpu_count.parse = spy
out = {}
with tempfile.TemporaryDirectory() as tmp:
    sys.path.insert(0, tmp)
    for name in ("tune_transpose", "tune_reduction"):
        spec = get(name)
        kernels = {
            "solution": lambda n=name: defined(n, student=False)[0],
            "given": lambda n=name: defined(n, student=True)[0],
            **attacks(name, Path(tmp)),
        }
        for which, make in kernels.items():  # each extracted as soon as it is defined
            load = {"op": "load", "unit": extract(make(), spec.launch_names)}
            deadline = time.monotonic() + 200

            def child(module: str, env: dict, d=deadline) -> Child:
                folder = Path(tempfile.mkdtemp(dir=tmp)) / "c"
                return Child(module, folder, d, 0, 200, None, None, env)

            t = time.perf_counter()
            sim = count_in_simulator(
                lambda: child("course.grading.wall.measurer", SIM_ENV), spec, load, 5, deadline
            )
            res = gpu_count.count_on_gpu(
                lambda: child(COUNTER, ncu_env()), spec, load, 5, deadline, sim_figures=sim.figures
            )
            key = f"{name} {which}"
            msg = (
                res
                if isinstance(res, str)
                else ("pass: " if res.passed else "FAIL: ") + res.message
            )
            out[key] = {
                "simulator": ("pass: " if sim.passed else "FAIL: ") + sim.message,
                "gpu": msg,
                "counts": list(seen),
                "s": time.perf_counter() - t,
            }
            seen.clear()
            print(
                key,
                f"{out[key]['s']:.1f}s",
                "| sim",
                out[key]["simulator"][:80],
                "| gpu",
                msg[:400],
                flush=True,
            )
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
(Path(sys.argv[1]) / "counted-debug.json").write_text(json.dumps(out, indent=1))
