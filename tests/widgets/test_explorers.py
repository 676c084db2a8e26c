"""The explorers, driven by setting their controls: the state they show is the real code's answer."""

import pytest
from keras.distribution import TensorLayout

from course_utils import make_mesh, memory_report, mesh_shapes, planned_placement
from course_utils.layouts.layout_map import explain_layout, make_layout_map
from course_utils.models import mlp, mlp_rules, transformer_block, transformer_rules
from course_utils.widgets.model import built_under
from course_utils.widgets import layout_explorer, mesh_explorer, model_explorer

SVG = b"<svg "


def test_mesh_explorer_offers_every_valid_shape_and_draws_the_real_mesh():
    explorer = mesh_explorer()
    assert [value for _, value in explorer.shape.options] == mesh_shapes(8, 2)
    explorer.shape.value = (4, 2)
    assert explorer.mesh.shape == (4, 2) and explorer.message == ""
    assert (explorer.mesh.devices == make_mesh((4, 2), ("data", "model")).devices).all()
    assert explorer.table.device_at(1, 0) == explorer.mesh.devices[1, 0]
    assert bytes(explorer.image.value).startswith(SVG)


def test_mesh_explorer_switches_between_one_two_and_three_axes():
    explorer = mesh_explorer()
    explorer.ndim.value = 3
    assert [value for _, value in explorer.shape.options] == mesh_shapes(8, 3)
    assert explorer.mesh.shape == (2, 2, 2)
    assert tuple(explorer.mesh.axis_names) == ("host", "data", "model")
    explorer.ndim.value = 1
    assert explorer.mesh.shape == (8,) and tuple(explorer.mesh.axis_names) == ("data",)


def test_mesh_explorer_shows_a_bad_name_choice_as_a_message():
    explorer = mesh_explorer()
    before = bytes(explorer.image.value)
    explorer.axis_names.value = "data, data"
    assert explorer.mesh is None
    assert "distinct" in explorer.message and "Not possible" in explorer.status.value
    assert bytes(explorer.image.value) == before
    explorer.axis_names.value = "rows, cols"
    assert explorer.message == "" and tuple(explorer.mesh.axis_names) == ("rows", "cols")


def test_layout_explorer_shows_the_planned_placement():
    explorer = layout_explorer((16, 32))
    mesh = explorer.mesh
    expected = planned_placement((16, 32), TensorLayout(("data", "model"), mesh))
    assert explorer.placement.shard_shape == expected.shard_shape == (8, 8)
    assert explorer.placement.blocks == expected.blocks and len(expected.blocks) == 8
    explorer.axes[0].value = None
    expected = planned_placement((16, 32), TensorLayout((None, "model"), mesh))
    assert explorer.placement.shard_shape == (16, 8)
    assert len(explorer.placement.blocks) == 4 and explorer.placement.replication == 2
    assert explorer.placement.bytes_per_device == expected.bytes_per_device
    assert "512" in explorer.status.value and "(16, 8)" in explorer.status.value
    drawing = bytes(explorer.image.value).decode()
    assert drawing.count(">2 copies<") == 4 and ">cpu:0, cpu:4<" in drawing  # the SVG is the new placement
    assert ">dim 1: 32, split over &#x27;model&#x27; in 4<" in drawing


def test_layout_explorer_changes_with_the_tensor_shape():
    explorer = layout_explorer((16, 32), make_mesh((8,), ("data",)))
    explorer.sizes[0].value = 40
    assert explorer.placement.shape == (40, 32) and explorer.placement.shard_shape == (5, 32)
    assert max(explorer.placement.bytes_per_device.values()) == 5 * 32 * 4


@pytest.mark.parametrize("change, words", [
    (lambda e: setattr(e.sizes[1], "value", 10), "does not divide"),
    (lambda e: setattr(e.axes[0], "value", "model"), "more than one dimension"),
])
def test_layout_explorer_explains_an_impossible_choice(change, words):
    explorer = layout_explorer((16, 32))
    change(explorer)
    assert words in explorer.message and explorer.placement is None
    assert "Not possible" in explorer.status.value
    explorer.axes[1].value = None
    explorer.sizes[1].value = 32
    assert explorer.message == "" and explorer.placement is not None


def _real_memory(distribution):
    """Bytes per device read from the shards of a model really built under `distribution`."""
    with distribution.scope():
        model = mlp()
        model.compile(optimizer="adam", loss="mse")
        model.optimizer.build(model.trainable_variables)
    return memory_report(model, distribution)


