"""The models the benchmark, the explorers and lesson 10 use, with their tensor-parallel layouts.

Lessons build their models in plain Keras cells; these functions are the
same models, packaged for code that needs them by name.
"""

from __future__ import annotations


def mlp(*, inputs: int = 64, hidden: int = 256, classes: int = 10, name: str = "mlp"):
    """A two-layer perceptron: Dense(hidden, relu) "d1" -> Dense(classes) "d2".

    Returns:
        A built, uncompiled Keras model.
    """
    import keras

    return keras.Sequential(
        [keras.Input((inputs,)),
         keras.layers.Dense(hidden, activation="relu", name="d1"),
         keras.layers.Dense(classes, name="d2")],
        name=name,
    )


def mlp_rules() -> dict[str, tuple]:
    """Tensor-parallel (Megatron-style) rules for `mlp`: d1 split by columns, d2 by rows."""
    return {
        ".*d1/kernel": (None, "model"),
        ".*d1/bias": ("model",),
        ".*d2/kernel": ("model", None),
    }


def mlp_block(*, width: int = 512, hidden: int = 2048, dtype: str = "bfloat16", name: str = "mlp_block"):
    """A transformer's MLP block, as *How to Scale Your Model* sizes it: LayerNormalization "norm" ->
    Dense(hidden) "up" -> Dense(width) "down", no biases, in `dtype` (its input needs a gradient, as a
    block inside a model does). Lesson 10 draws its roofline.

    Returns:
        A built Keras model, compiled (SGD, mean squared error) so its training step can be compiled.
    """
    import keras

    x = keras.Input((width,))
    h = keras.layers.LayerNormalization(name="norm", dtype=dtype)(x)
    h = keras.layers.Dense(hidden, use_bias=False, name="up", dtype=dtype)(h)
    model = keras.Model(x, keras.layers.Dense(width, use_bias=False, name="down", dtype=dtype)(h), name=name)
    model.compile(optimizer="sgd", loss="mse")
    return model


def transformer_block(*, seq: int = 16, width: int = 64, heads: int = 8, mlp_width: int = 256,
                      classes: int = 10, name: str = "transformer"):
    """One pre-norm transformer block over a sequence, then a pooled classifier.

    Layers: "attn" (MultiHeadAttention), "ffn1" and "ffn2" (the block's MLP),
    "ln1", "ln2" (LayerNormalization), "head" (the classifier).

    Returns:
        A built, uncompiled Keras functional model.
    """
    import keras

    tokens = keras.Input((seq, width))
    x = keras.layers.LayerNormalization(name="ln1")(tokens)
    x = tokens + keras.layers.MultiHeadAttention(heads, width // heads, name="attn")(x, x)
    y = keras.layers.LayerNormalization(name="ln2")(x)
    y = keras.layers.Dense(mlp_width, activation="gelu", name="ffn1")(y)
    x = x + keras.layers.Dense(width, name="ffn2")(y)
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(tokens, keras.layers.Dense(classes, name="head")(pooled), name=name)


def transformer_rules() -> dict[str, tuple]:
    """Tensor-parallel rules for `transformer_block`: attention heads and MLP hidden units over "model"."""
    return {
        ".*attn/(query|key|value)/kernel": (None, "model", None),
        ".*attn/(query|key|value)/bias": ("model", None),
        ".*attn/attention_output/kernel": ("model", None, None),
        ".*ffn1/kernel": (None, "model"),
        ".*ffn1/bias": ("model",),
        ".*ffn2/kernel": ("model", None),
    }

