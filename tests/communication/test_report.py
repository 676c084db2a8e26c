"""Collectives from the real compiled step, beside what the layout predicts."""

import keras
import numpy as np
import pytest
from keras import distribution

from course_utils import communication_report, make_layout_map, make_mesh, models


def test_an_unbuilt_model_is_refused_with_the_fix(tiny):
    model = keras.Sequential([keras.layers.Dense(4)], name="unbuilt")
    model.compile(optimizer="adam", loss="mse")
    with pytest.raises(ValueError, match=r"needs a built model; 'unbuilt' has no variables yet\. Build it"):
        communication_report(model, tiny.data_parallel(), (32, 16))


@pytest.mark.parametrize("dist, batch, size", [("data_parallel", (3, 16), 8), ("megatron", (3, 16), 2)])
def test_a_batch_that_does_not_split_over_the_batch_axis_is_refused_with_sizes_that_do(tiny, dist, batch, size):
    laid_out = getattr(tiny, dist)()
    with pytest.raises(ValueError, match=rf"split evenly over the mesh axis 'data' \({size} devices\).*Received: a "
                                         rf"batch of 3 rows\. Use a multiple of {size}, e\.g\. {size}, {2 * size}"):
        communication_report(tiny.built_under(laid_out), laid_out, batch)


def test_data_parallel_step_all_reduces_the_gradients(tiny):
    dp = tiny.data_parallel()
    report = communication_report(tiny.built_under(dp), dp, (32, 16))
    assert report.agrees, report
    assert [(c.kind, c.axes) for c in report.compiled] == [("all-reduce", ("data",))]
    assert tiny.gradient_bytes <= report.bytes_over("data") <= tiny.gradient_bytes + 16


