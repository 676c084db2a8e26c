import keras
import pytest
from keras import distribution

from course_utils import LayoutMapError, check_layout_map, explain_layout, make_mesh, placement
from course_utils.layout import UNMATCHED


def mlp(hidden=32):
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [keras.Input((16,)), keras.layers.Dense(hidden, name="d1"), keras.layers.Dense(4, name="d2")],
        name="mlp",
    )


@pytest.fixture
def mesh():
    return make_mesh((2, 4), ("data", "model"))


def good_map(mesh):
    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")
    layout_map[".*d1/bias"] = ("model",)
    layout_map[".*d2/kernel"] = ("model", None)
    return layout_map


def test_explain_layout_rows_come_from_keras(mesh):
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


def test_optimizer_variables_follow_their_weight(mesh):
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


def test_data_parallel_replicates_everything():
    mesh = make_mesh((8,), ("data",))
    dist = distribution.DataParallel(device_mesh=mesh)
    report = explain_layout(mlp(), dist)
    assert {r.rule for r in report.rows} == {"replicated: DataParallel"}
    assert all(r.shard_shape == r.shape for r in report.rows)
    assert report.bytes_per_device["cpu:0"] == (16 * 32 + 32 + 32 * 4 + 4) * 4


def test_check_layout_map_clean(mesh):
    assert check_layout_map(good_map(mesh), mlp()) == []


def test_fullmatch_trap_is_found(mesh):
    layout_map = distribution.LayoutMap(mesh)
    layout_map["d1/kernel"] = (None, "model")
    problems = check_layout_map(layout_map, mlp())
    assert [p.kind for p in problems] == ["unmatched_key"]
    assert "'d1/kernel' matches no variable" in problems[0].message
    assert "'mlp/d1/kernel'" in problems[0].message and "'.*d1/kernel'" in problems[0].message


def test_two_keys_one_variable(mesh):
    layout_map = good_map(mesh)
    layout_map[".*kernel"] = (None, None)
    problems = check_layout_map(layout_map, mlp())
    two = [p for p in problems if p.kind == "two_keys"]
    assert {p.path for p in two} == {"mlp/d1/kernel", "mlp/d2/kernel"}
    assert "'.*kernel'" in two[0].message


def test_divisibility_and_rank(mesh):
    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")
    layout_map[".*d2/bias"] = ("model", None)
    problems = check_layout_map(layout_map, mlp(hidden=30))
    messages = " ".join(p.message for p in problems)
    assert {p.kind for p in problems} == {"bad_layout"}
    assert "size 30" in messages and "4 equal parts" in messages
    assert "2 entries but the tensor has 1" in messages


def test_axis_name_not_in_mesh(mesh):
    layout_map = distribution.LayoutMap(mesh)
    other = make_mesh((4, 2), ("batch", "tensor"))
    layout_map[".*d1/kernel"] = distribution.TensorLayout((None, "tensor"), other)
    problems = check_layout_map(layout_map, mlp())
    assert problems and "not an axis of the mesh ('data', 'model')" in problems[0].message


def test_strict_raises(mesh):
    layout_map = distribution.LayoutMap(mesh)
    layout_map["d1/kernel"] = (None, "model")
    with pytest.raises(LayoutMapError, match="1 problem"):
        check_layout_map(layout_map, mlp(), strict=True)


def test_unbuilt_model_is_refused(mesh):
    unbuilt = keras.Sequential([keras.layers.Dense(4)])
    with pytest.raises(ValueError, match="no variables yet. Build it first"):
        check_layout_map(good_map(mesh), unbuilt)


def test_layer_output_keys_count_as_matched(mesh):
    layout_map = good_map(mesh)
    layout_map[".*d2/output"] = ("data", None)  # Keras looks up "<layer path>/output" in Layer.__call__
    assert check_layout_map(layout_map, mlp()) == []


def test_arrays_not_laid_out_as_planned_are_flagged(mesh):
    dist = distribution.ModelParallel(layout_map=good_map(mesh), batch_dim_name="data")
    outside = explain_layout(mlp(), dist)  # built outside the scope: every array sits whole on one device
    assert not outside.row("mlp/d1/kernel").as_planned
    assert "NOT laid out as planned" in outside.title and "NO" in repr(outside)
    with dist.scope():
        inside = explain_layout(mlp(), dist)
    assert all(r.as_planned for r in inside.rows) and "NOT" not in inside.title