def test_model_explorer_memory_equals_the_real_shards():
    model = mlp()
    explorer = model_explorer(model, mlp_rules())
    assert explorer.mesh_shape.value == (2, 4) and explorer.preset.value == "tensor parallel"
    assert explorer.report.row("mlp/d1/kernel").shard_shape == (64, 64)
    # the optimizer's name gets a suffix when other Adam optimizers exist in the process (adam_3/...)
    momentum = next(r for r in explorer.report.rows if r.path.endswith("/mlp_d1_kernel_momentum"))
    assert momentum.rule == "follows mlp/d1/kernel" and momentum.shard_shape == (64, 64)
    assert explorer.memory.rows == _real_memory(explorer.distribution).rows
    explorer.mesh_shape.value = (1, 8)
    assert explorer.report.row("mlp/d1/kernel").shard_shape == (64, 32)
    assert explorer.memory.rows == _real_memory(explorer.distribution).rows
    assert getattr(model, "optimizer", None) is None, "the explorer works on a copy"


def test_model_explorer_replicated_preset_is_data_parallel():
    explorer = model_explorer(mlp(), mlp_rules())
    explorer.preset.value = "replicated"
    weights = sum(v.numpy().nbytes for v in mlp().weights)
    for row in explorer.memory.rows:
        assert (row.weights, row.gradients) == (weights, weights)
        assert row.optimizer == 2 * weights + 8  # momentum, velocity; iteration and learning rate
    assert all(set(r.axes) <= {None} for r in explorer.report.rows)
    assert bytes(explorer.image.value).startswith(SVG) and explorer.table.value.startswith("<table>")


def test_model_explorer_rebinds_a_layout_map_to_each_mesh():
    rules = make_layout_map(make_mesh((4, 2), ("data", "model")), mlp_rules())
    explorer = model_explorer(mlp(), rules)
    explorer.mesh_shape.value = (8, 1)
    assert explorer.distribution.device_mesh.shape == (8, 1)
    assert explorer.report.row("mlp/d1/kernel").axes == (None, "model")
    assert explorer.report.row("mlp/d1/kernel").shard_shape == (64, 256)


def test_model_explorer_explains_a_layout_that_does_not_fit():
    explorer = model_explorer(mlp(hidden=12), mlp_rules())
    assert explorer.message == ""  # 12 hidden units split 4 ways on (2, 4)
    explorer.mesh_shape.value = (1, 8)
    assert "does not divide" in explorer.message and "mlp/d1/kernel" in explorer.message
    assert explorer.memory is None and "Not possible" in explorer.status.value


@pytest.mark.parametrize("build, rules", [(mlp, mlp_rules), (transformer_block, transformer_rules)])
def test_model_explorer_plan_is_what_a_real_build_holds(build, rules):
    """The explorer builds nothing per choice; here every choice is built for real and compared."""
    explorer = model_explorer(build(), rules())
    for shape in mesh_shapes(8, 2):
        for preset in ("tensor parallel", "replicated"):
            with explorer.hold():
                explorer.mesh_shape.value, explorer.preset.value = shape, preset
            if explorer.message:  # a layout this mesh cannot split: nothing to compare
                continue
            real = explain_layout(built_under(explorer.model, explorer.distribution), explorer.distribution)
            assert all(row.as_planned for row in real.rows), "the real build followed its layout"
            assert len(explorer.report.rows) == len(real.rows) > 0
            for planned, built in zip(explorer.report.rows, real.rows):
                assert planned.path.split("/", 1)[-1] == built.path.split("/", 1)[-1]  # optimizer names may differ
                assert (planned.placement.blocks, planned.rule) == (built.placement.blocks, built.rule), planned.path
            assert explorer.memory.rows == _real_memory_of(explorer.model, explorer.distribution).rows


def _real_memory_of(model, distribution):
    return memory_report(built_under(model, distribution), distribution)


def test_model_explorer_draws_the_largest_weights_with_memory():
    explorer = model_explorer(transformer_block(), transformer_rules())
    assert bytes(explorer.image.value).startswith(SVG)
    assert all(row.as_planned is None for row in explorer.report.rows)  # planned: no arrays to compare
    assert "no array" in explorer.table.value and ">yes<" not in explorer.table.value
    from course_utils.widgets.model import PANELS, largest_weights
    shown = largest_weights(explorer.report, len(explorer.model.variables))
    assert len(shown.rows) == PANELS
    assert {r.path for r in shown.rows} >= {"ffn1/kernel", "ffn2/kernel", "attn/query/kernel"}
    assert "ln1/gamma" not in {r.path for r in shown.rows}
