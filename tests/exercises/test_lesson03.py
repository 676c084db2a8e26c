"""Lesson 03's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["03.1", "03.2", "03.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_rows_and_columns():
    assert check("03.1", {"cpu:1"}).ok
    assert check("03.1", ["cpu:1"]).ok
    columns = check("03.1", {"cpu:1", "cpu:5"})
    assert columns.status == "not yet" and "data row 0" in columns.message
    rows = check("03.1", {"cpu:0", "cpu:1", "cpu:2", "cpu:3"})
    assert rows.status == "not yet" and "quarter" in rows.message
    assert "set of device strings" in check("03.1", "cpu:1").message
    assert "(0, 1)" in check("03.1", {"cpu:4"}).message


def test_d2_shard_shape_4x2():
    assert check("03.2", (64, 10)).ok
    assert "2 x 4 mesh" in check("03.2", (32, 10)).message
    assert "first dimension" in check("03.2", (128, 5)).message
    assert check("03.2", (128, 10)).status == "not yet"
    assert "tuple" in check("03.2", 64).message


def test_fewest_weight_bytes():
    assert check("03.3", (2, 4)).ok
    wide = check("03.3", (1, 8))
    assert wide.status == "not yet" and "size 1" in wide.message
    assert "fewer" in check("03.3", (4, 2)).message
    assert "2-D shapes" in check("03.3", (2, 2)).message
