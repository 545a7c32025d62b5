"""Gradescope: its ``results.json`` for a graded submission, and the autograder bundle.

``python -m course gradescope --out autograder.zip`` writes what Gradescope's "programming
assignment" autograder takes: ``setup.sh`` (run once, when Gradescope builds its image: a
Python environment with the course's wheel) and ``run_autograder`` (run once per
submission, in ``/autograder``: ``python -m course grade /autograder/submission --format
gradescope --out /autograder/results/results.json``), beside the wheel and the hidden
cases.  Gradescope then runs every submission in its own container on its own machines,
with the same grader as ``python -m course grade`` (simulator mode: no GPU there).

:func:`results` turns one student's :class:`batch.Graded` into the JSON of Gradescope's
autograder specification (validated against :data:`SCHEMA` in the tests): one test per
exercise with its score, max_score, status and output - every case with its result, hidden
cases marked "(hidden case)" and shown only by name and the checker's message, never their
code.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# Gradescope's results.json (autograder specification: top-level score or per-test
# scores, tests with name/score/max_score/status/output/visibility, ...), as a JSON Schema.
_VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": _VISIBILITY,
        "stdout_visibility": _VISIBILITY,
        "extra_data": {"type": "object"},
        "leaderboard": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": ["number", "string"]},
                    "order": {"enum": ["asc", "desc"]},
                },
                "required": ["name", "value"],
                "additionalProperties": False,
            },
        },
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number", "minimum": 0},
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "number": {"type": "string"},
                    "output": {"type": "string"},
                    "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": _VISIBILITY,
                    "extra_data": {"type": "object"},
                },
                "required": ["score", "max_score", "name"],
                "additionalProperties": False,
            },
        },
    },
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
    "additionalProperties": False,
}


def results(g, execution_time: float) -> dict:
    """Gradescope's results.json for one student's :class:`batch.Graded`."""
    from .scoring import kind_of

    tests = []
    for k, name in enumerate(g.max_points, 1):
        e = g.results.get(name) or {}
        cases = e.get("cases", [])
        lines = [
            f"{'pass' if c['passed'] else 'FAIL'}  {c['name']}"
            f"{' (hidden case)' if c['hidden'] else ''}  [{c['launch']}]"
            + ("" if c["passed"] else f": {c['message']}")
            for c in cases
        ]
        lines += [r for r in g.reasons if r.startswith(name)]
        if not cases and not lines:
            lines = ["not graded"]
        hidden = sum(c["hidden"] for c in cases)
        score = float(g.points.get(name, 0))
        kind = kind_of(name)
        tests.append(
            {
                "name": f"{name} ({kind})",
                "number": str(k),
                "score": score,
                "max_score": float(g.max_points[name]),
                "status": "passed" if score >= g.max_points[name] else "failed",
                "output": "\n".join(lines),
                "tags": [kind] + (["hidden-cases"] if hidden else []),
                "visibility": "visible",
            }
        )
    head = [
        f"{g.lesson or 'unknown lesson'}: {g.total:g} / {g.possible:g}"
        f" (graded in the CUDA simulator, input seed {g.seed})"
        if g.mode == "sim"
        else f"{g.lesson}: {g.total:g} / {g.possible:g}"
    ]
    if g.status != "graded":
        head.append(f"grading status: {g.status}")
    other = [r for r in g.reasons if not any(r.startswith(n) for n in g.max_points)]
    head += other + g.notes
    out = {
        "score": float(g.total),
        "execution_time": round(float(execution_time), 1),
        "output": "\n".join(head),
        "stdout_visibility": "hidden",
        "visibility": "visible",
        "tests": tests,
    }
    board = leaderboard(g)
    if board:
        out["leaderboard"] = board
    return out


def leaderboard(g) -> list[dict]:
    """Gradescope's leaderboard: each tune exercise's measured time (ms, lower is better),
    from the grader's own measured launch - the one its verdict used; only a correct
    kernel measured on a GPU has one (the simulator counts, it does not time)."""
    from ...exercises.outcome import split_timed
    from .scoring import kind_of

    out = []
    for name in g.max_points:
        if kind_of(name) != "tune":
            continue
        tests, timed = split_timed((g.results.get(name) or {}).get("cases", []))
        figures = (timed or {}).get("figures") or {}
        if "mean_ms" in figures and all(c["passed"] for c in tests):
            out.append(
                {"name": f"{name} (ms)", "value": round(figures["mean_ms"], 5), "order": "asc"}
            )
    return out


def nothing_to_grade(reason: str) -> dict:
    """results.json when the submission holds no gradable notebook: 0, and why."""
    return {"score": 0.0, "output": reason, "stdout_visibility": "hidden", "tests": []}


def write_results(path: Path, g, seconds: float, why: str = "") -> int:
    """Write results.json for ``g`` (or, with ``g`` None, a 0 that says ``why``); exit code 0."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results(g, seconds) if g else nothing_to_grade(why), indent=1))
    return 0


