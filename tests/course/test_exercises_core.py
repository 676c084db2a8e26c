import pytest

from course_utils import check, expect_error
from course_utils.course.exercises import EXERCISES, results
from course_utils.course.exercises.core import exercise
from course_utils.course.mistakes import ExpectedErrorMissing


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

    from course_utils.course.mistakes import last_caught

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
    lessons = [e for e in EXERCISES.values() if e.checker.__module__.startswith("course_utils.course.exercises.lesson")]
    assert len(lessons) >= 24 and [e.id for e in lessons if not e.form] == []


def test_a_lesson_checker_names_the_form_it_reads():
    verdict = check("03.3", "4x2")
    assert verdict.status == "not yet"
    assert "a mesh shape as a tuple (data size, model size), e.g. (4, 2)" in verdict.message
    assert "'4x2'" in verdict.message


def test_a_right_answer_can_carry_a_remark():
    from course_utils.course.exercises.core import Correct, exercise

    exercise("99.7", "a right answer with a remark")(lambda answer: Correct("It works here because ...")
                                                      if answer == 1 else "not 1")
    assert check("99.7", 1).ok and check("99.7", 1).message == "Well done. It works here because ..."
    assert check("99.7", 2).message == "Hint: not 1"
