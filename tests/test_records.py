"""The committed GPU records of the slider panels (assets/sliders/): every panel has one,
each names its card and date, and ``python -m course bench sliders --panel NAME`` records
just the panels it names."""

import json

from course.bench import sliders as rec
from course.show import records

# Panels whose GPU record the lead has still to commit (their command: the report).
# Once a record is committed this test fails until its panel leaves this set.
PENDING = {"08_flash_attention/N_d", "09_histogram/two_phase"}


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
