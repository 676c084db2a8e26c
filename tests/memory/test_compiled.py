"""Memory from the compiled step: XLA's own buffers for one training step, shape-only, beside the traced estimate."""

import jax
import keras
import keras_hub
import numpy as np
import pytest

from course_utils import make_mesh, will_it_fit
from course_utils.communication.train_step import step_state
from course_utils.memory.compiled import backbone_step_memory, step_memory
from course_utils.memory.presets import MESH_AXES, abstract_model, causal_lm_of, distribution_for
from course_utils.memory.state import shape_only_optimizer

GEMMA = dict(vocabulary_size=128, num_layers=4, num_query_heads=4, num_key_value_heads=4, hidden_dim=64,
             intermediate_dim=128, head_dim=16)
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _tokens(batch, seq):
    tokens = jax.ShapeDtypeStruct((batch, seq), "int32")
    return {"token_ids": tokens, "padding_mask": tokens}, tokens


def _shape_only_lm(config):
    model = causal_lm_of(abstract_model(keras_hub.models.GemmaBackbone, config))
    model.compile(optimizer=shape_only_optimizer(keras.optimizers.Adam(), model), loss=LOSS)
    return model


def test_a_shape_only_step_needs_what_the_real_models_step_needs():
    """The step compiled from shapes has the buffers of the step Keras compiles for the real arrays (the
    state donated, as fit donates it)."""
    dist = distribution_for(keras_hub.models.GemmaBackbone, make_mesh((2, 4), MESH_AXES), "official")
    keras.utils.set_random_seed(0)
    with dist.scope():
        real = keras_hub.models.GemmaCausalLM(backbone=keras_hub.models.GemmaBackbone(**GEMMA), preprocessor=None)
        real.compile(optimizer="adam", loss=LOSS)
    planned = step_memory(_shape_only_lm(GEMMA), dist, _tokens(8, 16))  # builds real's optimizer too
    state = tuple([v.value for v in part] for part in (real.trainable_variables, real.non_trainable_variables))
    with dist.scope():
        step_memory(real, dist, _tokens(8, 16))  # builds what fit builds first (optimizer, metrics)
        state += tuple([v.value for v in part] for part in (real.optimizer.variables, real.metrics_variables))
        shardings = jax.tree.map(lambda spec: spec.sharding, step_state(real, dist))
        data = tuple(jax.tree.map(lambda s: jax.device_put(np.zeros(s.shape, s.dtype),
                                                           dist.get_data_layout(s.shape).backend_layout),
                                  _tokens(8, 16)))
        compiled = jax.jit(real.train_step, donate_argnums=0, out_shardings=(None, shardings)).lower(
            state, data).compile()
    analysis = compiled.memory_analysis()
    assert (planned.arguments, planned.outputs, planned.temporaries, planned.aliased) == (
        analysis.argument_size_in_bytes, analysis.output_size_in_bytes, analysis.temp_size_in_bytes,
        analysis.alias_size_in_bytes)
    assert planned.peak == planned.arguments + planned.outputs + planned.temporaries - planned.aliased


def test_a_quick_compile_counts_the_same_state_and_nearly_the_same_temporaries():
    """XLA's backend optimisations (off in `quick`) change how fast a program runs, and its temporary buffers by
    a few hundred bytes at most: the state and the batch not at all."""
    dist = distribution_for(keras_hub.models.GemmaBackbone, make_mesh((2, 4), MESH_AXES), "official")
    model = _shape_only_lm(GEMMA)
    quick, full = step_memory(model, dist, _tokens(8, 16), quick=True), step_memory(model, dist, _tokens(8, 16))
    assert (quick.arguments, quick.outputs, quick.aliased) == (full.arguments, full.outputs, full.aliased)
    assert abs(quick.temporaries - full.temporaries) <= 0.005 * full.temporaries


def test_each_further_block_counts_as_the_second():
    dist = distribution_for(keras_hub.models.GemmaBackbone, make_mesh((2, 4), MESH_AXES), "official")
    whole = step_memory(_shape_only_lm(GEMMA), dist, _tokens(8, 64))
    extended = backbone_step_memory(abstract_model(keras_hub.models.GemmaBackbone, GEMMA), dist, 8, 64)
    assert extended.how.startswith("compiled with 1 and 2 of its 4 decoder blocks")
    assert extended.arguments == whole.arguments and extended.aliased == whole.aliased  # the state, exactly
    assert abs(extended.peak - whole.peak) <= 0.05 * whole.peak  # XLA reuses buffers a little differently


def test_will_it_fit_reads_the_compiled_peak_and_says_where_the_estimate_is_far_from_it():
    report = will_it_fit("gemma_2b_en", ((8, 1), (2, 4)), device_gib=(16, 80), batch=8, seq=512,
                         dtype="mixed_bfloat16", compiled=True)
    row = report.row("gemma_2b_en", (8, 1))
    assert row.compiled is not None and row.peak == row.compiled
    assert "compiled GiB" in report.columns and report.row("gemma_2b_en", (2, 4)).compiled is None  # cannot split
    for g in (16, 80):
        wanted = "fits" if row.compiled <= 0.9 * g else "tight" if row.compiled <= g else "no"
        assert row.verdict(g) == wanted
    far = [line for line in report.notes() if "the verdict trusts the compiled step" in line]
    assert bool(far) == (row.apart > 0.25)
    with pytest.raises(ValueError, match="compiled=True compiles the step fit runs on a batch"):
        will_it_fit("gemma_2b_en", (8, 1), compiled=True)


def test_your_own_rules_or_map_are_sized_like_keras_hubs():
    official = keras_hub.models.GemmaBackbone.get_layout_map(make_mesh((2, 4), MESH_AXES))
    rules = {key: tuple(layout.axes) for key, layout in official.items()}
    by_name = will_it_fit("gemma_7b_en", (2, 4)).row("gemma_7b_en", (2, 4))
    by_rules = will_it_fit("gemma_7b_en", (2, 4), layout=rules)
    by_function = will_it_fit("gemma_7b_en", (2, 4), layout=keras_hub.models.GemmaBackbone.get_layout_map)
    assert by_rules.row("gemma_7b_en", (2, 4)).total == by_name.total == by_function.row("gemma_7b_en", (2, 4)).total
    assert f"Adam, your {len(rules)} rules:" in by_rules.title and "the layout get_layout_map makes" in by_function.title
    assert "Adam, the official layout:" in will_it_fit("gemma_7b_en", (2, 4)).title
    with pytest.raises(ValueError, match="whose axes name \\('batch', 'model'\\) or None"):
        will_it_fit("gemma_7b_en", (2, 4), layout={".*kernel": ("data", None)})
