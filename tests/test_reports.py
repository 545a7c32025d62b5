"""No committed benchmark report claims more than the hardware can do: every CUDA-core row's
TFLOP/s is at most the measured FP32 rate and every row's GB/s at most the measured copy
bandwidth of the same run (2 % for the noise of measuring the ceiling itself).  Tensor-core
rows (wmma, and the peers that use tensor cores) are bounded by a peak the run does not
measure and are left out of the FLOP test."""
import json

import pytest

from conftest import REPO

REPORTS = sorted(p for p in (REPO / "assets" / "benchmarks").glob("*-20*.json")
                 if not p.name.startswith("notebook-memory-"))   # no timings in those
SLACK = 1.02


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_no_row_beats_the_measured_ceiling(path):
    data = json.loads(path.read_text())
    c = data["ceilings"]
    for r in data["rows"]:
        if r.get("gbps") and c.get("copy_gbps") and r["kind"] == "numba":
            assert r["gbps"] <= c["copy_gbps"] * SLACK, (r["name"], r["gbps"], c["copy_gbps"])
        tensor_cores = "wmma" in r["name"] or r["kind"] != "numba"
        if r.get("tflops") and c.get("fp32_tflops") and not tensor_cores:
            assert r["tflops"] <= c["fp32_tflops"] * SLACK, (r["name"], r["tflops"], c)


def test_the_reports_are_there():
    assert len(REPORTS) >= 14
