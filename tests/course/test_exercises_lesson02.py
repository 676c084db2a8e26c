"""Lesson 02's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["02.1", "02.2", "02.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_batch_shard_shape():
    assert check("02.1", (8, 10)).ok
    all_devices = check("02.1", (2, 10))
    assert all_devices.status == "not yet" and "'data'" in all_devices.message
    assert "features" in check("02.1", (8, 5)).message


def test_kernel_columns():
    assert check("02.2", (None, "model")).ok
    rows = check("02.2", ("model", None))
    assert rows.status == "not yet" and "rows" in rows.message
    data = check("02.2", (None, "data"))
    assert data.status == "not yet" and "'model'" in data.message
    assert "tuple" in check("02.2", "model").message


def test_gradient_axis():
    assert check("02.3", "data").ok
    model = check("02.3", "model")
    assert model.status == "not yet" and "same sub-batch" in model.message
    assert "default" in check("02.3", "batch").message
