"""Lesson 10's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["10.1", "10.2"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_data_parallel_critical_batch():
    from course_utils.exercises.lesson10 import _data_parallel_crossover

    found = _data_parallel_crossover()
    assert found == pytest.approx(2200 * 7 / 8, rel=0.03)  # the book's C/W, for a ring of 8
    assert check("10.1", round(found)).ok
    book = check("10.1", 2200)
    assert book.status == "not yet" and "ring all-reduce of 8 devices" in book.message
    far = check("10.1", 500)
    assert far.status == "not yet" and "communication-bound" in far.message
    assert "Answer a number of tokens" in check("10.1", "many").message


def test_tensor_parallel_width():
    assert check("10.2", 16384).ok
    short = check("10.2", 8192)
    assert short.status == "not yet" and "communication-bound" in short.message
    wide = check("10.2", 32768)
    assert wide.status == "not yet" and "the smallest width" in wide.message
    assert "Answer one of [4096, 8192, 16384, 32768]" in check("10.2", 10000).message
