"""Timing (simulator wall time, marked), perf arithmetic, reports, tables, plots."""

import math

import pytest

from course.bench import Report
from course.measure import perf, tables
from course.measure.timing import Timing, benchmark
from course.show import plots


def test_benchmark_in_simulator_is_marked_and_warms_up():
    calls = []
    t = benchmark(lambda: calls.append(1), repeat=4, warmup=2, label="noop")
    assert len(calls) == 6 and len(t.times_ms) == 4
    assert t.simulated and "not GPU speed" in repr(t)
    assert t.min_ms <= t.median_ms <= t.max_ms


def test_benchmark_rotates_inputs():
    seen = []
    benchmark(lambda a: seen.append(a), rotate=[(1,), (2,), (3,)], repeat=3, warmup=0)
    assert seen == [1, 2, 3]


def test_benchmark_rejects_bad_repeat():
    with pytest.raises(ValueError):
        benchmark(lambda: None, repeat=0)


def test_rates():
    t = Timing([2.0, 1.0, 3.0])
    assert t.median_ms == 2.0
    assert math.isclose(t.gbps(4e9), 2000.0)
    assert math.isclose(t.gflops(2e9), 1000.0)
    assert math.isclose(perf.gbps(3e9, 1.0), 3000.0)
    assert math.isclose(perf.tflops(5e12, 1000.0), 5.0)
    c = {"copy_gbps": 1000.0, "fp32_tflops": 10.0}
    assert math.isclose(perf.floor_ms(nbytes=1e9, ceilings=c), 1.0)
    assert math.isclose(perf.floor_ms(nbytes=1e6, flops=1e11, ceilings=c), 10.0)
    assert math.isclose(perf.percent(50, 200), 25.0) and math.isnan(perf.percent(1, None))


def test_no_ceilings_or_peers_in_the_simulator():
    c = perf.measured_ceilings()
    assert c["copy_gbps"] is None and perf.peer("torch") is None and perf.peer("cupy") is None
    assert math.isnan(perf.floor_ms(nbytes=1e9))


def test_report_markdown_and_files(tmp_path):
    r = Report("demo", "Demo lesson", quiet=True)
    r.ceilings = {"device": "x", "copy_gbps": 1000.0, "fp32_tflops": 10.0, "measured": "now"}
    r.add("v1", Timing([2.0]), nbytes=1e9, size="N=1")
    r.add("lecture v1", Timing([4.0]), nbytes=1e9, kind="lecture")
    assert r.add_peer("torch", "torch.x", lambda: None) is None  # skipped cleanly
    md = r.markdown()
    assert "| v1 | numba | N=1 | 2 |" in md and "torch not available" in md
    assert "500" in md and "50" in md  # 500 GB/s = 50 % of copy
    paths = r.save(tmp_path)
    assert [p.suffix for p in paths] == [".md", ".json", ".png"] and all(p.exists() for p in paths)


def test_bench_vector_add_runs_in_simulator(tmp_path):
    from course.bench import run

    paths = run(["vector_add"], tmp_path)
    text = paths[0].read_text()
    assert "grid_stride" in text and "lecture one_thread" in text and "GT 750M" in text


def test_speedup_table():
    t = tables.speedup_table(
        {"a": 4.0, "b": 2.0, "c": 1.0}, nbytes=4e6, lecture={"a": {"G80": 8.0}}
    )
    md = t.markdown()
    assert "| c | 1 | 4 | 2 | 4 | - |" in md and "G80" in md
    with pytest.raises(ValueError):
        t.add(1, 2)
    assert "<table class='course-table'>" in t._repr_html_()


def test_plots_draw_and_stamp_simulator():
    fig, ax = plots.figure()
    plots.sweep([1, 2, 4], {"a": [1.0, None, 3.0]}, xlabel="x", ylabel="y", axes=ax, highlight=4)
    assert "simulator" in ax.get_xlabel()
    assert plots.png_bytes(fig)[:4] == b"\x89PNG"
    fig, ax = plots.figure()
    plots.time_bars(["a", "b"], [1.0, 2.0], floors=[0.5, None], axes=ax, title="t")
    assert ax.get_title() == "t"


def test_benchmark_rejects_bad_batch():
    with pytest.raises(ValueError):
        benchmark(lambda: None, batch=0)


def test_bench_rows_name_their_low_occupancy_instead_of_printing_it(capsys):
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    from course.bench import Report
    from course.measure.timing import benchmark

    rep = Report("x", quiet=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NumbaPerformanceWarning)
        rep.caught = caught
        warnings.warn(
            NumbaPerformanceWarning(
                "Grid size 3 will likely result in GPU under-utilization due to low occupancy."
            ),
            stacklevel=1,
        )
        row = rep.add("one block", benchmark(lambda: None, repeat=1, warmup=0), note="lecture")
        plain = rep.add("big grid", benchmark(lambda: None, repeat=1, warmup=0))
    assert "grid 3 on purpose" in row["note"] and row["note"].startswith("lecture")
    assert plain["note"] == ""
    assert "Grid size" not in capsys.readouterr().err


def test_batching_fits_the_calls_the_host_can_enqueue_during_the_hold(monkeypatch):
    """Short calls go behind the 2 ms hold kernel as many at a time as the host enqueues
    while it lasts (a multi-launch call can take the host longer than the GPU); calls the
    hold cannot cover, or long ones, are timed alone."""
    from types import SimpleNamespace

    from course.measure import timing

    clock = [0.0]  # the host's time, moved by the calls themselves (no wall clock, no load)

    def takes(ms):
        return lambda: clock.__setitem__(0, clock[0] + ms / 1e3)

    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    fake = SimpleNamespace(synchronize=lambda: None)
    monkeypatch.setattr(timing, "events_ms", lambda cuda, fn, args, batch, hold: 0.1)
    assert timing._batching(fake, takes(0), ()) == (timing.BATCH, True)
    assert timing._batching(fake, takes(0.5), ())[0] == 3  # 0.8 x 2 ms / 0.5 ms
    assert timing._batching(fake, takes(3), ()) == (1, False)
    monkeypatch.setattr(timing, "events_ms", lambda cuda, fn, args, batch, hold: 6.0)
    assert timing._batching(fake, lambda: None, ()) == (1, False)
