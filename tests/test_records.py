"""The committed GPU records of the slider panels (assets/sliders/): every panel has one,
each names its card and date, and ``python -m course bench sliders --panel NAME`` records
just the panels it names."""

import json

from course.bench import sliders as rec
from course.show import records

# Panels whose GPU record the lead has still to commit (their command: the report).
# Once a record is committed this test fails until its panel leaves this set.
PENDING: set[str] = set()  # every panel is recorded (2026-11-28, H200)


def test_every_panel_has_a_committed_gpu_record():
    panels = rec.panels()
    assert PENDING <= set(panels)
    for pid in panels:
        found = records.load(pid)
        if pid in PENDING:
            assert found is None, f"{pid} is recorded now: take it out of PENDING"
            continue
        assert found is not None, f"{pid}: no GPU record under assets/sliders/"
        assert found.device.startswith("NVIDIA") and len(found.date) == 10, found.label
        assert found.label == f"recorded on {found.device}, {found.date}"
        assert found.command.startswith(rec.COMMAND) and found.command.endswith(pid)
        for point in found.points:
            for row in point["results"].values():
                assert row["median_ms"] > 0 and row["n"] >= 1, (pid, point["params"])


def test_each_record_file_is_named_after_its_card_and_date():
    for path in sorted(records.folder().glob("*.json")):
        d = json.loads(path.read_text())
        assert path.name == (
            f"{records.slug(d['panel'])}--{records.slug(d['device'])}-{d['date']}.json"
        )


def test_panel_option_records_just_the_named_panels(tmp_path, capsys):
    assert rec.main(["--panel", "no/such/panel", "--dry-run", "--out", str(tmp_path)]) == 2
    assert "unknown panel" in capsys.readouterr().err
    assert rec.main(["--panel", "03_window_average/variants"]) == 2  # no GPU: no record
    code = rec.main(["--panel", "03_window_average/variants", "--dry-run", "--out", str(tmp_path)])
    assert code == 0
    written = [p.name for p in tmp_path.iterdir()]
    assert len(written) == 1 and written[0].startswith("03_window_average-variants--simulator")


def test_a_setting_too_slow_to_redraw_on_a_gpu_is_shown_from_the_record(monkeypatch):
    """On a GPU every slider position redraws within 2 s: 07's chunk_size 2 (12.8 s a launch
    on the H200) and 4 come from the record, with a sentence; 8 runs (two launches)."""
    from course.measure import perf
    from course.measure.timing import Timing
    from course.platform import runtime
    from course.show.widgets import SliderPanel

    monkeypatch.setattr(runtime, "MODE", "gpu")
    monkeypatch.setattr(perf, "measured_ceilings", lambda: {})
    ran = []

    def run(chunk_size):
        ran.append(chunk_size)
        return Timing([700.0])

    p = SliderPanel(
        {"shared_covariance_kernel": run},
        {"chunk_size": [2, 4, 8, 16, 32]},
        value={"chunk_size": 8},
        record="07_covariance_pca/chunk_size",
        runs=2,
    )
    assert ran == [8] and "700 ms (record: 794.7 ms)" in p.status.value
    assert "shows the record" not in p.status.value
    p.set(chunk_size=2)
    assert ran == [8], "a 12.8 s launch was run from the slider"
    said = p.status.value
    assert "12.8 s a launch on NVIDIA H200" in said and "shows the record of 2026-11-28" in said
    assert "1.276e+04 ms" in said and "recorded on NVIDIA H200, 2026-11-28" in said
    p.set(chunk_size=4)
    p.set(chunk_size=32)
    assert ran == [8, 32]
    fast = SliderPanel(
        {"k": run},
        {"chunk_size": [2, 8]},
        value={"chunk_size": 8},
        record="07_covariance_pca/chunk_size",
        runs=2,
        budget_s=60,
    )
    fast.set(chunk_size=2)  # a budget it fits: it runs
    assert ran[-1] == 2


def test_every_recorded_setting_redraws_within_the_budget_or_from_the_record():
    """What each committed record says of its notebook panel on a GPU: the settings that
    would take over 2 s at 23 launches (course.benchmark's default) are the ones the panel
    takes from its record (07's are run twice, 06's REPEAT + WARMUP = 12 times)."""
    runs = {
        "07_covariance_pca/chunk_size": 2,
        "06_centering_coalescing/threads_per_block": 12,
        "06_centering_coalescing/2d": 12,
    }
    slow = {}
    for pid in rec.panels():
        found = records.load(pid)
        for point in found.points if found else []:
            ms = sum(r["median_ms"] for r in point["results"].values())
            if ms * runs.get(pid, 23) > 2000:
                slow.setdefault(pid, []).append(point["params"])
    assert slow == {"07_covariance_pca/chunk_size": [{"chunk_size": 2}, {"chunk_size": 4}]}
