"""``python -m course <command>``: doctor, notebooks, bench, figures, release, grade, progress, ..."""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module, function, one-line help); each function takes the parsed args.
COMMANDS = {
    "doctor": (
        "course.platform.doctor",
        "main",
        "check the set-up: GPU or simulator, versions, fixes",
    ),
    "bench": ("course.bench.cli", "main", "time every lesson's variants (GPU, lecture sizes)"),
    "figures": ("course.show.figures", "main", "redraw the figures in assets/"),
    "release": (
        "course.grading.classroom.release",
        "main",
        "write student copies of the notebooks",
    ),
    "grade": ("course.grading.classroom.batch", "main", "grade submitted notebooks to a CSV"),
    "progress": ("course.grading.judging.progress", "main", "show which checks passed"),
    "checktimes": (
        "course.grading.classroom.solutions",
        "main",
        "time course.check on every solution",
    ),
    "validate": ("course.bench.validation", "main", "the tracer against Nsight Compute (report)"),
    "profiles": (
        "course.bench.profile_capture",
        "main",
        "capture the profiles lesson 10 shows (GPU)",
    ),
    "notebooks": (
        "course.grading.classroom.distribute",
        "notebooks_main",
        "copy the notebooks into a folder (wheel installs)",
    ),
    "colab": (
        "course.grading.classroom.distribute",
        "colab_main",
        "the README's Open-in-Colab links; a fork's Colab cells",
    ),
    "leaderboard": (
        "course.leaderboard.cli",
        "main",
        "the class leaderboard: serve, tokens, export",
    ),
    "submit": (
        "course.leaderboard.client",
        "main",
        "submit a kernel file to the class leaderboard",
    ),
    "gradescope": (
        "course.grading.classroom.gradescope",
        "main",
        "write a Gradescope autograder zip",
    ),
}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        parser = argparse.ArgumentParser(
            prog="python -m course", description="numba.cuda course tools"
        )
        sub = parser.add_subparsers(dest="command", metavar="command")
        for name, (_m, _f, help_) in COMMANDS.items():
            sub.add_parser(name, help=help_)
        if argv and argv[0] not in ("-h", "--help"):
            parser.error(f"unknown command {argv[0]!r}")
        parser.print_help()
        return 0 if argv else 2
    module, func, _ = COMMANDS[argv[0]]
    import course  # noqa: F401 - choose gpu/sim before anything imports numba

    rc = getattr(importlib.import_module(module), func)(argv[1:])
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
