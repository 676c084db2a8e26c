"""Shape-only sizing equals the real shards, byte for byte, and allocates nothing."""

import resource

import keras
import pytest

keras_hub = pytest.importorskip("keras_hub")

from course_utils import make_mesh, memory_report  # noqa: E402
from course_utils.memory.state import planned_memory  # noqa: E402
from course_utils.memory.presets import (  # noqa: E402
    LAYOUTS, MESH_AXES, PRESETS, abstract_model, distribution_for, training_memory, without_axis)

TINY_GEMMA = dict(vocabulary_size=512, num_layers=2, num_query_heads=4, num_key_value_heads=4, hidden_dim=64,
                  intermediate_dim=256, head_dim=16)
TINY_LLAMA = dict(vocabulary_size=512, num_layers=1, num_query_heads=8, num_key_value_heads=8, hidden_dim=64,
                  intermediate_dim=128)


def _real(backbone_class, config, distribution):
    """The backbone really built under `distribution`, compiled with Adam as the lessons train it."""
    with distribution.scope():
        model = backbone_class(**config)
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return model


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shape_only_bytes_equal_the_real_shards_of_gemma(layout):
    dist = distribution_for(keras_hub.models.GemmaBackbone, make_mesh((2, 4), MESH_AXES), layout)
    real = memory_report(_real(keras_hub.models.GemmaBackbone, TINY_GEMMA, dist), dist)
    planned = training_memory(keras_hub.models.GemmaBackbone, (2, 4), config=TINY_GEMMA, layout=layout)
    assert planned.rows == real.rows


def test_shape_only_bytes_equal_the_real_shards_of_llama_on_every_mesh():
    for shape in ((1, 8), (2, 4), (8, 1)):
        dist = distribution_for(keras_hub.models.Llama3Backbone, make_mesh(shape, MESH_AXES), "official")
        real = memory_report(_real(keras_hub.models.Llama3Backbone, TINY_LLAMA, dist), dist)
        assert training_memory(keras_hub.models.Llama3Backbone, shape, config=TINY_LLAMA).rows == real.rows


def test_planned_memory_of_a_real_model_equals_memory_report():
    dist = distribution_for(keras_hub.models.GemmaBackbone, make_mesh((2, 4), MESH_AXES), "official")
    model = _real(keras_hub.models.GemmaBackbone, TINY_GEMMA, dist)
    assert planned_memory(model, dist).rows == memory_report(model, dist).rows


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_written_configs_have_keras_hubs_published_parameter_counts(name):
    assert abstract_model(name).count_params() == PRESETS[name].params


def test_a_shape_only_7b_model_is_never_allocated():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = abstract_model("gemma_7b_en")
    # Inferring a new model's shapes closes an outermost StatelessScope, where Keras
    # allocates every deferred variable it still remembers (34 GB here, if it did).
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert model.count_params() > 8e9 and grown_mb < 1000


def test_replicated_state_is_sixteen_bytes_a_parameter_plus_adams_two_scalars():
    report = training_memory("gemma_2b_en", (2, 4), layout="replicated")
    params = PRESETS["gemma_2b_en"].params
    assert {r.total for r in report.rows} == {16 * params + 8}  # weights, gradients, m and v; step and rate


def test_one_key_value_head_cannot_split_over_model_as_keras_refuses():
    one_head = {**TINY_GEMMA, "num_key_value_heads": 1}
    dist = distribution_for(keras_hub.models.GemmaBackbone, make_mesh((2, 4), MESH_AXES), "official")
    with pytest.raises(Exception, match="dimension size is 1"):
        _real(keras_hub.models.GemmaBackbone, one_head, dist)
    with pytest.raises(ValueError, match="key/kernel .* IndivisibleError"):
        training_memory(keras_hub.models.GemmaBackbone, (2, 4), config=one_head)


def test_without_axis_keeps_every_key_and_drops_only_that_axis():
    official = keras_hub.models.GemmaBackbone.get_layout_map(make_mesh((2, 4), MESH_AXES))
    tp = without_axis(official, "batch")
    assert list(tp) == list(official)
    for key in official:
        expected = tuple(None if a == "batch" else a for a in official[key].axes)
        assert tuple(tp[key].axes) == expected
    assert any("batch" in official[key].axes for key in official)


def test_errors_name_what_was_received():
    with pytest.raises(ValueError, match="Unknown preset 'gemma_9b'"):
        abstract_model("gemma_9b")
    with pytest.raises(ValueError, match="layout must be one of"):
        training_memory("gemma_2b_en", (8, 1), layout="fsdp")
    with pytest.raises(ValueError, match="config="):
        abstract_model(keras_hub.models.GemmaBackbone)


def test_one_shape_only_plan_serves_every_layout_of_a_model():
    model = abstract_model(keras_hub.models.GemmaBackbone, TINY_GEMMA)
    mesh = make_mesh((2, 4), MESH_AXES)
    for layout in LAYOUTS:
        dist = distribution_for(keras_hub.models.GemmaBackbone, mesh, layout)
        fresh = planned_memory(model, dist, optimizer=keras.optimizers.Adam())
        assert planned_memory(model, dist).rows == fresh.rows
    with dist.scope():
        model.add_weight(shape=(64, 8), name="extra")  # one more trainable weight: the plan must see it
    grown = planned_memory(model, dist)
    assert grown.max_total == planned_memory(model, dist, optimizer=keras.optimizers.Adam()).max_total
    assert grown.max_total == fresh.max_total + 4 * 64 * 8 * 4  # weight, gradient, two Adam moments, float32


def test_a_preset_is_built_once_for_each_set_of_overrides():
    assert abstract_model("gemma_2b_en") is abstract_model("gemma_2b_en")
    half = abstract_model("gemma_2b_en", dtype="bfloat16")
    assert half is not abstract_model("gemma_2b_en")
    assert half is abstract_model("gemma_2b_en", dtype="bfloat16")  # a lesson's model, its checker's too
    assert {v.dtype for v in half.weights} == {"bfloat16"}
    assert {v.dtype for v in abstract_model("gemma_2b_en").weights} == {"float32"}
    assert training_memory(half, (8, 1)).max_total < training_memory("gemma_2b_en", (8, 1)).max_total


@pytest.mark.parametrize("dtype", ["float8", "int8", "fp32"])
def test_a_dtype_keras_does_not_train_in_is_refused_with_the_ones_it_does(dtype):
    from course_utils.memory.presets import training_memory

    with pytest.raises(ValueError, match=rf"dtype must be one of \('float32', .*\)\. Received: dtype='{dtype}'"):
        training_memory("gemma_2b_en", (2, 4), dtype=dtype)
