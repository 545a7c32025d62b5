"""Command line of ``python -m course bench [LESSON ...] [--out DIR]``."""

from __future__ import annotations

import argparse

from . import lessons, run


def main(argv=None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["sliders"]:  # every slider panel's grid (bench/sliders.py)
        from . import sliders

        return sliders.main(argv[1:])
    if argv[:1] == ["grading"] and len(argv) > 1:  # a class of its own (bench/grading.py)
        from . import grading

        return grading.main(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m course bench", description="time every lesson's variants in one run"
    )
    ap.add_argument(
        "lessons", nargs="*", help=f"lessons to run (default all: {', '.join(lessons())})"
    )
    ap.add_argument(
        "--out", default=None, help="folder for the reports (default assets/benchmarks)"
    )
    ap.add_argument(
        "--recount",
        nargs="+",
        metavar="JSON",
        help="redo the FLOP counts of saved attention or faces reports (no GPU needed)",
    )
    args = ap.parse_args(argv)
    if args.recount:
        from pathlib import Path

        from . import Report, attention, faces

        for path in map(Path, args.recount):
            rep = Report.load(path)
            recount = faces.recount if path.name.startswith("faces-") else attention.recount
            print(f"{path.name}: {recount(rep)} rows recounted")
            for p in rep.save(path.parent):
                print(p)
        return 0
    for p in run(args.lessons, args.out):
        print(p)
    return 0
