"""Lesson 04 checkers: right answers pass, plausible wrong answers get a hint, `...` is not attempted."""

import pytest

from course_utils import check
from course_utils.exercises import lesson04

# Exercise 04.2: the lesson's second buggy map (the tensor-parallel pair moved on to d2 and d3),
# its correction, and the lesson's own d1-d2 map (megatron_mlp), shown before the exercise.
BUGGY = {".*d2/kernel": (None, "model"), ".*d2/bias": (None, "model"), "d3/kernel": (None, "model")}
FIXED = {".*d2/kernel": (None, "model"), ".*d2/bias": ("model",), ".*d3/kernel": ("model", None)}
LESSON_MAP = {".*d1/kernel": (None, "model"), ".*d1/bias": ("model",), ".*d2/kernel": ("model", None)}


@pytest.mark.parametrize("exercise_id", ["04.1", "04.2", "04.3", "04.4", "04.5"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


@pytest.mark.parametrize("key", [".*d2/kernel", "(.*/)?d2/kernel", r".*\bd2/kernel"])
def test_d2_kernel_key_right(key):
    assert check("04.1", key).ok


@pytest.mark.parametrize("key, hint", [
    ("d2/kernel", "whole path"),
    ("mlp/d2/kernel", "whole path"),
    (".*/d2/kernel", "no model prefix"),
    (".*d2.*", "also matches"),
    (".*kernel", "also matches"),
    ("(", "not a valid regular expression"),
])
def test_d2_kernel_key_wrong(key, hint):
    verdict = check("04.1", key)
    assert verdict.status == "not yet"
    assert hint in verdict.message


def test_fixed_map_right():
    assert check("04.2", FIXED).ok


def test_fixed_map_accepts_a_layout_map():
    import keras

    mesh = keras.distribution.DeviceMesh((2, 4), ("data", "model"), keras.distribution.list_devices())
    layout_map = keras.distribution.LayoutMap(mesh)
    for key, axes in FIXED.items():
        layout_map[key] = axes
    assert check("04.2", layout_map).ok


@pytest.mark.parametrize("answer, hint", [
    (BUGGY, "still finds 2 problem(s)"),
    ({**BUGGY, ".*d2/bias": ("model",)}, "still finds 1 problem(s)"),
    # the two problems check_layout_map lists, fixed as it says; d3 still split on its columns
    ({".*d2/kernel": (None, "model"), ".*d2/bias": ("model",), ".*d3/kernel": (None, "model")},
     "which of its dimensions does the task split?"),
    ({**FIXED, ".*d3/kernel": (None, "model")}, "cannot see that"),
    (LESSON_MAP, "moves the split one layer on"),
    ({".*d2/kernel": (None, "model"), ".*d2/bias": ("model",)}, "not the one the task describes"),
    ({**FIXED, ".*d2/.*": ("model",)}, "still finds"),
])
def test_fixed_map_wrong(answer, hint):
    verdict = check("04.2", answer)
    assert verdict.status == "not yet"
    assert hint in verdict.message
    assert "('model', None)" not in verdict.message  # a hint points; it never gives the layout asked for


def test_fixed_map_accepts_full_paths():
    """check_layout_map suggests the full path as the other fix; it names the same variable."""
    assert check("04.2", {**{k: v for k, v in FIXED.items() if k != ".*d3/kernel"},
                          "mlp/d3/kernel": ("model", None)}).ok


def test_mlp_out_rule_right():
    assert check("04.3", (".*mlp_out/kernel", ("model", None))).ok
    assert check("04.3", ("mlp_out/kernel", ["model", None])).ok
    assert check("04.3", (".*mlp_out/kernel", ("model",))).ok  # JAX pads a short layout with None


@pytest.mark.parametrize("key", [".*mlp_out/kernel", "(.*/)?mlp_out/kernel"])
def test_mlp_out_rule_with_any_prefix_has_no_note(key):
    verdict = check("04.3", (key, ("model", None)))
    assert verdict.ok and verdict.message == "Well done."
    assert lesson04.prefix_note(key) is None


@pytest.mark.parametrize("key", ["mlp_out/kernel", "mlp_out/ker.*"])
def test_mlp_out_rule_without_prefix_says_why_it_works_here(key):
    """Right for the functional block, whose paths have no model name; the note names the Sequential path."""
    assert check("04.3", (key, ("model", None))).ok
    note = lesson04.prefix_note(key)
    assert "functional model" in note and "'block/mlp_out/kernel'" in note
    assert "'.*mlp_out/kernel' matches both" in note


def test_mlp_out_rule_without_prefix_is_correct_with_the_note():
    verdict = check("04.3", ("mlp_out/kernel", ("model", None)))
    assert verdict.ok
    assert verdict.message == f"Well done. {lesson04.prefix_note('mlp_out/kernel')}"


@pytest.mark.parametrize("axes, hint", [((None, "model"), "where does mlp_in's rule put 'model'?"),
                                        ((None, None), "which of its dimensions is the input the task splits?")])
def test_a_wrong_mlp_out_layout_gets_a_hint_that_points_without_answering(axes, hint):
    verdict = check("04.3", (".*mlp_out/kernel", axes))
    assert verdict.status == "not yet" and hint in verdict.message
    assert "dimension 0" not in verdict.message and "('model', None)" not in verdict.message


@pytest.mark.parametrize("answer, hint", [
    ((".*mlp_out/kernel", (None, "model")), "output columns"),
    ((".*mlp.*/kernel", ("model", None)), "check_layout_map finds"),
    ((".*mlp_out.*", ("model", None)), "check_layout_map finds"),
    (".*mlp_out/kernel", "Give a pair"),
])
def test_mlp_out_rule_wrong(answer, hint):
    verdict = check("04.3", answer)
    assert verdict.status == "not yet"
    assert hint in verdict.message
