"""Lesson 06 checkers: right answers pass, plausible wrong answers get a hint, `...` is not attempted."""

import pytest

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["06.1", "06.2", "06.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_device_counts_right():
    assert check("06.1", (2, 8)).ok
    assert check("06.1", [2, 8]).ok


@pytest.mark.parametrize("answer, hint", [
    ((8, 2), "Swapped"),
    ((2, 2), "every process"),
    ((4, 8), "same number"),
    ("two", "same number"),
])
def test_device_counts_wrong(answer, hint):
    verdict = check("06.1", answer)
    assert verdict.status == "not yet"
    assert hint in verdict.message


def test_rows_of_process_one_right():
    assert check("06.2", (32, 64)).ok
    assert check("06.2", slice(32, 64)).ok


@pytest.mark.parametrize("answer, hint", [
    ((0, 32), "process 0's rows"),
    ((0, 64), "feeds only its part"),
    ((16, 32), "batch of 64"),
    (32, "(start, stop)"),
])
def test_rows_of_process_one_wrong(answer, hint):
    verdict = check("06.2", answer)
    assert verdict.status == "not yet"
    assert hint in verdict.message


def test_rows_without_a_data_split():
    assert check("06.3", (0, 32)).ok
    verdict = check("06.3", (16, 32))
    assert verdict.status == "not yet"
    assert "size 1" in verdict.message and "(0, 32)" not in verdict.message and "whole batch" not in verdict.message
    assert check("06.3", (0, 16)).status == "not yet"


def test_the_example_step_sums_gradients_over_data_and_partial_sums_over_model():
    """The lesson's claim that only the gradient all-reduce crosses processes reads this report."""
    from course_utils.exercises.lesson06 import _example_step

    model, report = _example_step()
    assert sorted((c.kind, c.axes) for c in report.compiled) == [("all-reduce", ("data",)), ("all-reduce", ("model",))]
    assert report.agrees and model.name == "mlp"
