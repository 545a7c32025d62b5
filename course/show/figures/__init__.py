"""``python -m course figures``: redraw every figure in ``assets/`` from code.

Each lesson has a module here defining ``FIGURES = {"name.png": draw}``, where
``draw(path)`` writes that file.  Nothing in assets/ is drawn by hand.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from ... import lessons

ASSETS = Path(__file__).resolve().parents[3] / "assets"


def registry() -> dict:
    """file name -> draw function, over every lesson's figure module."""
    out = {}
    for m in lessons.figure_modules():  # the modules the lesson index names
        mod = importlib.import_module(f"{__name__}.{m}")
        for name, fn in getattr(mod, "FIGURES", {}).items():
            if name in out:
                raise RuntimeError(f"figure {name} is defined twice")
            out[name] = fn
    return out


def draw(names=None, outdir: Path | None = None) -> list[Path]:
    """Draw the named figures (all when None) into ``outdir`` (default assets/)."""
    outdir = Path(outdir or ASSETS)
    outdir.mkdir(parents=True, exist_ok=True)
    reg = registry()
    unknown = sorted(set(names or ()) - set(reg))
    if unknown:
        raise SystemExit(f"unknown figures {unknown}; known: {', '.join(sorted(reg))}")
    written = []
    for name in names or sorted(reg):
        reg[name](outdir / name)
        written.append(outdir / name)
        print(f"drew {outdir / name}", flush=True)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m course figures", description=__doc__.splitlines()[0]
    )
    ap.add_argument("names", nargs="*", help="figure files to draw (default: all)")
    ap.add_argument("--out", default=None, help="folder (default: assets/)")
    args = ap.parse_args(argv)
    draw(args.names or None, args.out)
    return 0
