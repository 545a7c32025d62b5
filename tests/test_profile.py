"""course.profile: the ncu CSV parser on real H100 output, error paths, the simulator path,
and the tracer's counts against the hardware's for the same kernels."""

import os
import stat

import numpy as np
import pytest
from conftest import REPO
from numba import cuda

import course
from course.hardware import ncu
from course.hardware.profiler import FIELDS, Profile, from_ncu

FIXTURE = REPO / "tests" / "fixtures" / "ncu" / "h100-three-kernels.csv"  # + .py: the program


def _fixture_rows():
    return [from_ncu(r) for r in ncu.parse(FIXTURE.read_text())]


def test_parser_reads_real_ncu_csv():
    raw = ncu.parse(FIXTURE.read_text())
    assert [r["kernel"] for r in raw] == ["copy_strided", "copy_strided", "shared_conflict"]
    assert raw[0]["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 131072.0  # "131,072"
    assert raw[2]["launch__block_size"] == 1024.0
    rows = _fixture_rows()
    assert [r["ld_sectors_per_request"] for r in rows] == [4.0, 8.0, 4.0]
    assert rows[2]["shared_ld_conflicts"] == 1016228.0
    assert rows[2]["shared_ld_wavefronts_per_request"] == pytest.approx(32.0, abs=0.05)
    assert rows[0]["shared_ld_wavefronts_per_request"] is None  # no shared loads
    assert rows[2]["top_stalls"][0][0] == "short_scoreboard" and len(rows[2]["top_stalls"]) == 3
    # "selected" means issuing and is left out; "not_selected" is a stall and counts
    assert [n for n, _v in rows[1]["top_stalls"]] == [
        "long_scoreboard",
        "not_selected",
        "mio_throttle",
    ]
    assert rows[0]["duration_us"] == pytest.approx(5.472)
    assert rows[0]["occupancy_limiter"] == "none (100 % theoretical)"


def test_parser_ignores_what_is_not_csv():
    assert ncu.parse("==PROF== Connected\n==ERROR== nothing\n") == []
    assert ncu.parse("") == []


def test_profile_text_html_and_json(tmp_path):
    p = Profile(_fixture_rows(), "ncu", "NVIDIA H100 80GB HBM3", "2026-11-23", 3.2)
    text = repr(p)
    for words, metric, _t in FIELDS.values():
        if metric != "(tracer only)":
            assert words in text and metric in text
    assert "(simulated)" not in text and "needs a GPU" not in text
    assert "l1tex__data_bank_conflicts" in p._repr_html_()
    q = Profile.load(p.save(tmp_path / "p.json"))
    assert q.rows == p.rows and q.device == p.device and q.source == "ncu"
    assert course.profile.load == Profile.load


# --- errors a student meets: a clear sentence, no traceback ------------------------------


def _fake_ncu(tmp_path, monkeypatch, script):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "payload.pkl"


@pytest.mark.parametrize(
    "script, words",
    [
        (
            'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission"; exit 1',
            ["ERR_NVGPUCTRPERM", "NVreg_RestrictProfilingToAdminUsers=0"],
        ),
        ('echo "==WARNING== No kernels were profiled."; exit 0', ["launched no kernel"]),
        ('echo "==ERROR== something broke"; exit 3', ["ncu failed (exit 3)", "something broke"]),
        ("sleep 5", ["did not finish within 1 s"]),
    ],
)
def test_ncu_errors_are_explained(tmp_path, monkeypatch, script, words):
    payload = _fake_ncu(tmp_path, monkeypatch, script)
    with pytest.raises(ncu.NcuError) as err:
        ncu.run(payload, timeout=1, launches=1, clock_control="none")
    for w in words:
        assert w in str(err.value)


def test_missing_ncu_is_explained(monkeypatch):
    monkeypatch.setattr(ncu, "find", lambda: None)
    with pytest.raises(ncu.NcuError, match="was not found.*course.sim.trace"):
        ncu.run(REPO / "x.pkl", timeout=1, launches=1, clock_control="none")


def test_no_kernel_is_a_profile_with_an_error_not_an_exception():
    p = course.profile(lambda: None)
    assert p.error and "no kernel" in repr(p) and not p.rows


# --- the simulator path: the tracer's counts, marked simulated ---------------------------


def _fixture_kernels():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ncu_fixture", FIXTURE.with_suffix(".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.copy_strided, mod.shared_conflict


copy_strided, shared_conflict = _fixture_kernels()


@pytest.mark.skipif(course.MODE != "sim", reason="the tracer path")
def test_simulator_profile_matches_the_h100_counts():
    """The same kernels as the fixture (tests/fixtures/ncu/h100-three-kernels.py), smaller
    grids: the traced sectors per request and wavefronts per request equal the measured."""
    hw = _fixture_rows()
    x = np.arange(4096, dtype=np.float32)
    y = np.zeros(4096, np.float32)
    runs = [
        course.profile(copy_strided[4, 256], x, y, 1),
        course.profile(copy_strided[4, 256], x, y, 2),
        course.profile(shared_conflict[1, 1024], x, y, 32),
    ]
    for p, h in zip(runs, hw):
        r = p.rows[0]
        assert p.source == "tracer" and "(simulated)" in repr(p) and "needs a GPU" in repr(p)
        for key in ("ld_sectors_per_request", "st_sectors_per_request"):
            assert r[key] == h[key], (r["kernel"], key)
        if h["shared_ld_wavefronts_per_request"]:
            assert r["shared_ld_wavefronts_per_request"] == round(
                h["shared_ld_wavefronts_per_request"]
            )
    assert runs[0].status("duration_us") == "needs a GPU"
    assert runs[0].status("ld_sectors_per_request") == "simulated"


@pytest.mark.gpu
def test_gpu_profile_of_a_launch_is_quick_and_right():
    import time

    x = cuda.to_device(np.arange(1 << 22, dtype=np.float32))
    y = cuda.device_array(1 << 22, np.float32)
    t0 = time.perf_counter()
    p = course.profile(copy_strided[(1 << 22) // 256 // 2, 256], x, y, 2)
    assert not p.error, p.error
    assert time.perf_counter() - t0 < 30
    assert p.rows[0]["ld_sectors_per_request"] == 8.0 and p.source == "ncu"
