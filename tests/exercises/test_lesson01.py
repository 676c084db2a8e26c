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


ANSWER_013 = [(2, 1, 4), (2, 2, 2), (2, 4, 1)]


def test_three_d_shapes():
    assert check("01.3", ANSWER_013).ok
    assert check("01.3", [(2, 2, 2), (2, 4, 1), (2, 1, 4)]).ok
    assert check("01.3", [[2, 1, 4], [2, 4, 1], [2, 2, 2]]).ok


@pytest.mark.parametrize("answer, says", [
    ([(2, 2, 2)], ["2 shapes are missing", "Axes of size 1 count too"]),  # no axis of size 1 at all
    ([(2, 1, 4)], ["2 shapes are missing", "another order"]),
    ([(2, 2, 2), (2, 1, 4)], ["1 shape is missing", "You have (2, 1, 4)", "another order"]),
    ([(2, 1, 4), (2, 4, 1)], ["1 shape is missing", "multiply to 4", "divides 4"]),
    ([], ["empty"]),
    ((2, 2, 2), ["one shape", "list"]),
    (5, ["list", "tuples of three"]),
    ([(2, 1, 4), (2, 2, 2), (2, 4, 1), (2, 2, 4)], ["(2, 2, 4) uses 16 devices, not 8"]),
    ([(1, 2, 4)], ["(1, 2, 4) starts with 1, not 2"]),
    ([(2, 4)], ["(2, 4) has 2 sizes, not 3"]),
    ("abc", ["needs a list of mesh shapes"]),
])
def test_three_d_shapes_hints_guide(answer, says):
    verdict = check("01.3", answer)
    assert verdict.status == "not yet"
    for words in says:
        assert words in verdict.message, (words, verdict.message)


@pytest.mark.parametrize("answer", [[(2, 2, 2)], [(2, 1, 4)], [(2, 4, 1)], [(2, 2, 2), (2, 1, 4)], [(2, 2, 2), (2, 4, 1)],
                                    [(2, 1, 4), (2, 4, 1)], [], (2, 2, 2), 5, "abc", [(2, 2, 4)], [(1, 2, 4), (2, 2)]])
def test_three_d_shapes_hints_never_give_the_answer(answer):
    """A hint names only shapes the learner wrote: never a missing one, never the whole list."""
    message = check("01.3", answer).message
    given = set(map(tuple, answer)) if isinstance(answer, list) else {answer}
    for shape in ANSWER_013:
        if shape not in given:
            assert str(shape) not in message and str(list(shape)) not in message, (shape, message)
    assert str(ANSWER_013) not in message
