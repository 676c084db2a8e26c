"""Lesson 05's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest
from keras import distribution

from course_utils import check, make_mesh


@pytest.mark.parametrize("exercise_id", ["05.1", "05.2", "05.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_adam_state_bytes():
    shards = 4 * (64 * 64 + 64 + 64 * 256 + 256 + 256 * 10 + 10)
    assert check("05.1", 2 * shards).ok
    one = check("05.1", shards)
    assert one.status == "not yet" and "two moments" in one.message
    whole = check("05.1", 2 * 4 * (64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10))
    assert whole.status == "not yet" and "whole model" in whole.message
    assert "number of bytes" in check("05.1", "lots").message


def test_fits_the_budget():
    assert check("05.2", (2, 4)).ok
    too_big = check("05.2", (4, 2))
    assert too_big.status == "not yet" and "more than 400,000" in too_big.message
    fits = check("05.2", (1, 8))
    assert fits.status == "not yet" and "larger 'data' axis" in fits.message
    assert "2-D shapes" in check("05.2", (8,)).message


def _layout_map(rules):
    layout_map = distribution.LayoutMap(make_mesh((2, 4), ("data", "model")))
    for key, axes in rules.items():
        layout_map[key] = axes
    return layout_map


def test_shifted_megatron():
    right = {"d2/kernel": (None, "model"), "d2/bias": ("model",), "d3/kernel": ("model", None)}
    assert check("05.3", _layout_map(right)).ok
    bias = check("05.3", _layout_map({**right, "d3/bias": ("model",)}))
    assert bias.status == "not yet" and "bias" in bias.message
    no_bias = check("05.3", _layout_map({"d2/kernel": (None, "model"), "d3/kernel": ("model", None)}))
    assert no_bias.status == "not yet" and "follow d2's columns" in no_bias.message
    lesson = check("05.3", _layout_map({"d1/kernel": (None, "model"), "d1/bias": ("model",),
                                        "d2/kernel": ("model", None)}))
    assert lesson.status == "not yet"
    typo = check("05.3", _layout_map({**right, "dense_3/kernel": ("model", None)}))
    assert typo.status == "not yet" and "matches no variable" in typo.message
    assert "LayoutMap" in check("05.3", right).message
    swapped = check("05.3", _layout_map({"d2/kernel": ("model", None), "d2/bias": ("model",),
                                         "d3/kernel": (None, "model")}))
    assert swapped.status == "not yet" and "swapped" in swapped.message
    assert "d2/kernel" in swapped.message and "d3/kernel" in swapped.message
    two = check("05.3", _layout_map({"d1/kernel": (None, "model"), "d2/kernel": (None, "model"),
                                     "d3/kernel": ("model", None)}))
    assert "d2/bias" in two.message and "d1/kernel" in two.message  # every mistake, not only the first
