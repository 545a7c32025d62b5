"""Run notebooks top to bottom on this machine's GPU, a few at a time (nbclient).

    python instructor/gpu/notebooks.py OUT_DIR [NAME ...] [--parallel 4] [--timeout 240]

Each notebook runs in its own kernel from ``notebooks/``; the executed copy is kept under
``OUT_DIR/executed/`` and one line per notebook (seconds, cells, first error) is printed and
written to ``OUT_DIR/notebooks-gpu.md``.  A notebook past ``--timeout`` counts as failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_one(path: Path, out: Path, timeout: int) -> tuple[str, float, str]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    t0 = time.time()
    try:
        client.execute()
        verdict = "ok"
    except Exception as exc:  # the first failing cell, in a line
        verdict = f"FAILED: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"
    secs = time.time() - t0
    (out / "executed").mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out / "executed" / path.name)
    return path.stem, secs, verdict


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=240)
    opts = ap.parse_args()
    paths = sorted((REPO / "notebooks").glob("*.ipynb"))
    if opts.names:
        paths = [p for p in paths if any(p.stem.startswith(n) for n in opts.names)]
    try:
        smi = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        gpu = subprocess.run(smi, capture_output=True, text=True).stdout.splitlines()
    except FileNotFoundError:  # no driver: the notebooks ran in the simulator
        gpu = ["no GPU (simulator)"]
    rows = []
    with cf.ThreadPoolExecutor(opts.parallel) as pool:
        futs = [pool.submit(run_one, p, opts.out, opts.timeout) for p in paths]
        for f in cf.as_completed(futs):
            name, secs, verdict = f.result()
            print(f"{name}: {secs:.1f} s {verdict}", flush=True)
            rows.append((name, secs, verdict))
    rows.sort()
    lines = [
        f"# Notebooks top to bottom on {gpu[0] if gpu else 'an unnamed GPU'} "
        f"({datetime.date.today()}, {opts.parallel} at a time)",
        "",
        "| notebook | seconds | result |",
        "|---|---:|---|",
        *(f"| {n} | {s:.1f} | {v} |" for n, s, v in rows),
    ]
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "notebooks-gpu.md").write_text("\n".join(lines) + "\n")
    return 0 if all(v == "ok" for _, _, v in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
