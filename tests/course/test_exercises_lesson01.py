"""Lesson 01's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest
from keras import distribution

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["01.1", "01.2", "01.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_device_at_coordinate():
    assert check("01.1", "cpu:5").ok
    wrong = check("01.1", "cpu:2")
    assert wrong.status == "not yet" and "start at 0" in wrong.message
    assert "row by row" in check("01.1", "cpu:6").message
    assert "i * 2 + j" in check("01.1", "cpu:7").message
    assert "string" in check("01.1", 5).message


def test_four_by_two_mesh():
    devices = distribution.list_devices()
    assert check("01.2", distribution.DeviceMesh((4, 2), ("data", "model"), devices=devices)).ok
    swapped = check("01.2", distribution.DeviceMesh((2, 4), ("data", "model"), devices=devices))
    assert swapped.status == "not yet" and "2 x 4" in swapped.message
    names = check("01.2", distribution.DeviceMesh((4, 2), ("model", "data"), devices=devices))
    assert names.status == "not yet" and "('data', 'model')" in names.message
    shuffled = check("01.2", distribution.DeviceMesh((4, 2), ("data", "model"), devices=devices[::-1]))
    assert shuffled.status == "not yet" and "order" in shuffled.message
    assert "DeviceMesh" in check("01.2", (4, 2)).message


def test_three_d_shapes():
    assert check("01.3", [(2, 1, 4), (2, 2, 2), (2, 4, 1)]).ok
    assert check("01.3", [(2, 2, 2), (2, 4, 1), (2, 1, 4)]).ok
    missing = check("01.3", [(2, 2, 2), (2, 1, 4)])
    assert missing.status == "not yet" and "1 shape is missing" in missing.message
    assert "Axes of size 1" in missing.message and "Sizes of size" not in missing.message
    extra = check("01.3", [(2, 1, 4), (2, 2, 2), (2, 4, 1), (2, 2, 4)])
    assert extra.status == "not yet" and "(2, 2, 4)" in extra.message
