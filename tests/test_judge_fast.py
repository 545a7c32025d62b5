"""The judge's two whole-buffer checks take shortcuts at a GPU's sizes (2^26 elements: no
mask or temporary the size of the buffer): the band past a 1-D array is its tail, and an
input that is bit for bit what was sent is unchanged.  Their sentences must be exactly the
plain definitions', on fresh random buffers with every kind of change."""

import numpy as np
import pytest

from course.grading.judging import judge as J


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.float16])
def test_the_guard_band_of_a_vector_is_judged_as_the_plain_definition(dtype):
    rng = np.random.default_rng(7)
    n = 1001
    for trial in range(40):
        full = np.full(n + J.GUARD, J.guard_value(dtype), dtype)
        full[:n] = rng.integers(0, 100, n).astype(dtype)
        if trial % 3:  # a write past the end, somewhere in the band (or several)
            for k in rng.integers(n, n + J.GUARD, 1 + trial % 4):
                full[k] = dtype(1)
        shape = (n - trial % 2,)  # also a shape one short of the written part
        assert J._guard_message("y", full, shape) == J._guard_by_mask("y", full, shape)


def test_the_guard_band_of_a_matrix_is_unchanged():
    rng = np.random.default_rng(8)
    full = np.full((13 + J.GUARD_2D, 9 + J.GUARD_2D), J.guard_value(np.float32), np.float32)
    full[:13, :9] = rng.random((13, 9))
    assert J._guard_message("C", full, (13, 9)) is None
    full[3, 10] = 1.0
    assert J._guard_message("C", full, (13, 9)) == J._guard_by_mask("C", full, (13, 9))
    assert "C[(3, 10)]" in J._guard_message("C", full, (13, 9))


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, np.int64, np.uint8, np.complex64, np.complex128]
)
def test_a_changed_input_is_found_as_the_plain_definition_finds_it(dtype):
    rng = np.random.default_rng(9)
    for trial in range(30):
        before = (rng.random((37, 11)) * 100).astype(dtype)
        if np.dtype(dtype).kind == "f":
            before[rng.integers(0, 37, 3), rng.integers(0, 11, 3)] = np.nan  # NaN stays NaN
            before[0, 0] = 0.0
        after = before.copy()
        kind = trial % 5
        if kind == 1:
            after[rng.integers(0, 37), rng.integers(0, 11)] += 1
        elif kind == 2 and np.dtype(dtype).kind == "f":
            after[0, 0] = -0.0  # equal as numbers: not a change, though the bits differ
        elif kind == 3 and np.dtype(dtype).kind == "f":
            after[rng.integers(0, 37), 5] = np.nan  # a number became NaN
        elif kind == 4:  # a non-contiguous view, as the judge slices a guarded buffer
            big = np.zeros((40, 14), dtype)
            big[:37, :11] = after
            after = big[:37, :11]
        assert J._changed_input_message("x", before, after) == J._changed_by_value(
            "x", before, after
        )


def test_a_change_in_a_non_contiguous_view_is_not_missed():
    before = np.arange(60, dtype=np.float32).reshape(6, 10)
    big = np.zeros((8, 13), np.float32)
    big[:6, :10] = before
    big[5, 9] = -1
    assert "x[(5, 9)] was 59, now -1" in J._changed_input_message("x", before, big[:6, :10])


def test_a_timed_launchs_buffers_are_sent_without_copies_and_stay_as_they_were():
    """``Prepared.buffers(fresh=False)`` (what a measured launch sends): the unguarded inputs
    themselves, read-only, equal to the fresh buffers; outputs still fresh poison."""
    rng = np.random.default_rng(3)
    x, y = rng.random(1001).astype(np.float32), rng.random(1001).astype(np.float32)
    prep = J.Prepared(
        {"x": x, "y": y, "n": 1001}, {"y": x + y}, {"z": ((1001,), np.float32)}, guard=False
    )
    sent, fresh = prep.buffers(fresh=False), prep.buffers()
    assert np.shares_memory(sent["x"], x) and np.shares_memory(sent["y"], y)
    assert not sent["x"].flags.writeable and not sent["y"].flags.writeable
    for name in fresh:
        assert np.array_equal(sent[name], fresh[name], equal_nan=True)
    assert np.isnan(sent["z"]).all() and sent["z"].flags.writeable
    with pytest.raises(ValueError):
        sent["y"][0] = 0  # nothing here can change what the judge judges against
    guarded_prep = J.Prepared({"x": x}, {}, {}, guard=True)
    assert not np.shares_memory(guarded_prep.buffers(fresh=False)["x"], x)  # bands: a copy
