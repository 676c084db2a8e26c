"""Lesson 12's checkers: right answers pass, plausible wrong ones get a hint that does not give the answer."""

import pytest

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["12.1", "12.2"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_fewest_micro_batches_for_a_bubble_under_a_tenth():
    assert check("12.1", 28).ok  # 3 / 31 = 9.7 %
    edge = check("12.1", 27)  # 3 / 30: the limit itself
    assert edge.status == "not yet" and "at the limit" in edge.message and "28" not in edge.message
    few = check("12.1", 8)
    assert few.status == "not yet" and "27.3%" in few.message and "take more" in few.message
    many = check("12.1", 32)
    assert many.status == "not yet" and "try fewer" in many.message
    assert "Far more than needed" in check("12.1", 10**6).message
    assert "whole number of micro-batches" in check("12.1", 28.0).message


def test_stage_boundary_bytes_are_read_from_a_compiled_forward_pass():
    from course_utils.exercises.lesson12 import boundary_bytes

    per_tick, ticks = boundary_bytes()
    assert (per_tick, ticks) == (64 // 8 * 32 * 4, 8 + 4 - 1)  # one micro-batch of 8 rows, M + S - 1 ticks
    assert boundary_bytes(4) == (16 * 32 * 4, 4 + 4 - 1)  # the lesson's own pipeline
    assert check("12.2", 11_264).ok
    per_micro_batch = check("12.2", 8 * 1024)
    assert per_micro_batch.status == "not yet" and "every tick" in per_micro_batch.message
    assert "11264" not in per_micro_batch.message and "11,264" not in per_micro_batch.message
    whole = check("12.2", 11 * 64 * 32 * 4)
    assert whole.status == "not yet" and "not the whole batch" in whole.message
    both = check("12.2", 2 * 11_264)
    assert both.status == "not yet" and "once each" in both.message
    assert "Answer a number of bytes" in check("12.2", "many").message
