"""The serving step makes keras-hub's own greedy tokens; a compiled program's products and collectives, read."""

import jax
import jax.numpy as jnp
import keras
import numpy as np
import pytest
from keras import distribution

keras_hub = pytest.importorskip("keras_hub")

from course_utils import make_mesh  # noqa: E402
from course_utils.serving import decode_step, kv_cache_shape, product_flops, read_program  # noqa: E402

GEMMA = dict(vocabulary_size=64, num_layers=2, num_query_heads=4, num_key_value_heads=2, hidden_dim=32,
             intermediate_dim=64, head_dim=8)


def test_one_prefill_and_a_decode_step_per_token_are_keras_hubs_greedy_generate():
    keras.utils.set_random_seed(0)
    lm = keras_hub.models.GemmaCausalLM(backbone=keras_hub.models.GemmaBackbone(**GEMMA), preprocessor=None)
    lm.compile(sampler="greedy")
    prompts = np.random.default_rng(0).integers(1, 64, size=(2, 5)).astype("int32")
    step, weights = decode_step(lm), [v.value for v in lm.weights]
    logits, cache = step(weights, prompts, jnp.zeros(kv_cache_shape(lm, batch=2, tokens=12)), 0)
    tokens = [np.argmax(logits, -1)]
    for i in range(6):
        logits, cache = step(weights, tokens[-1][:, None].astype("int32"), cache, 5 + i)
        tokens.append(np.argmax(logits, -1))
    padded = {"token_ids": np.pad(prompts, ((0, 0), (0, 7))), "padding_mask": np.arange(12) < 5}
    padded["padding_mask"] = np.broadcast_to(padded["padding_mask"], (2, 12))
    generated = lm.generate(padded, stop_token_ids=None)["token_ids"]
    assert np.array_equal(np.stack(tokens, 1), np.asarray(generated)[:, 5:])


def test_product_flops_count_each_matrix_product_once():
    a, b = jax.ShapeDtypeStruct((16, 32), "float32"), jax.ShapeDtypeStruct((32, 8), "float32")
    text = jax.jit(lambda x, y: jnp.tanh(x @ y) + 1.0).lower(a, b).compile().as_text()
    assert product_flops(text) == 2 * 16 * 32 * 8  # the tanh and the add are no products


def test_a_program_split_over_model_sums_its_partial_products_over_model():
    mesh = make_mesh((2, 4), ("batch", "model"))
    rows = distribution.TensorLayout(("batch", "model"), mesh).backend_layout
    weight = distribution.TensorLayout(("model", None), mesh).backend_layout
    x, w = jax.ShapeDtypeStruct((8, 64), "float32", sharding=rows), jax.ShapeDtypeStruct((64, 16), "float32", sharding=weight)
    found = read_program(jax.jit(lambda x, w: x @ w), x, w, mesh=mesh)
    assert [(c.kind, c.axes, c.count) for c in found.collectives] == [("all-reduce", ("model",), 1)]
    assert found.flops == 2 * 4 * 16 * 16  # each device: 4 rows, a quarter of the 64 contracted
    assert str(found) == "1 all-reduce over model (256 B)"
    assert [tuple(spec) for spec in found.output_specs] == [("batch",)]  # rows over batch, the sum whole
