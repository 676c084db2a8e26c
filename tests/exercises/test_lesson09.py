"""Lesson 09's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest

from course_utils import check

pytest.importorskip("keras_hub")


@pytest.mark.parametrize("exercise_id", ["09.1", "09.2", "09.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_expert_rule():
    assert check("09.1", (".*experts/expert_feedforward_.*", ("model", None, None))).ok
    assert check("09.1", (".*experts/.*", ("model",))).ok  # a short layout is padded: experts over model
    one = check("09.1", (".*experts/expert_feedforward_gate_dense", ("model", None, None)))
    assert one.status == "not yet" and "but not expert_feedforward_output_dense" in one.message
    hidden = check("09.1", (".*experts/expert_feedforward_.*", (None, "model", None)))
    assert hidden.status == "not yet" and "puts whole experts on devices" in hidden.message
    assert "('model', None, None)" not in hidden.message  # a hint points; it never gives the axes
    nothing = check("09.1", ("experts/expert_feedforward_.*", ("model", None, None)))
    assert nothing.status == "not yet" and "matches no variable" in nothing.message
    assert "(key, axes)" in check("09.1", "model").message


def test_largest_batch_that_fits():
    assert check("09.2", 64).ok
    tight = check("09.2", 72)
    assert tight.status == "not yet" and "74.4 GiB: tight on 80 GiB" in tight.message
    small = check("09.2", 32)
    assert small.status == "not yet" and "the task asks for the largest of the choices that fits" in small.message
    assert not any(str(b) in small.message.split("GiB")[-1] for b in (64, 72, 96))  # no choice named
    assert "Answer one of [32, 64, 72, 96]" in check("09.2", 60).message


def test_the_collective_that_combines_the_experts():
    assert check("09.3", ("all-reduce", "model")).ok
    textbook = check("09.3", ("all-to-all", "model"))
    assert textbook.status == "not yet" and "every expert on every token" in textbook.message
    assert "combined over that axis" in check("09.3", ("all-reduce", "batch")).message