# ---------------------------------------------------------------------------------------
# the autograder bundle

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image (Ubuntu).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --upgrade pip
WHEEL=$(ls /autograder/source/course-*.whl)
/autograder/venv/bin/pip install -q "${WHEEL}"
/autograder/venv/bin/python -m course doctor
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this once per submission, in /autograder; the student's files are in
# submission/, the JSON it reads goes to results/results.json. No GPU: simulator mode.
# AUTOGRADER_ROOT and COURSE_PYTHON exist to run this outside Gradescope (tests, a dry run).
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${COURSE_PYTHON:-$ROOT/venv/bin/python}"
export COURSE_HIDDEN_DIR="$ROOT/source/hidden"
export COURSE_PROGRESS_FILE="$ROOT/course-progress.json"
export NUMBA_ENABLE_CUDASIM=1 MPLBACKEND=Agg
mkdir -p "$ROOT/results"
cd "$ROOT"
"$PY" -m course grade "$ROOT/submission" --format gradescope \\
    --notebooks "$ROOT/source/notebooks" \\
    --out "$ROOT/results/results.json" --timeout %(timeout)d --isolation %(isolation)s
"""


def build_wheel(project: Path, dest: Path) -> Path:
    """The course's wheel, built from the checkout at ``project`` (offline when it can)."""
    for extra in (["--no-build-isolation"], []):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "-q",
                *extra,
                "-w",
                str(dest),
                str(project),
            ],
            capture_output=True,
            text=True,
        )
        wheels = sorted(dest.glob("course-*.whl"))
        if r.returncode == 0 and wheels:
            return wheels[-1]
    raise RuntimeError(f"could not build the course's wheel: {r.stderr.strip()[-500:]}")


def bundle(
    out: Path, timeout: int = 900, isolation: str = "auto", wheel: Path | None = None
) -> list[str]:
    """Write the autograder zip; returns the names it holds."""
    from ...platform.resources import IMPORT_ROOT, INSTALLED
    from .. import hidden

    if wheel is None and INSTALLED:
        raise RuntimeError(
            "the bundle is built from a checkout of the course (or pass --wheel course-*.whl)"
        )
    hid = hidden.hidden_dir()
    with tempfile.TemporaryDirectory() as t:
        wheel = Path(wheel) if wheel else build_wheel(IMPORT_ROOT, Path(t))
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in (
                ("setup.sh", SETUP_SH),
                ("run_autograder", RUN_AUTOGRADER % {"timeout": timeout, "isolation": isolation}),
            ):
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o100755 << 16  # executable
                z.writestr(info, text)
            z.write(wheel, wheel.name)
            for p in sorted(hid.glob("*.py")) if hid else []:
                z.write(p, f"hidden/{p.name}")
            for p in sorted(hidden.notebooks_dir().glob("*.ipynb")):  # the wheel has only
                z.write(p, f"notebooks/{p.name}")  # student copies
            return z.namelist()


def main(argv=None) -> int:
    """``python -m course gradescope --out autograder.zip [--timeout S] [--wheel W]``"""
    ap = argparse.ArgumentParser(
        prog="python -m course gradescope",
        description="Write a Gradescope autograder zip: setup.sh, "
        "run_autograder, the course wheel, hidden cases.",
    )
    ap.add_argument("--out", type=Path, default=Path("autograder.zip"))
    ap.add_argument(
        "--timeout",
        type=int,
        default=900,
        help="seconds per submission (keep under Gradescope's own limit)",
    )
    ap.add_argument("--isolation", choices=("auto", "none"), default="auto")
    ap.add_argument(
        "--wheel",
        type=Path,
        help="a built course wheel to ship (default: build one from this checkout)",
    )
    opts = ap.parse_args(argv)
    try:
        names = bundle(opts.out, opts.timeout, opts.isolation, opts.wheel)
    except (RuntimeError, OSError) as exc:
        print(f"gradescope: {exc}", file=sys.stderr)
        return 2
    n_hidden = sum(n.startswith("hidden/") for n in names)
    print(
        f"wrote {opts.out}: setup.sh, run_autograder, "
        f"{next(n for n in names if n.endswith('.whl'))}, {n_hidden} hidden-case file(s). "
        "Upload it as the assignment's autograder (Gradescope: Configure Autograder -> Zip)."
    )
    return 0
