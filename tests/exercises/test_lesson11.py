"""Lesson 11's checkers: right answers pass, plausible wrong ones get a hint that does not give the answer."""

import pytest

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["11.1", "11.2"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_ring_memory():
    from course_utils.exercises.lesson11 import ring_kv_bytes

    expected = ring_kv_bytes()
    assert expected == 2 * (131_072 // 8) * 2 * 8 * 128 * 2  # two blocks, keys and values, Llama 3 8B's 8 kv heads
    assert check("11.1", expected).ok
    gathered = check("11.1", expected * 4)  # the whole sequence's keys and values, or 32 heads instead of 8
    assert gathered.status == "not yet" and "whole sequence" in gathered.message and "query heads" in gathered.message
    one_block = check("11.1", expected // 2)
    assert one_block.status == "not yet" and "the next block arrives" in one_block.message
    keys_only = check("11.1", expected // 4)  # one block of keys alone
    assert keys_only.status == "not yet" and "keys and values both" in keys_only.message
    assert "Answer a number of bytes" in check("11.1", "lots").message
    for verdict in (gathered, one_block, keys_only):
        assert f"{expected:,}" not in verdict.message and str(expected) not in verdict.message


def test_ring_permutes():
    from course_utils.exercises.lesson11 import ring_sends

    assert ring_sends() == 14  # keys and values, 7 steps that send
    assert check("11.2", 14).ok
    halved = check("11.2", 7)
    assert halved.status == "not yet" and "two arrays" in halved.message
    every_step = check("11.2", 16)
    assert every_step.status == "not yet" and "last step" in every_step.message
    written = check("11.2", 2)
    assert written.status == "not yet" and "loop" in written.message
    assert "Answer a whole number" in check("11.2", 14.5).message
    for verdict in (halved, every_step, written):
        assert "14" not in verdict.message
