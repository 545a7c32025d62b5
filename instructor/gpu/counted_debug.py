"""Debug (issue #47): the GPU's own count (``gpu_count.count_on_gpu``, a notebook's way: no
sandbox) of the counted exercises' solution, given kernel and bench grading's attacker, with
Nsight Compute's figures recorded.  ``python instructor/gpu/counted_debug.py OUT``."""

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
from course.grading.source.unit import extract
from course.grading.wall.child import Child
from course.grading.wall.counter import COUNTER, ncu_env

seen: list = []
parse = gpu_count.parse


def spy(table: str, said: str = ""):
    c = parse(table, said)
    seen.append(c.__dict__)
    return c


def attack(name: str, folder: Path):
    src = next(s for _, ex, s in ATTACKS.values() if ex == name)
    mod = f"attack_{name}"
    (folder / f"{mod}.py").write_text("from numba import cuda\nimport numpy as np\n\n" + src)
    fn_name = re.search(r"^def (\w+)", src, re.M).group(1)  # type: ignore[union-attr]
    return getattr(importlib.import_module(mod), fn_name)


gpu_count.parse = spy
out = {}
with tempfile.TemporaryDirectory() as tmp:
    sys.path.insert(0, tmp)
    for name in ("tune_transpose", "tune_reduction"):
        spec = get(name)
        kernels = {
            "solution": lambda n=name: defined(n, student=False)[0],
            "given": lambda n=name: defined(n, student=True)[0],
            "attack": lambda n=name: attack(n, Path(tmp)),
        }
        for which, make in kernels.items():  # each extracted as soon as it is defined
            load = {"op": "load", "unit": extract(make(), spec.launch_names)}
            deadline = time.monotonic() + 200
            folder = Path(tempfile.mkdtemp(dir=tmp)) / "g"
            start = lambda f=folder, d=deadline: Child(  # noqa: E731
                COUNTER, f, d, 0, 200, None, None, ncu_env()
            )
            t = time.perf_counter()
            res = gpu_count.count_on_gpu(start, spec, load, 5, deadline)
            key = f"{name} {which}"
            msg = res if isinstance(res, str) else res.message
            out[key] = {"result": msg, "counts": list(seen), "s": time.perf_counter() - t}
            seen.clear()
            print(key, f"{time.perf_counter() - t:.1f}s", msg[:300], out[key]["counts"], flush=True)
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
(Path(sys.argv[1]) / "counted-debug.json").write_text(json.dumps(out, indent=1))
