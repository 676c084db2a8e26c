"""Checkers for lesson 13: serving a sharded model.

Both answers are computed here from shapes alone, with the library's own functions (`serving.loading_peaks`,
`serving.cache_bytes`, `hardware.device_set`): the bytes each device holds under the layout the task names, as
JAX places them, never a formula typed twice.
"""

from __future__ import annotations

import functools
import math

from course_utils.exercises.core import exercise

BATCH_13_1, TOKENS = 64, 4096
BATCH_13_2 = 16
LLAMA_3_8B = dict(num_layers=32, num_key_value_heads=8, head_dim=128)  # exercise 13.2's model, as its prompt gives it


def _serving(mesh_shape):
    import keras_hub
    from keras import distribution

    from course_utils.memory.presets import without_axis
    from course_utils.mesh import make_mesh

    mesh = make_mesh(mesh_shape, ("batch", "model"))
    return distribution.ModelParallel(layout_map=without_axis(keras_hub.models.GemmaBackbone.get_layout_map(mesh),
                                                              "batch"), batch_dim_name="batch")


@functools.cache
def _decode_bytes() -> tuple[int, int]:
    """(weights, cache) bytes one device reads per decode step: Gemma 7B, bf16, (1, 8), 64 x 4,096 tokens."""
    from keras.distribution import TensorLayout

    from course_utils.memory.presets import abstract_model
    from course_utils.serving import DEFAULT_CACHE_AXES, cache_bytes, kv_cache_shape, loading_peaks

    gemma = abstract_model("gemma_7b_en", dtype="bfloat16")
    serving = _serving((1, 8))
    cache = cache_bytes(kv_cache_shape(gemma, batch=BATCH_13_1, tokens=TOKENS),
                        TensorLayout(DEFAULT_CACHE_AXES, serving.device_mesh), dtype="bfloat16")
    return loading_peaks(gemma, serving).blocks, cache


def decode_milliseconds() -> float:
    """Exercise 13.1's answer: the bytes one device reads over an H100's memory bandwidth, in milliseconds."""
    from course_utils.serving import decode_time

    return decode_time(sum(_decode_bytes()), 0.0, "8xH100-80GB").memory * 1e3


def _number(answer) -> bool:
    return isinstance(answer, (int, float)) and not isinstance(answer, bool) and math.isfinite(answer) and answer > 0


@exercise("13.1", "The milliseconds a decode step of Gemma 7B (bf16, 64 x 4,096 tokens) needs to read what each "
                  "device of a (1, 8) mesh of H100s holds.", form="a number of milliseconds, e.g. 12.5")
def decode_time_per_token(answer) -> str | None:
    """Reads the bytes each device holds (weights and cache, from shapes) over the H100's memory bandwidth."""
    if not _number(answer):
        return f"Answer a number of milliseconds above 0. Received: {answer!r}."
    weights, cache = _decode_bytes()
    found = decode_milliseconds()
    if abs(answer - found) <= 0.05 * found:
        return None
    from course_utils.serving import decode_time

    alone = {"the weights alone": weights, "the cache alone": cache}
    for what, n in alone.items():
        if abs(answer - decode_time(n, 0.0, "8xH100-80GB").memory * 1e3) <= 0.05 * found:
            return (f"That is the time to read {what}. A decode step reads both, every weight the device holds and "
                    f"its whole cache, once per step.")
    if abs(answer - 8 * found) <= 0.4 * found or abs(answer - found / 8) <= 0.05 * found / 8:
        return ("Count what one device holds: an eighth of the weights and an eighth of the cache, read at one "
                "H100's bandwidth, 3.35e12 bytes/s.")
    return (f"{answer:g} ms is {'too short' if answer < found else 'too long'}. Add the bytes one device reads (its "
            f"weights and its cache: sequences x tokens x bytes per token, over 8) and divide by 3.35e12 bytes/s.")


def cache_bytes_per_device() -> int:
    """Exercise 13.2's answer: Llama 3 8B's cache per device, 16 x 4,096 tokens, bf16, over batch and heads on 2 x 4."""
    from keras.distribution import TensorLayout

    from course_utils.mesh import make_mesh
    from course_utils.serving import DEFAULT_CACHE_AXES, cache_bytes, kv_cache_shape

    layout = TensorLayout(DEFAULT_CACHE_AXES, make_mesh((2, 4), ("batch", "model")))
    return cache_bytes(kv_cache_shape(LLAMA_3_8B, batch=BATCH_13_2, tokens=TOKENS), layout, dtype="bfloat16")


@exercise("13.2", "Bytes of KV cache per device: Llama 3 8B, bf16, 16 x 4,096 tokens, sequences over batch and heads "
                  "over model on 2 x 4.", form="a whole number of bytes, e.g. 268435456")
def kv_cache_per_device(answer) -> str | None:
    """Asks JAX which block of the cache each device holds (`serving.cache_bytes`) and compares the bytes."""
    if not _number(answer):
        return f"Answer a number of bytes above 0. Received: {answer!r}."
    found = cache_bytes_per_device()
    if answer == found:
        return None
    ratio = answer / found
    hints = {
        0.5: "Keys and values: the cache keeps both for every token, layer and head (the 2 in its shape).",
        2.0: ("The heads are split over model (4 devices) and the sequences over batch (2): the cache is divided by "
              "both. Check also the bytes of one bfloat16 number."),
        4.0: "Both splits divide the cache: sequences over batch and heads over model.",
        8.0: "That is the whole cache: each device holds only its block.",
    }
    for known, hint in hints.items():
        if math.isclose(ratio, known, rel_tol=1e-9):
            return hint
    if ratio < 1:
        return ("Too few bytes. The cache's shape is (sequences, layers, 2, tokens, key/value heads, head size): "
                "multiply it out, times 2 bytes, and divide by the devices that split it.")
    return ("Too many bytes. The cache's shape is (sequences, layers, 2, tokens, key/value heads, head size): "
            "multiply it out, times 2 bytes, and divide by the devices that split it.")
