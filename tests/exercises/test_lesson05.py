"""Lesson 05's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest
from keras import distribution

from course_utils import check, make_mesh


@pytest.mark.parametrize("exercise_id", ["05.1", "05.2", "05.3", "05.4"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_adam_state_bytes():
    shards = 4 * (64 * 128 + 128 + 128 * 256 + 256 + 256 * 10 + 10)  # on (4, 2): 'model' splits 2 ways
    assert check("05.1", 2 * shards).ok
    one = check("05.1", shards)
    assert one.status == "not yet" and "two moments" in one.message
    two_by_four = check("05.1", 2 * 4 * (64 * 64 + 64 + 64 * 256 + 256 + 256 * 10 + 10))
    assert two_by_four.status == "not yet" and "2 x 4 mesh's figure" in two_by_four.message
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


def test_global_distribution():
    import keras

    from course_utils.exercises.lesson05 import _digits_mlp, _model_parallel

    mp = _model_parallel((2, 4))
    distribution.set_distribution(mp)
    try:
        model = _digits_mlp()
        still_set = check("05.4", model)
    finally:
        distribution.set_distribution(None)
    assert still_set.status == "not yet" and "set_distribution(None)" in still_set.message
    assert check("05.4", model).ok
    whole = check("05.4", _digits_mlp())
    assert whole.status == "not yet" and "before you build" in whole.message
    assert "the model you built" in check("05.4", "model").message
    other = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d9")])
    assert "layer named d1" in check("05.4", other).message
