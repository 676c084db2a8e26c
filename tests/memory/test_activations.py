"""The activations a training step keeps, traced from shapes, checked against XLA's own count of the real step."""

import keras
import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

from course_utils.memory.activations import _traced_bytes, saved_for_backward  # noqa: E402
from course_utils.memory.fit import SCRATCH, will_it_fit  # noqa: E402
from course_utils.memory.presets import abstract_model, causal_lm_of  # noqa: E402

TINY = dict(vocabulary_size=512, num_layers=2, num_query_heads=4, num_key_value_heads=4, hidden_dim=64,
            intermediate_dim=256, head_dim=16)


def _compiled_temp_bytes(config, batch, seq):
    """XLA's temporary bytes of the real gradient of a tiny Gemma's loss, compiled for one device."""
    import jax

    lm = causal_lm_of(keras_hub.models.GemmaBackbone(**config))
    spec = lambda vs: [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in vs]
    tokens = jax.ShapeDtypeStruct((batch, seq), "int32")

    def loss(t, n, x, y):
        logits, _ = lm.stateless_call(t, n, x, training=True)
        return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))

    args = (spec(lm.trainable_variables), spec(lm.non_trainable_variables), {"token_ids": tokens,
                                                                               "padding_mask": tokens}, tokens)
    return jax.jit(jax.grad(loss)).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_the_traced_activations_track_what_xla_keeps_in_the_real_step():
    model = abstract_model(keras_hub.models.GemmaBackbone, TINY)
    pairs = [(saved_for_backward(model, batch, 128).total(), _compiled_temp_bytes(TINY, batch, 128))
             for batch in (32, 64)]
    for traced, compiled in pairs:
        assert 0.6 <= compiled / traced <= 1.0, (compiled, traced)  # XLA fuses a few away, never keeps more
    (traced_32, compiled_32), (traced_64, compiled_64) = pairs
    assert traced_64 == pytest.approx(2 * traced_32, rel=0.01)  # they grow with the batch (a mask does not)
    assert compiled_64 == pytest.approx(2 * compiled_32, rel=0.05)


def test_one_block_times_the_depth_is_what_a_deeper_model_keeps():
    model = abstract_model(keras_hub.models.GemmaBackbone, {**TINY, "num_layers": 3})
    saved = saved_for_backward(model, 4, 32)
    assert saved.blocks == 3 and saved.total() == _traced_bytes(keras_hub.models.GemmaBackbone, {**TINY, "num_layers": 3},
                                                                 4, 32)
    assert saved.block_input == 4 * 32 * 64 * 4  # batch x sequence x hidden, float32
    assert saved.total(remat=True) == saved.outside + 3 * saved.block_input + saved.per_block < saved.total()


def test_bad_sizes_and_models_are_refused_with_what_was_received():
    model = abstract_model(keras_hub.models.GemmaBackbone, TINY)
    with pytest.raises(ValueError, match=r"seq must be a positive whole number. Received: seq=0"):
        saved_for_backward(model, 4, 0)
    assert saved_for_backward(model, np.int64(4), np.int32(8)) == saved_for_backward(model, 4, 8)  # NumPy's whole numbers
    with pytest.raises(ValueError, match=r"batch must be a positive whole number. Received: batch=np.True_"):
        saved_for_backward(model, np.bool_(True), 8)
    with pytest.raises(ValueError, match="num_layers"):
        saved_for_backward(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]), 4, 8)
    with pytest.raises(ValueError, match="Give batch and seq together"):
        will_it_fit(("gemma_7b_en",), ((2, 4),), batch=8)
    with pytest.raises(ValueError, match=r"dtype must be one of .*Received: dtype='float8'"):
        will_it_fit(("gemma_7b_en",), ((2, 4),), dtype="float8")


def test_gemma_7b_at_a_sequence_of_2048_does_not_read_as_fitting_16_gib():
    report = will_it_fit(("gemma_7b_en",), ((2, 4), (8, 1)), batch=8, seq=2048, remat=True, dtype="mixed_bfloat16")
    for row in report.rows:
        assert row.activations > 0 and row.verdict(16) == "no"
        rest = row.weights + row.gradients + row.optimizer + row.activations + row.gathered
        assert row.scratch == pytest.approx(SCRATCH * rest)
    assert report.row("gemma_7b_en", (8, 1)).gathered > report.row("gemma_7b_en", (2, 4)).gathered > 0
    assert "mixed_bfloat16" in report.title and "8 x 2048 tokens (rematerialised)" in report.title
    assert "activations" in report.columns and "XLA" in report.title
    odd = will_it_fit(("gemma_7b_en",), ((8, 1),), batch=4, seq=128).rows[0]
    assert odd.verdict(80) == "cannot split" and "a batch of 4 does not split into 8" in odd.problem
