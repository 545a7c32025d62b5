"""Command line of ``python -m course bench [LESSON ...] [--out DIR]``."""
from __future__ import annotations

import argparse

from . import lessons, run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course bench",
                                 description="time every lesson's variants in one run")
    ap.add_argument("lessons", nargs="*", help=f"lessons to run (default all: {', '.join(lessons())})")
    ap.add_argument("--out", default=None, help="folder for the reports (default assets/benchmarks)")
    args = ap.parse_args(argv)
    for p in run(args.lessons, args.out):
        print(p)
    return 0
