"""MPT's decoder written with Keras layers, for the published rows: a keras-hub backbone of MPT's blocks.

MosaicML's MPT (llm-foundry, `llmfoundry/models/mpt`) is not in keras-hub. Its block, as the published runs
trained it: a LayerNorm without bias, one fused query-key-value projection, causal attention (FlashAttention in the
runs), an output projection, a second LayerNorm and a feed-forward of 4 x the width with an exact GELU; no bias
anywhere, no position embedding (ALiBi's bias is added to the scores, which a fused kernel never keeps), the
embedding shared with the output head. `MptBackbone` builds that from `keras.layers`; it derives from keras-hub's
`GPT2Backbone` only so that keras-hub's `GPT2CausalLM` trains it (the same head: the reversed embedding), and the
advisor takes it as it takes any keras-hub language model (`memory.presets.causal_lm_class`).
"""

from __future__ import annotations

import keras
import keras_hub
from keras import ops

EPSILON = 1e-5


@keras.saving.register_keras_serializable(package="course_utils")
class MptBlock(keras.layers.Layer):
    """One MPT block: x + attention(norm(x)), then x + feed-forward(norm(x)), every projection without bias."""

    def __init__(self, hidden_dim: int, num_heads: int, expansion: int = 4, **kwargs):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise ValueError(f"hidden_dim must divide into num_heads heads. Received: hidden_dim={hidden_dim}, "
                             f"num_heads={num_heads}.")
        self.hidden_dim, self.num_heads, self.expansion = hidden_dim, num_heads, expansion
        dense = lambda units, name: keras.layers.Dense(units, use_bias=False, dtype=self.dtype_policy, name=name)
        # (MPT computes its LayerNorm in bf16; Keras's computes a bf16 input in float32: XLA's GPU program of the
        # 3b block keeps the same bytes either way, 41.5 a token and unit of width)
        norm = lambda name: keras.layers.LayerNormalization(epsilon=EPSILON, center=False, dtype=self.dtype_policy,
                                                           name=name)
        self.attention_norm, self.feedforward_norm = norm("attention_norm"), norm("feedforward_norm")
        self.query_key_value, self.attention_output = dense(3 * hidden_dim, "query_key_value"), dense(
            hidden_dim, "attention_output")
        self.feedforward_up, self.feedforward_down = dense(expansion * hidden_dim, "feedforward_up"), dense(
            hidden_dim, "feedforward_down")

    def build(self, input_shape):
        wide = (*input_shape[:-1], self.expansion * self.hidden_dim)
        for layer, shape in ((self.attention_norm, input_shape), (self.query_key_value, input_shape),
                             (self.attention_output, input_shape), (self.feedforward_norm, input_shape),
                             (self.feedforward_up, input_shape), (self.feedforward_down, wide)):
            layer.build(shape)

    def call(self, x):
        head_dim = self.hidden_dim // self.num_heads
        heads = lambda t: ops.reshape(t, (ops.shape(t)[0], ops.shape(t)[1], self.num_heads, head_dim))
        query, key, value = ops.split(self.query_key_value(self.attention_norm(x)), 3, axis=-1)
        attended = ops.dot_product_attention(heads(query), heads(key), heads(value), is_causal=True)
        x = x + self.attention_output(ops.reshape(attended, ops.shape(x)))
        return x + self.feedforward_down(
            keras.activations.gelu(self.feedforward_up(self.feedforward_norm(x)), approximate=False))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "hidden_dim": self.hidden_dim, "num_heads": self.num_heads,
                "expansion": self.expansion}


@keras.saving.register_keras_serializable(package="course_utils")
class MptBackbone(keras_hub.models.GPT2Backbone):
    """MPT's decoder: token embedding, `num_layers` `MptBlock`s, a final LayerNorm (`padding_mask` is taken, as
    keras-hub's language models take it, and unused: MPT's runs pack full sequences)."""

    def __init__(self, vocabulary_size: int, num_layers: int, num_heads: int, hidden_dim: int, dtype=None, **kwargs):
        self.token_embedding = keras_hub.layers.ReversibleEmbedding(vocabulary_size, hidden_dim, dtype=dtype,
                                                                    name="token_embedding")
        self.transformer_layers = [MptBlock(hidden_dim, num_heads, dtype=dtype, name=f"transformer_layer_{i}")
                                   for i in range(num_layers)]
        self.layer_norm = keras.layers.LayerNormalization(epsilon=EPSILON, center=False, dtype=dtype,
                                                          name="layer_norm")
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        x = self.token_embedding(token_ids)
        for block in self.transformer_layers:
            x = block(x)
        # GPT2Backbone's own construction is skipped: keras-hub's Backbone builds the functional model
        keras_hub.models.Backbone.__init__(self, inputs={"token_ids": token_ids, "padding_mask": padding_mask},
                                           outputs=self.layer_norm(x), dtype=dtype, **kwargs)
        self.vocabulary_size, self.num_layers, self.num_heads, self.hidden_dim = (vocabulary_size, num_layers,
                                                                                  num_heads, hidden_dim)

    def get_config(self):
        return {**keras_hub.models.Backbone.get_config(self), "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers, "num_heads": self.num_heads, "hidden_dim": self.hidden_dim}
