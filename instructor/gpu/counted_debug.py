"""Debug (issue #47): the counted verdict of the transpose's solution in a notebook's way
(``check._count``), with the raw Nsight Compute reply printed.  ``python ... OUT``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from course.exercises import get
from course.grading.classroom.solutions import defined
from course.grading.judging import check, gpu_count

seen: list = []
parse = gpu_count.parse


def spy(table: str, said: str = ""):
    seen.append({"table": table[-20000:], "said": said[-4000:]})
    return parse(table, said)


gpu_count.parse = spy
out = {}
for name in ("tune_transpose", "tune_reduction"):
    for student in (False, True):
        spec = get(name)
        fn, _ = defined(name, student=student)
        res = check._count(spec, fn, seed=5)
        key = f"{name} {'given' if student else 'solution'}"
        out[key] = {"passed": res.passed, "message": res.message, "seen": list(seen)}
        seen.clear()
        print(key, res.passed, res.message[:600], flush=True)
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
(Path(sys.argv[1]) / "counted-debug.json").write_text(json.dumps(out, indent=1))
