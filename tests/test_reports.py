"""No committed benchmark report claims more than the hardware can do: every CUDA-core row's
TFLOP/s is at most the measured FP32 rate and every row's GB/s at most the measured copy
bandwidth of the same run (2 % for the noise of measuring the ceiling itself).  Tensor-core
rows (wmma, mma, and the peers that use tensor cores) are bounded by a peak the run does not
measure: they are held to the datasheet's dense float16 peak of the H100/H200 SXM instead."""

import json

import pytest
from conftest import REPO

REPORTS = sorted(
    p
    for p in (REPO / "assets" / "benchmarks").glob("*-20*.json")
    if not p.name.startswith(
        (
            "notebook-memory-",  # no timings in those
            "matmul-shapes-sweep",
            "matmul-v6-sweep",
        )
    )
)  # raw sweeps: below
SWEEPS = sorted(
    p
    for pattern in ("matmul-shapes-sweep*.json", "matmul-v6-sweep*.json")
    for p in (REPO / "assets" / "benchmarks").glob(pattern)
)
FP32_PEAK = 67.0  # TFLOP/s, H100 SXM datasheet (CUDA cores, FP32); H200 the same
SLACK = 1.02
FP16_DENSE_PEAK = 989.4  # TFLOP/s, H100 and H200 SXM datasheets (tensor cores, no sparsity)


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_no_row_beats_the_measured_ceiling(path):
    data = json.loads(path.read_text())
    c = data["ceilings"]
    for r in data["rows"]:
        if r.get("gbps") and c.get("copy_gbps") and r["kind"] == "numba":
            assert r["gbps"] <= c["copy_gbps"] * SLACK, (r["name"], r["gbps"], c["copy_gbps"])
        tensor_cores = "mma" in r["name"] or r["kind"] != "numba"  # wmma and mma
        if r.get("tflops") and c.get("fp32_tflops") and not tensor_cores:
            assert r["tflops"] <= c["fp32_tflops"] * SLACK, (r["name"], r["tflops"], c)
        if r.get("tflops"):
            assert r["tflops"] <= FP16_DENSE_PEAK, (r["name"], r["tflops"])


def test_the_reports_are_there():
    assert len(REPORTS) >= 14


def test_covariance_rows_count_only_the_work_their_kernel_performs():
    """A lower-triangle kernel is credited with the entries it computes, not the full product."""
    from course.bench.faces_summary import KINDS as _KINDS
    from course.kernels.covariance import flops_performed

    reports = [p for p in REPORTS if p.name.startswith("faces-")]
    assert reports
    for path in reports:
        for r in json.loads(path.read_text())["rows"]:
            kind = next((k for prefix, k in _KINDS if r["name"].startswith(prefix)), None)
            if kind is None or r["kind"] != "numba" or not r.get("tflops"):
                continue
            m, n = (int(v.split("=")[1].replace(",", "")) for v in r["size"].split()[:2])
            want = flops_performed(kind, m, n) / (r["median_ms"] * 1e-3) / 1e12
            assert abs(r["tflops"] - want) <= 1e-6 * want, (path.name, r["name"])


def test_flops_performed_by_brute_force():
    """Count the entries each covariance kernel computes by walking its threads (small n)."""
    import math

    from course.kernels.covariance import REGISTER_TILES, SYRK_DEFAULT, flops_performed

    m = 3
    for n in (1, 5, 64, 70, 129):
        assert flops_performed("naive", m, n) == 2 * m * n * n
        tri = sum(1 for y in range(n) for x in range(n) if x <= y)
        assert flops_performed("symmetric", m, n) == flops_performed("tiled", m, n) == 2 * m * tri
        for kind, blk in (
            ("register", REGISTER_TILES[4][0]),
            ("register8", REGISTER_TILES[8][0]),
            ("syrk", SYRK_DEFAULT[0]),
        ):
            t = math.ceil(n / blk)
            entries = sum(
                1
                for by in range(t)
                for bx in range(by + 1)
                for y in range(by * blk, min(n, by * blk + blk))
                for x in range(bx * blk, min(n, bx * blk + blk))
            )
            assert flops_performed(kind, m, n) == 2 * m * entries


def _sweep_times(data: dict):
    """(shape name, setting, ms) of a raw matmul sweep (both layouts the sweeps use)."""
    shapes = data.get("shapes", data)
    for name, entry in shapes.items():
        if not isinstance(entry, dict):
            continue
        for key, val in entry.items():
            if key.endswith("_err") or key in ("mkn", "err"):  # relative errors, the shape
                continue
            if isinstance(val, dict):
                yield from (
                    (name, f"{key} {k}", v)
                    for k, v in val.items()
                    if k not in ("err", "config") and isinstance(v, (int, float))
                )
            elif isinstance(val, (int, float)) and key != "mkn":
                yield name, key, val


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_no_sweep_time_beats_the_fp32_peak(path):
    """The per-shape matmul sweeps (raw times) claim no more than the CUDA cores can do."""
    mkn = {}
    for p in SWEEPS:
        for name, entry in json.loads(p.read_text()).get("shapes", {}).items():
            if isinstance(entry, dict) and "mkn" in entry:
                mkn[name] = entry["mkn"]
    times = list(_sweep_times(json.loads(path.read_text())))
    assert times
    for name, setting, ms in times:
        m, k, n = mkn[name]
        assert 2 * m * k * n / (ms * 1e-3) / 1e12 <= FP32_PEAK, (name, setting, ms)
