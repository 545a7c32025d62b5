"""The slider panel, driven from code as a user would drive it."""
import pytest

from course.measure.timing import Timing
from course.show.widgets import SliderPanel


def fake_run(calls):
    def run(threads_per_block, blocks):
        calls.append((threads_per_block, blocks))
        return Timing([1000.0 / (threads_per_block * blocks)])
    return run


def test_panel_runs_on_creation_and_on_change():
    calls = []
    p = SliderPanel({"k": fake_run(calls)}, sliders={"threads_per_block": [32, 64, 128],
                                                      "blocks": [1, 2]}, nbytes=1e6)
    assert calls == [(64, 2)] and p.image.value[:4] == b"\x89PNG"
    first = p.image.value
    p.set(threads_per_block=128)
    assert calls[-1] == (128, 2) and p.image.value != first
    assert "GB/s" in p.status.value and "simulator" in p.status.value
    p.set(threads_per_block=64)           # cached: no new launch
    assert len(calls) == 2


def test_sweep_covers_the_x_range_and_sweep_all_everything():
    calls = []
    p = SliderPanel(fake_run(calls), sliders={"threads_per_block": [32, 64, 128], "blocks": [1, 2]})
    p.sweep()
    assert {c[0] for c in calls} == {32, 64, 128}
    p.sweep_button.click()  # the button does the same (cached now)
    p.sweep_all()
    assert len(set(calls)) == 6 and p.runs == 6


def test_constraint_blocks_invalid_settings():
    calls = []
    p = SliderPanel({"k": fake_run(calls)},
                    sliders={"threads_per_block": [32, 64], "blocks": [1, 2]},
                    constraint=lambda threads_per_block, blocks:
                    "too many" if threads_per_block * blocks > 64 else None,
                    value={"threads_per_block": 32, "blocks": 1})
    p.set(threads_per_block=64, blocks=2)
    assert "Not a valid setting" in p.status.value and (64, 2) not in calls


def test_errors_show_beside_the_sliders():
    def broken(threads_per_block):
        raise RuntimeError("launch failed")
    p = SliderPanel(broken, sliders={"threads_per_block": [32, 64]})
    assert "launch failed" in p.status.value


def test_bad_arguments():
    with pytest.raises(ValueError):
        SliderPanel({}, sliders={"a": [1]})
    with pytest.raises(ValueError):
        SliderPanel(lambda a: 1.0, sliders={"a": []})
    p = SliderPanel(lambda a: 1.0, sliders={"a": [1, 2]})
    with pytest.raises(KeyError):
        p.set(b=1)
    with pytest.raises(ValueError):
        p.set(a=3)
