"""explain_layout: which rule gave each variable which layout, read from Keras and JAX."""

import pytest
from keras import distribution

from course_utils import explain_layout, make_mesh, placement
from course_utils.layouts.layout_map import UNMATCHED


def test_explain_layout_rows_come_from_keras(mesh, mlp, good_map):
    dist = distribution.ModelParallel(layout_map=good_map(mesh), batch_dim_name="data")
    with dist.scope():
        model = mlp()
    report = explain_layout(model, dist)
    assert [r.path for r in report.rows] == ["mlp/d1/kernel", "mlp/d1/bias", "mlp/d2/kernel", "mlp/d2/bias"]
    kernel = report.row("mlp/d1/kernel")
    assert kernel.rule == ".*d1/kernel" and kernel.axes == (None, "model")
    assert kernel.shard_shape == (16, 8) and kernel.bytes_per_device == 16 * 8 * 4
    assert report.row("mlp/d2/bias").rule == UNMATCHED
    # the planned placement is where the real variable lives
    for row, variable in zip(report.rows, model.variables):
        assert row.placement == placement(variable)
    assert "mlp/d1/kernel" in repr(report) and "<table>" in report._repr_html_()


def test_optimizer_variables_follow_their_weight(mesh, mlp, good_map):
    dist = distribution.ModelParallel(layout_map=good_map(mesh), batch_dim_name="data")
    with dist.scope():
        model = mlp()
        model.compile(optimizer="adam", loss="mse")
        model.optimizer.build(model.trainable_variables)
    report = explain_layout(model, dist)
    momentum = next(r for r in report.rows if r.path.endswith("mlp_d1_kernel_momentum"))
    assert momentum.rule == "follows mlp/d1/kernel"
    assert momentum.axes == (None, "model") and momentum.shard_shape == (16, 8)
    real = next(v for v in model.optimizer.variables if v.path == momentum.path)
    assert placement(real).shard_shape == (16, 8)


def test_data_parallel_replicates_everything(mlp):
    mesh = make_mesh((8,), ("data",))
    dist = distribution.DataParallel(device_mesh=mesh)
    report = explain_layout(mlp(), dist)
    assert {r.rule for r in report.rows} == {"replicated: DataParallel"}
    assert all(r.shard_shape == r.shape for r in report.rows)
    assert report.bytes_per_device["cpu:0"] == (16 * 32 + 32 + 32 * 4 + 4) * 4


def test_arrays_not_laid_out_as_planned_are_flagged(mesh, mlp, good_map):
    dist = distribution.ModelParallel(layout_map=good_map(mesh), batch_dim_name="data")
    outside = explain_layout(mlp(), dist)  # built outside the scope: every array sits whole on one device
    assert not outside.row("mlp/d1/kernel").as_planned
    assert "NOT laid out as planned" in outside.title and "NO" in repr(outside)
    with dist.scope():
        inside = explain_layout(mlp(), dist)
    assert all(r.as_planned for r in inside.rows) and "NOT" not in inside.title


def test_explain_layout_without_a_distribution_says_what_to_pass(mlp):
    with pytest.raises(TypeError, match=r"Received: distribution=None\. Pass a keras.distribution.DataParallel"):
        explain_layout(mlp(), None)


def test_rules_whose_axes_are_a_bare_string_get_the_fix(mesh):
    from course_utils import make_layout_map

    with pytest.raises(TypeError, match=r"axes of rule 'd1/kernel' must be a tuple.*Received: 'model' \(str\)"
                                        r".*\('model',\).*\(None, 'model'\)"):
        make_layout_map(mesh, {"d1/kernel": "model"})  # once read as the axes 'm', 'o', 'd', 'e', 'l'


def test_a_key_that_is_not_a_regular_expression_is_named(mesh, mlp):
    layout_map = distribution.LayoutMap(mesh)
    layout_map["d1/kernel("] = (None, "model")
    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    with pytest.raises(ValueError, match=r"the LayoutMap key 'd1/kernel\(' is not a regular expression"):
        explain_layout(mlp(), dist)  # once a bare re.error that named no key


# Property: check_layout_map finds a problem (other than an unused key, which breaks nothing) exactly
# when Keras and JAX refuse to build and call the model under the map.


def test_a_model_laid_out_by_another_map_is_explained_by_the_map_asked_about(mesh, mlp, good_map):
    # Keras's get_variable_layout returns the layout a variable was created with; the report must show
    # what the new map gives it, and say the array lives otherwise (it did show the old axes, "as planned")
    with distribution.ModelParallel(layout_map=good_map(mesh), batch_dim_name="data").scope():
        model = mlp()
    other = distribution.LayoutMap(mesh)
    other[".*d2/kernel"] = (None, "model")
    report = explain_layout(model, distribution.ModelParallel(layout_map=other, batch_dim_name="data"))
    assert report.row("mlp/d2/kernel").axes == (None, "model") and not report.row("mlp/d2/kernel").as_planned
    assert report.row("mlp/d1/kernel").axes == (None, None) and not report.row("mlp/d1/kernel").as_planned
    assert report.row("mlp/d2/bias").as_planned  # whole under both maps
    assert "NOT laid out as planned" in report.title
