"""Lesson 08's checkers: right answers pass, plausible wrong ones get a hint that says why."""

import pytest

pytest.importorskip("keras_hub")

from course_utils import check  # noqa: E402
from course_utils.exercises import lesson08  # noqa: E402


@pytest.mark.parametrize("exercise_id", ["08.1", "08.2", "08.3"])
def test_untouched_is_not_attempted(exercise_id):
    assert check(exercise_id, ...).status == "not attempted"


def test_gating_shard_shape():
    assert check("08.1", (32, 32)).ok
    tp_only = check("08.1", (64, 32))
    assert tp_only.status == "not yet" and "rows are split too" in tp_only.message
    rows_only = check("08.1", (32, 128))
    assert rows_only.status == "not yet" and "columns" in rows_only.message
    assert "tuple of two numbers" in check("08.1", 32).message


def test_layout_that_fits():
    assert check("08.2", "official").ok
    replicated = check("08.2", "replicated")
    assert replicated.status == "not yet" and "127 GiB, so no" in replicated.message
    tp = check("08.2", "tensor_parallel")
    assert tp.status == "not yet" and "31.8 GiB per device, so no" in tp.message
    assert "Answer one of" in check("08.2", "fsdp").message


def test_the_layout_that_fits_is_the_only_one_not_no_and_it_is_tight():
    """08.2 asks which layout's state fits at all: will_it_fit's verdicts must single out one, "tight" not "fits"."""
    found = lesson08._verdicts()
    assert {layout: verdict for layout, (_, verdict) in found.items()} == {
        "official": "tight", "tensor_parallel": "no", "replicated": "no"}
    assert [round(found[k][0], 1) for k in ("replicated", "tensor_parallel", "official")] == [127.2, 31.8, 15.9]
    assert lesson08._verdicts(device_gib=80)["official"][1] == "fits"


def test_largest_replicated():
    assert check("08.3", "token_embedding/reverse_embeddings").ok
    tied = check("08.3", "token_embedding/embeddings")
    assert tied.status == "not yet" and "second weight" in tied.message
    norm = check("08.3", "sequence_output_layernorm/scale")
    assert norm.status == "not yet" and "small" in norm.message
    assert "string" in check("08.3", 3).message
