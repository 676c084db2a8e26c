"""MPT's block written with Keras layers (`course.bench.mpt`): its weights are MPT's, it is causal, and the advisor
takes it as a keras-hub language model (trained as GPT-2's causal language model)."""

import numpy as np
import pytest

from course_utils.course.bench.mpt import MptBackbone
from course_utils.memory.presets import abstract_model, causal_lm_class

keras_hub = pytest.importorskip("keras_hub")

TINY = dict(vocabulary_size=256, num_layers=2, num_heads=4, hidden_dim=32)


def test_its_weights_are_mpts_twelve_squares_of_the_width_a_block_and_the_shared_embedding():
    model = abstract_model(MptBackbone, TINY)
    h = TINY["hidden_dim"]
    assert model.count_params() == TINY["vocabulary_size"] * h + TINY["num_layers"] * (12 * h * h + 2 * h) + h
    assert not [v.path for v in model.weights if v.path.endswith("bias") or "beta" in v.path]  # no bias anywhere
    assert causal_lm_class(MptBackbone) is keras_hub.models.GPT2CausalLM


def test_a_later_token_changes_no_earlier_output():
    backbone = MptBackbone(**TINY)
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    tokens = np.arange(8, dtype="int32")[None] % TINY["vocabulary_size"]
    changed = tokens.copy()
    changed[0, 5] = 200
    mask = np.ones_like(tokens)
    # one compiled program for both batches: the pair, stacked
    both = lm.predict_on_batch({"token_ids": np.concatenate([tokens, changed]),
                                "padding_mask": np.concatenate([mask, mask])})
    before, after = np.asarray(both[:1]), np.asarray(both[1:])
    assert before.shape == (1, 8, TINY["vocabulary_size"])
    np.testing.assert_array_equal(before[0, :5], after[0, :5])
    assert np.abs(before[0, 5:] - after[0, 5:]).max() > 0


def test_the_advisor_takes_it_as_a_language_model():
    from course_utils import advise

    advice = advise(abstract_model(MptBackbone, TINY, dtype="mixed_bfloat16"), devices="8xH100-80GB", batch=8,
                    seq=16, mesh_shapes=[(8, 1)], only="FSDP", attention="fused")
    row = advice.row("FSDP", (8, 1))
    assert "8 x 16 tokens" in advice.title and row.verdict == "fits" and "attention fused" in row.program.memory.how
