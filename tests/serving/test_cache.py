"""keras-hub's KV cache: its shape read from a model, its bytes per token, and each device's block as JAX places it."""

import jax
import keras
import numpy as np
import pytest
from keras.distribution import TensorLayout

keras_hub = pytest.importorskip("keras_hub")

from course_utils import make_mesh  # noqa: E402
from course_utils.serving import (DEFAULT_CACHE_AXES, cache_bytes, cache_bytes_per_token, cache_dims,  # noqa: E402
                                  kv_cache_shape)

GEMMA = dict(vocabulary_size=64, num_layers=2, num_query_heads=4, num_key_value_heads=2, hidden_dim=32,
             intermediate_dim=64, head_dim=8)


def test_the_shape_is_the_one_keras_hub_builds_for_its_own_cache():
    keras.utils.set_random_seed(0)
    lm = keras_hub.models.GemmaCausalLM(backbone=keras_hub.models.GemmaBackbone(**GEMMA), preprocessor=None)
    _, built = lm._build_cache(np.zeros((3, 7), "int32"))  # keras-hub's own cache for 3 sequences of 7 tokens
    assert kv_cache_shape(lm, batch=3, tokens=7) == tuple(built.shape) == (3, 2, 2, 7, 2, 8)
    assert kv_cache_shape(lm.backbone, batch=3, tokens=7) == tuple(built.shape)


def test_a_config_gives_the_head_size_or_the_hidden_size_over_the_heads():
    llama = dict(num_layers=32, num_key_value_heads=8, hidden_dim=4096, num_query_heads=32)
    assert cache_dims(llama) == (32, 8, 128)
    assert cache_dims({"num_layers": 80, "num_key_value_heads": 8, "head_dim": 128}) == (80, 8, 128)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        cache_dims({"num_layers": 2})
    with pytest.raises(ValueError, match="batch is a whole number of at least 1. Received: batch=0"):
        kv_cache_shape(llama, batch=0, tokens=8)


def test_bytes_per_token_are_the_books_2_k_h_l():
    llama_70b = {"num_layers": 80, "num_key_value_heads": 8, "head_dim": 128}
    assert cache_bytes_per_token(llama_70b, "int8") == 2 * 8 * 128 * 80 == 163_840
    assert cache_bytes_per_token(llama_70b, "bfloat16") == 2 * 163_840


def test_the_fullest_devices_bytes_are_its_block_of_a_real_cache():
    mesh = make_mesh((2, 4), ("batch", "model"))
    layout = TensorLayout(DEFAULT_CACHE_AXES, mesh)
    shape = (4, 2, 2, 16, 4, 8)
    real = jax.device_put(np.zeros(shape, "float32"), layout.backend_layout)
    assert cache_bytes(shape, layout, dtype="float32") == real.addressable_shards[0].data.nbytes == 4 * 2 * 2 * 16 * 4 * 8 * 4 // 8
    with pytest.raises(ValueError, match="cannot split"):
        cache_bytes((3, 2, 2, 16, 4, 8), layout)  # 3 sequences over the 2 devices of batch
