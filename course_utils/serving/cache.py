"""keras-hub's KV cache: its shape for a model, a batch and a context, its bytes per token, and the bytes the
fullest device holds under a layout (JAX decides which block each device holds).

Derived in notebook 13, whose decode step returns the cache laid out `DEFAULT_CACHE_AXES`.
"""

from __future__ import annotations

import numpy as np

from course_utils.placements import planned_placement

CACHE_DIMS = ("batch", "layers", "key/value", "tokens", "kv_heads", "head_dim")
DEFAULT_CACHE_AXES = ("batch", None, None, None, "model", None)  # sequences over batch, heads over model


def cache_dims(model) -> tuple[int, int, int]:
    """(layers, key/value heads, head_dim) of a keras-hub language model, its backbone, or a config dict.

    A config names `num_layers` and `num_key_value_heads`, and `head_dim` (Gemma) or `hidden_dim` and
    `num_query_heads` (Llama, Qwen: head_dim = hidden_dim // num_query_heads).
    """
    config = model if isinstance(model, dict) else getattr(model, "backbone", model).get_config()
    try:
        head_dim = config.get("head_dim") or config["hidden_dim"] // config["num_query_heads"]
        return int(config["num_layers"]), int(config["num_key_value_heads"]), int(head_dim)
    except (KeyError, TypeError):
        raise ValueError("Pass a keras-hub language model, its backbone, or a config with num_layers, "
                         "num_key_value_heads and head_dim (or hidden_dim and num_query_heads). Received a config "
                         f"with keys {sorted(config)}.") from None


def kv_cache_shape(model, *, batch: int, tokens: int) -> tuple[int, ...]:
    """The shape of keras-hub's KV cache for `batch` sequences of `tokens`: (batch, layers, 2, tokens, kv_heads,
    head_dim), as `GemmaCausalLM._build_cache` (and Llama's, Qwen's) makes it.

    Example:
        >>> kv_cache_shape({"num_layers": 80, "num_key_value_heads": 8, "head_dim": 128}, batch=1, tokens=8192)
        (1, 80, 2, 8192, 8, 128)
    """
    for name, value in (("batch", batch), ("tokens", tokens)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} is a whole number of at least 1. Received: {name}={value!r}.")
    layers, heads, head_dim = cache_dims(model)
    return (batch, layers, 2, tokens, heads, head_dim)


def cache_bytes_per_token(model, dtype="bfloat16") -> int:
    """Bytes of KV cache one token of one sequence adds: 2 (keys and values) x layers x kv_heads x head_dim
    x the dtype's size (*How to Scale Your Model*'s 2 * K * H * L, in bytes)."""
    import ml_dtypes  # noqa: F401 (numpy knows "bfloat16" once ml_dtypes is imported)

    layers, heads, head_dim = cache_dims(model)
    return 2 * layers * heads * head_dim * np.dtype(dtype).itemsize


def cache_bytes(shape, layout, *, dtype="bfloat16") -> int:
    """Bytes of the cache the fullest device holds under `layout` (a TensorLayout or a JAX sharding); JAX
    decides which block each device holds (`planned_placement`), and refuses a layout that does not divide."""
    return planned_placement(tuple(shape), layout, dtype=dtype, name="KV cache").largest_shard_bytes
