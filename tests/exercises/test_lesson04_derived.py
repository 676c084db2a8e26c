"""Lesson 04's derived-map checkers (04.4, 04.5): right answers pass, plausible wrong answers get a hint."""

import pytest

from course_utils import check
from course_utils.exercises import lesson04_derived

# Exercises 04.4 and 04.5: the lesson's own model (wide 32 -> 128, narrow 128 -> 32, a layer norm, classes 32 -> 256),
# its map derived from its graph on the 2 x 4 mesh.
SPLITS = {"wide": "columns", "narrow": "rows", "classes": "columns"}


def test_the_derived_map_splits_the_pair_and_the_widening_output_and_keras_agrees():
    assert lesson04_derived.derived_splits() == SPLITS


def test_predicted_splits_right():
    assert check("04.4", SPLITS).ok


@pytest.mark.parametrize("answer, hint, never", [
    ({**SPLITS, "wide": "rows"}, "2 of 3 right. wide widens 32 to 128", "columns"),
    ({**SPLITS, "narrow": "columns"}, "narrow reads wide's split result: each of the 4 'model' devices holds 32",
     "rows"),
    ({**SPLITS, "classes": "whole"}, "no device holds all 256 logits", "columns"),
    ({**SPLITS, "classes": "rows"}, "come whole from the layer norm", "columns"),
    ({"wide": "rows", "narrow": "columns", "classes": "whole"}, "0 of 3 right. wide widens", "columns"),
    ({"wide": "columns"}, "one entry for each of the layers ['wide', 'narrow', 'classes']", None),
    ({**SPLITS, "classes": "cols"}, "'cols' for classes: say 'columns' (its outputs), 'rows' (its inputs)", None),
    ("columns", "Received: str", None),
])
def test_predicted_splits_wrong(answer, hint, never):
    verdict = check("04.4", answer)
    assert verdict.status == "not yet"
    assert hint in verdict.message
    if never:  # a hint points at the dimension; it never names the split asked for
        assert never not in verdict.message


def test_one_all_reduce_closes_the_pair_in_the_forward_pass_and_the_split_logits_cost_the_loss_two():
    assert lesson04_derived.pair_all_reduces() == {"narrow": 1, "(loss)": 2}


def test_pair_all_reduce_layer_right():
    assert check("04.5", "narrow").ok
    assert check("04.5", " narrow ").ok


@pytest.mark.parametrize("answer, hint", [
    ("wide", "wide's result stays split"),
    ("classes", "its forward pass sums nothing across devices"),
    ("norm", "by norm the activation is whole again"),
    ("(loss)", "they close no pair"),
    ("loss", "they close no pair"),
    ("features", "the model's input"),
    ("mlp_out", "is no layer of my_model; its layers are ['features', 'wide', 'narrow', 'norm', 'classes']"),
    (2, "Give a layer's name as a string"),
])
def test_pair_all_reduce_layer_wrong(answer, hint):
    verdict = check("04.5", answer)
    assert verdict.status == "not yet"
    assert hint in verdict.message
    if answer in ("wide", "classes", "norm", "loss", "(loss)"):  # a hint points; it never names the layer asked for
        assert "narrow" not in verdict.message