@pytest.mark.parametrize("shape", [(2, 4), (4, 2), (1, 8), (8, 1)])
def test_megatron_mlp_expectation_agrees(tiny, shape):
    mp = tiny.megatron(shape)
    model = tiny.built_under(mp)
    report = communication_report(model, mp, (32, 16))
    assert report.agrees, report
    data, width = shape
    if width > 1:  # d2's partial sums: (32 / data) rows x 4 outputs
        assert report.bytes_over("model") == (32 // data) * 4 * 4
    if data == 1:
        assert report.bytes_over("data") == 0


def test_a_program_that_differs_from_the_expectation_is_reported(tiny):
    # Splitting the first kernel's input rows predicts partial sums over 'model'; since the
    # input batch is whole on every model device, XLA gathers the kernel instead.
    layout_map = distribution.LayoutMap(make_mesh((2, 4), ("data", "model")))
    layout_map[".*d1/kernel"] = ("model", None)
    mp = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    report = communication_report(tiny.built_under(mp), mp, (32, 16))
    assert any(e.axes == ("model",) for e in report.expected)
    assert report.bytes_over("model", kind="all-gather") == 16 * 32 * 4
    assert not report.agrees and "DIFFER" in repr(report)


def test_sparse_labels_get_integer_default_targets(tiny):
    dp = tiny.data_parallel()
    with dp.scope():
        model = models.mlp(inputs=16, hidden=32, classes=4)
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    report = communication_report(model, dp, (32, 16))  # targets: (32,) int32, not a copy of the output
    assert report.agrees, report
    assert tiny.gradient_bytes <= report.bytes_over("data") <= tiny.gradient_bytes + 16


def test_a_real_batch_gives_the_same_program_as_its_shapes(tiny):
    import numpy as np

    mp = tiny.megatron((2, 4))
    model = tiny.built_under(mp)
    from_shape = communication_report(model, mp, (32, 16))
    from_batch = communication_report(model, mp, (np.zeros((32, 16), "float32"), np.zeros((32, 4), "float32")))
    assert from_batch.compiled == from_shape.compiled and from_batch.agrees


def test_every_collective_is_attributed_to_its_layer(tiny):
    mp = tiny.megatron((2, 4))
    report = communication_report(tiny.built_under(mp), mp, (32, 16))
    partial = [r for r in report.collectives if r.axes == ("model",)]
    assert [(r.layer, r.op, r.pass_) for r in partial] == [("mlp/d2", "dot_general", "forward")]
    assert "partial sums of mlp/d2's dot_general" in partial[0].reason
    gradients = [r for r in report.collectives if r.axes == ("data",) and r.kind == "all-reduce"]
    assert gradients and all("backward" in r.pass_ for r in gradients)  # XLA may add the loss's sum
    assert any("gradients of mlp/d1" in r.reason and "part of the batch" in r.reason for r in gradients)
    table = report.by_layer()
    assert sum(r["bytes"] for r in table.rows) == sum(c.bytes for c in report.compiled)


@pytest.fixture
def short_locations():
    """JAX's locations without full tracebacks, as a learner may set (JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS=0)."""
    import jax

    before = jax.config.jax_include_full_tracebacks_in_locations
    jax.config.update("jax_include_full_tracebacks_in_locations", False)
    yield
    jax.config.update("jax_include_full_tracebacks_in_locations", before)


def test_short_locations_change_no_report_and_stay_the_learner_s(tiny, short_locations):
    # With them, XLA's op_name keeps the primitives alone: the report found no layer and said DIFFER.
    import jax

    mp = tiny.megatron((2, 4))
    report = communication_report(tiny.built_under(mp), mp, (32, 16))
    assert report.agrees, report
    partial = [r for r in report.collectives if r.axes == ("model",)]
    assert [(r.layer, r.op, r.pass_) for r in partial] == [("mlp/d2", "dot_general", "forward")]
    assert jax.config.jax_include_full_tracebacks_in_locations is False


def test_a_difference_names_the_layer_and_the_weight(tiny):
    layout_map = distribution.LayoutMap(make_mesh((2, 4), ("data", "model")))
    layout_map[".*d1/kernel"] = ("model", None)
    mp = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    report = communication_report(tiny.built_under(mp), mp, (32, 16))
    (gather,) = [r for r in report.collectives if r.kind == "all-gather"]
    assert gather.weight == "mlp/d1/kernel" and gather.layer == "mlp/d1" and "XLA gathers it" in gather.reason
    assert any("not expected" in line and "mlp/d1" in line for line in report.differences())


def test_target_options_with_a_real_batch_are_refused(tiny):
    import numpy as np

    dp = tiny.data_parallel()
    with pytest.raises(ValueError, match=r"with a real batch \(x, y\), y says them\. Received: target_shape=\(32,\)"):
        communication_report(tiny.built_under(dp), dp, (np.zeros((32, 16)), np.zeros((32, 4))), target_shape=(32,))


def tensor_parallel_block(optimizer: str):
    """A small transformer block built under its tensor-parallel rules on the 2 x 4 mesh, and the distribution."""
    layout_map = make_layout_map(make_mesh((2, 4), ("data", "model")), models.transformer_rules())
    mp = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    with mp.scope():
        model = models.transformer_block(seq=8, width=32, heads=4, mlp_width=64)
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    return model, mp


def test_attention_and_sequence_length_are_modelled():
    model, mp = tensor_parallel_block("sgd")
    report = communication_report(model, mp, (16, 8, 32))
    assert report.agrees, report
    activation = (16 // 2) * 8 * 32 * 4  # rows per data device x sequence x width x float32
    by_reason = {e.source: e.bytes for e in report.expected}
    assert by_reason["expected: partial sums of attn/attention_output's output combined over 'model'"] == activation
    assert by_reason["expected: attn/query's input gradient combined over 'model'"] == activation
    assert report.bytes_over("model") == 6 * activation  # attention out, ffn2; q, k, v and ffn1 input gradients


def test_the_reading_compile_has_the_collectives_of_xla_s_full_compile():
    from course_utils.communication.report import compiled_train_step, training_batch
    from course_utils.xla_settings import READING_COMPILE
    from course_utils.communication.hlo import parse_collectives

    model, mp = tensor_parallel_block("adam")
    batch = training_batch(model, (16, 8, 32))
    quick, full = (parse_collectives(compiled_train_step(model, mp, batch, options=options),
                                     ("data", "model"), (2, 4)) for options in (READING_COMPILE, None))
    key = lambda c: (c.kind, c.axes)
    assert sorted(quick, key=key) == sorted(full, key=key) and any(c.axes == ("model",) for c in full)


def test_a_model_built_outside_the_scope_is_refused_with_the_fix():
    layout_map = make_layout_map(make_mesh((2, 4), ("data", "model")), models.mlp_rules())
    mp = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    model = models.mlp(inputs=16, hidden=32, classes=4)  # outside mp.scope()
    model.compile(optimizer="adam", loss="mse")
    with pytest.raises(ValueError, match=r"4 of the model's 4 variables \(first: 'mlp/d1/kernel'\) live outside "
                                         r"its mesh \(2, 4\).*inside `with distribution.scope\(\):`"):
        communication_report(model, mp, (32, 16))  # once JAX's 'incompatible devices ... state[2][2]'


def test_the_step_state_read_from_shapes_is_the_state_fit_holds(tiny):
    """`step_state` lays out the state Keras's JAX `train_step(state, data)` takes (trainable, non-trainable,
    optimizer and metrics variables, the order Keras's guide to a custom `train_step` documents) from shapes:
    the same shapes, dtypes and shardings as the real arrays of a model built under the distribution."""
    from course_utils.communication.train_step import step_state

    dist = tiny.megatron((2, 4))
    model = tiny.built_under(dist)
    model.optimizer.build(model.trainable_variables)
    with dist.scope():
        model.evaluate(np.zeros((8, 16), "float32"), np.zeros((8, 4), "float32"), verbose=0)  # metrics built
    real = (model.trainable_variables, model.non_trainable_variables, model.optimizer.variables,
            model.metrics_variables)
    for specs, variables in zip(step_state(model, dist), real, strict=True):
        assert [(s.shape, s.dtype, s.sharding) for s in specs] == [
            (tuple(v.value.shape), v.value.dtype, v.value.sharding) for v in variables]
