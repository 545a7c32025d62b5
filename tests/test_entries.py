"""The course's own kernels entered on the seed boards (``course/exercises/entries.py``):
judged by the board's own cases through the entry's launch, and a wrong launch is caught."""

from dataclasses import replace

import pytest

import course
from course.exercises import entries, get
from course.grading.judging.cases import run_cases
from course.leaderboard.queue import _payload


def _results(name, board):
    spec = entries.get(name).bind(get(board))
    return run_cases(spec, None, seed=11, hidden=False, time_limit=None)


def test_histogram_tuned_passes_the_histogram_boards_cases_through_its_own_launch():
    results = _results("histogram_tuned", "histogram")
    assert len(results) >= 6 and all(r.passed for r in results), [
        (r.name, r.message) for r in results
    ]


@pytest.mark.parametrize("mutant", ["one count too many", "a channel overwritten"])
def test_a_wrong_entry_launch_is_rejected_by_the_board(monkeypatch, mutant):
    entry = entries.ENTRIES["histogram_tuned"]
    real = entry.run

    def wrong(case, args):
        real(case, args)
        if mutant == "one count too many":
            args["hist"][0, 0] = args["hist"][0, 0] + 1
        else:
            args["hist"][args["hist"].shape[0] - 1, 7] = 12345

    monkeypatch.setitem(entries.ENTRIES, "histogram_tuned", replace(entry, run=wrong))
    results = _results("histogram_tuned", "histogram")
    assert not any(r.passed for r in results)


def test_an_entry_runs_only_on_its_board_and_flash_mma_only_on_a_gpu():
    with pytest.raises(entries.EntryError, match="histogram board"):
        entries.get("histogram_tuned").bind(get("flash_attention"))
    with pytest.raises(entries.EntryError, match="no course kernel called 'nope'"):
        entries.get("nope")
    if course.MODE != "gpu":
        with pytest.raises(entries.EntryError, match="only on a GPU"):
            entries.get("flash_mma").ready()


def test_a_student_cannot_pass_a_submission_off_as_a_course_entry():
    forged = {
        "student": "s00",
        "source": "x",
        "function": "f",
        "unit": {"course_kernel": "histogram_tuned"},
    }
    assert "course_kernel" not in _payload(forged)  # stays a (malformed) unit
    # a student's row named like an entry is still a student's row: only the kind counts
    named = dict(forged, student="course:histogram_tuned", kind="student")
    assert "course_kernel" not in _payload(named)
    real = dict(forged, student="course:histogram_tuned", kind="course")
    assert _payload(real) == {"course_kernel": "histogram_tuned"}
