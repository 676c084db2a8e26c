"""Bytes per device of a model's training state: from the real shards, and planned from shapes."""

import keras
import pytest

from course_utils import memory_report


def test_memory_replicated(tiny):
    dp = tiny.data_parallel()
    replicated = memory_report(tiny.built_under(dp), dp)
    assert {r.weights for r in replicated.rows} == {tiny.gradient_bytes}
    assert {r.optimizer for r in replicated.rows} == {2 * tiny.gradient_bytes + 8}  # m, v, iteration, lr


def test_model_axis_of_four_holds_a_quarter_of_the_sharded_weights(tiny):
    dp, mp = tiny.data_parallel(), tiny.megatron((2, 4))
    replicated = memory_report(tiny.built_under(dp), dp).rows[0]
    sharded = memory_report(tiny.built_under(mp), mp).rows[0]
    d2_bias = 4 * 4  # the only weight left replicated
    assert sharded.weights - d2_bias == (replicated.weights - d2_bias) // 4
    assert sharded.gradients == sharded.weights
    assert "optimizer state" in repr(memory_report(tiny.built_under(mp), mp))


def test_an_unbuilt_model_is_refused_with_the_fix(tiny):
    model = keras.Sequential([keras.layers.Dense(4)], name="unbuilt")
    model.compile(optimizer="adam", loss="mse")
    with pytest.raises(ValueError, match=r"memory_report needs a built model; 'unbuilt' has no variables yet"):
        memory_report(model, tiny.data_parallel())


def test_planned_from_layout_rows_equals_the_real_shards_with_adams_slots_on_their_weights(tiny):
    from course_utils.layouts.layout_map import layout_rows
    from course_utils.memory.state import memory_of_rows, planned_memory

    mp = tiny.megatron((2, 4))
    model = tiny.built_under(mp)
    real = memory_report(model, mp)
    assert planned_memory(model, mp).rows == real.rows
    model.optimizer.build(model.trainable_variables)
    rows = layout_rows(model, mp, optimizer_variables=model.optimizer.variables)
    assert memory_of_rows(model, rows, title="t").rows == real.rows
    slots = {r.path.split("/", 1)[1]: r.rule for r in rows if r.path.startswith("adam")}
    assert slots["mlp_d1_kernel_momentum"] == "follows mlp/d1/kernel"
    assert slots["iteration"] == "replicated: no rule matched"
    assert all(r.as_planned for r in rows)


def test_a_model_built_outside_the_scope_is_said_to_be_so(tiny):
    mp = tiny.megatron((2, 4))
    outside = tiny.build()  # not under mp.scope(): every array sits whole on one device
    with pytest.warns(UserWarning, match=r"4 of 4 weights \(first: 'mlp/d1/kernel'\) live outside"):
        report = memory_report(outside, mp)
    assert "NOT laid out by it" in report.title and "build the model inside" in report.title
    assert [r.device for r in report.rows] == ["cpu:0"]  # where the arrays really are
    with mp.scope():
        inside = tiny.build()
    assert "NOT" not in memory_report(inside, mp).title
