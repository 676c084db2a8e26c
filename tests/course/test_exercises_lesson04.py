"""Lesson 04 checkers: right answers pass, plausible wrong answers get a hint, `...` is not attempted."""

import pytest

from course_utils import check

BUGGY = {".*d1/kernel": (None, "model"), ".*d1.*": ("model",), "d2/kernel": ("model", None)}
FIXED = {".*d1/kernel": (None, "model"), ".*d1/bias": ("model",), ".*d2/kernel": ("model", None)}


@pytest.mark.parametrize("exercise_id", ["04.1", "04.2", "04.3"])
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
    (BUGGY, "still finds"),
    ({**FIXED, ".*d2/kernel": (None, "model")}, "rows are dimension 0"),
    ({".*d1/kernel": (None, "model"), ".*d1/bias": ("model",)}, "the task wants"),
    ({**FIXED, ".*d1/bias": (None, "model")}, "still finds"),
])
def test_fixed_map_wrong(answer, hint):
    verdict = check("04.2", answer)
    assert verdict.status == "not yet"
    assert hint in verdict.message


def test_mlp_out_rule_right():
    assert check("04.3", (".*mlp_out/kernel", ("model", None))).ok
    assert check("04.3", ("mlp_out/kernel", ["model", None])).ok
    assert check("04.3", (".*mlp_out/kernel", ("model",))).ok  # JAX pads a short layout with None


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
