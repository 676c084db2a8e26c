"""Lesson 02's checkers: right answers pass, plausible wrong ones get a hint."""

import pytest

from course_utils import check


@pytest.mark.parametrize("exercise_id", ["02.1", "02.2", "02.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_batch_shard_shape():
    assert check("02.1", (8, 10)).ok
    all_devices = check("02.1", (2, 10))
    assert all_devices.status == "not yet" and "'data'" in all_devices.message
    assert "features" in check("02.1", (8, 5)).message


def test_kernel_columns():
    assert check("02.2", (None, "model")).ok
    assert check("02.2", [None, "model"]).ok
    rows = check("02.2", ("model", None))
    assert rows.status == "not yet" and "rows" in rows.message and "pad" not in rows.message
    data = check("02.2", (None, "data"))
    assert data.status == "not yet" and "'data'" in data.message and "'model'" in data.message
    whole = check("02.2", (None, None))
    assert whole.status == "not yet" and "columns (dimension 1) whole" in whole.message
    assert "tuple" in check("02.2", "model").message


@pytest.mark.parametrize("short, padded, says", [
    (("model",), "('model', None)", "splits the rows (dimension 0) over 'model'"),
    (("data",), "('data', None)", "splits the rows (dimension 0) over 'data'"),
    ((None,), "(None, None)", "columns (dimension 1) whole"),
    ((), "(None, None)", "columns (dimension 1) whole"),
])
def test_kernel_columns_short_layout_is_judged_padded(short, padded, says):
    """A layout shorter than the kernel is valid; the hint says it was padded and judges the padded form."""
    verdict = check("02.2", short)
    assert verdict.status == "not yet"
    assert "pad a short layout with None" in verdict.message and f"reads {padded}" in verdict.message
    assert says in verdict.message
    # the rest of the hint is the one the padded layout itself gets
    assert verdict.message.endswith(check("02.2", eval(padded)).message.removeprefix("Hint: "))


@pytest.mark.parametrize("answer, says", [
    ((None, "model", None), "3 entries but the tensor has 2 dimensions"),
    ((None, "batch"), "not an axis of the mesh"),
    (("model", "model"), "used for more than one dimension"),
])
def test_kernel_columns_impossible_layouts(answer, says):
    verdict = check("02.2", answer)
    assert verdict.status == "not yet" and says in verdict.message


def test_gradient_axis():
    assert check("02.3", "data").ok
    model = check("02.3", "model")
    assert model.status == "not yet" and "same sub-batch" in model.message
    assert "default" in check("02.3", "batch").message
