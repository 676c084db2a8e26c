import pytest

from course_utils import check, expect_error
from course_utils.exercises import EXERCISES, results
from course_utils.exercises.core import exercise
from course_utils.exercises.mistakes import ExpectedErrorMissing


@exercise("99.1", "Name the axis that splits the batch.")
def _batch_axis(answer):
    return None if answer == "data" else f"{answer!r} is not the axis that splits the batch."


@exercise("99.2", "A checker whose probing fails on odd input.")
def _fragile(answer):
    return None if answer.upper() == "MODEL" else "not that one"


def test_three_verdicts():
    before = len(results())
    assert check("99.1", ...).status == "not attempted"
    wrong = check("99.1", "model")
    assert wrong.status == "not yet" and "'model' is not the axis" in wrong.message
    assert check("99.1", "data").ok
    assert [v.status for v in results()[before:]] == ["not attempted", "not yet", "correct"]
    assert "❌" in repr(wrong) and "99.1" in wrong._repr_html_()


@exercise("99.3", "Which mesh shape?", form="a mesh shape as a tuple (data size, model size), e.g. (4, 2)")
def _mesh_shape(answer):
    return None if tuple(int(n) for n in answer) == (2, 4) else "not that shape"


def test_a_checker_that_raises_says_not_yet():
    verdict = check("99.2", 42)
    assert verdict.status == "not yet" and "AttributeError" in verdict.message
    assert "Received: 42 (type int)" in verdict.message and "exercise cell's comment" in verdict.message


def test_an_answer_in_the_wrong_form_gets_a_hint_naming_the_form_and_what_was_received():
    verdict = check("99.3", "4x2")
    assert verdict.status == "not yet"
    assert verdict.message.startswith("Hint: This exercise needs a mesh shape as a tuple (data size, model size), "
                                      "e.g. (4, 2). Received: '4x2' (type str), which it cannot read (ValueError:")
    assert check("99.3", (2, 4)).ok


def test_unknown_exercise_and_double_registration():
    with pytest.raises(KeyError, match="No exercise '42.9'"):
        check("42.9", 1)
    with pytest.raises(ValueError, match="registered twice"):
        exercise("99.1", "again")(lambda a: None)
    assert "99.1" in EXERCISES


def test_expect_error_shows_the_real_message(capsys):
    with expect_error(ValueError):
        raise ValueError("Shape does not match the number of devices.")
    assert "ValueError (the expected error):\nShape does not match" in capsys.readouterr().out


def test_expect_error_shows_a_warning_first_as_a_warning_and_keeps_what_it_caught(capsys):
    import warnings

    from course_utils.exercises.mistakes import last_caught

    with expect_error(ValueError) as caught:
        warnings.warn("a mix of local and distributed variables", UserWarning)
        raise ValueError("incompatible devices")
    out = capsys.readouterr().out
    assert out.index("First a warning, not the error (UserWarning):\na mix of local") < out.index(
        "ValueError (the expected error):\nincompatible devices")
    assert caught is last_caught() and caught.message == "incompatible devices"
    assert caught.warnings == ["UserWarning: a mix of local and distributed variables"]


def test_expect_error_fails_when_nothing_fails():
    with pytest.raises(ExpectedErrorMissing, match="meant to raise ValueError"):
        with expect_error(ValueError):
            pass


def test_expect_error_lets_other_errors_through():
    with pytest.raises(KeyError):
        with expect_error(ValueError):
            raise KeyError("other")


def test_every_lesson_exercise_says_what_form_of_answer_it_reads():
    lessons = [e for e in EXERCISES.values() if e.checker.__module__.startswith("course_utils.exercises.lesson")]
    assert len(lessons) >= 24 and [e.id for e in lessons if not e.form] == []


def test_a_lesson_checker_names_the_form_it_reads():
    verdict = check("03.3", "4x2")
    assert verdict.status == "not yet"
    assert "a mesh shape as a tuple (data size, model size), e.g. (4, 2)" in verdict.message
    assert "'4x2'" in verdict.message


def test_a_right_answer_can_carry_a_remark():
    from course_utils.exercises.core import Correct, exercise

    exercise("99.7", "a right answer with a remark")(lambda answer: Correct("It works here because ...")
                                                      if answer == 1 else "not 1")
    assert check("99.7", 1).ok and check("99.7", 1).message == "Well done. It works here because ..."
    assert check("99.7", 2).message == "Hint: not 1"


# Answers that try to fool, hang or break a checker: each gets "not yet" with a hint, never a crash.
class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class YesString(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__

    def upper(self):
        return "MODEL"


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")

    def __str__(self):
        raise RuntimeError("no str")


def test_a_string_subclass_that_equals_everything_is_read_as_its_plain_text():
    assert not check("99.1", YesString("zzz")).ok
    assert check("99.1", YesString("data")).ok
    assert not check("99.2", YesString("zzz")).ok  # its upper() is never called: the plain string's is
    assert not check("01.1", YesString("zzz")).ok


def test_an_object_with_its_own_comparison_is_refused_naming_its_type():
    for exercise_id in ("99.1", "08.2", "01.1"):
        verdict = check(exercise_id, AlwaysEqual())
        assert verdict.status == "not yet"
        assert "an object of type AlwaysEqual that defines its own __eq__" in verdict.message


def test_an_endless_iterator_is_read_only_so_far():
    import itertools
    import time

    start = time.monotonic()
    verdict = check("01.3", itertools.repeat((2, 2, 2)))
    assert time.monotonic() - start < 10
    assert verdict.status == "not yet" and "more than 100,000 items" in verdict.message
    assert check("01.3", (shape for shape in [(2, 1, 4), (2, 2, 2), (2, 4, 1)])).ok  # a finite one is read


def test_numpy_values_are_plain_values():
    import numpy as np

    assert check("99.3", (np.int64(4), np.int64(2))).status == check("99.3", (4, 2)).status
    assert check("99.1", np.str_("data")).ok


@pytest.mark.parametrize("exercise_id", ["04.1", "04.2", "07.1", "08.2", "99.1"])
def test_an_answer_whose_repr_raises_gets_a_hint(exercise_id):
    verdict = check(exercise_id, BadRepr())  # it raised for 04.1, 04.2, 07.1 and 08.2
    assert verdict.status == "not yet" and verdict.message.startswith("Hint: ")
    repr(verdict), verdict._repr_html_()


def test_a_check_that_runs_too_long_is_stopped(monkeypatch):
    import time

    from course_utils.exercises import core

    @exercise("99.9", "A checker that never ends.", form="anything")
    def _endless(answer):
        try:
            while True:
                time.sleep(0.01)
        except Exception:  # a checker's own broad except does not swallow the time limit
            return None

    monkeypatch.setattr(core, "CHECK_TIMEOUT_S", 0.5)
    try:
        start = time.monotonic()
        verdict = check("99.9", 1)
        assert time.monotonic() - start < 5
        assert verdict.status == "not yet" and "took over 0.5 s, so it was stopped" in verdict.message
    finally:
        del EXERCISES["99.9"]
