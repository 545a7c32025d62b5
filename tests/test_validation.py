"""The tracer stays true to the hardware: each lesson kernel of the committed validation
report (assets/profiles/validation-*.json, measured by Nsight Compute on an H100) is traced
again here, and its counts must equal the measured ones. A tracer change that drifts from
the hardware fails this test."""

import json

import pytest
from conftest import REPO

import course
from course.bench.validation import counted
from course.hardware.validation import MATCHED, matches

REPORTS = sorted((REPO / "assets" / "profiles").glob("validation-*.json"))
pytestmark = pytest.mark.skipif(course.MODE != "sim", reason="traces in the simulator")


def test_there_is_a_committed_hardware_report():
    assert REPORTS, "no assets/profiles/validation-*.json"
    data = json.loads(REPORTS[-1].read_text())
    assert data["device"].startswith("NVIDIA") and len(data["rows"]) >= 12
    lessons = {l for r in data["rows"] for l in r["lesson"].split("/")}
    assert {"01", "02", "03", "04", "06", "07", "09"} <= lessons


@pytest.mark.parametrize(
    "row", json.loads(REPORTS[-1].read_text())["rows"] if REPORTS else [], ids=lambda r: r["case"]
)
def test_traced_counts_equal_the_measured(row):
    traced = counted(row["case"])
    for key in MATCHED:
        assert matches(row["measured"].get(key), traced.get(key)), (
            key,
            row["measured"].get(key),
            traced.get(key),
        )


def test_matches_is_strict():
    assert matches(4.0, 4.0) and not matches(4.0, 5.0) and not matches(8.0, 4.0)
    assert matches(None, None) and not matches(None, 3.0) and matches(0.0, None)
