"""Drawings are checked by what they contain (blocks, labels), not by pixels."""

import keras
from keras import distribution
from matplotlib.figure import Figure

from course_utils import device_color, draw_batch_split, draw_mesh, draw_model, draw_placement, make_mesh, planned_placement
from course_utils.viz import BLOCK_GID


def blocks_drawn(fig):
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == BLOCK_GID]


def texts(fig):
    found = [t.get_text() for ax in fig.axes for t in ax.texts]
    found += [ax.get_xlabel() for ax in fig.axes] + [ax.get_ylabel() for ax in fig.axes]
    found += [ax.get_title() for ax in fig.axes] + [fig.get_suptitle()]
    return "\n".join(found)


def test_draw_mesh_2d():
    fig = draw_mesh(make_mesh((2, 4), ("data", "model")))
    assert isinstance(fig, Figure)
    assert len(blocks_drawn(fig)) == 8
    text = texts(fig)
    assert "axis 'data' (size 2)" in text and "axis 'model' (size 4)" in text
    assert all(f"cpu:{i}" in text for i in range(8)) and "CPU" in text


def test_draw_mesh_1d_and_3d():
    assert len(blocks_drawn(draw_mesh(make_mesh((8,), ("data",))))) == 8
    fig = draw_mesh(make_mesh((2, 2, 2), ("a", "b", "c")))
    assert len([ax for ax in fig.axes if ax.patches]) == 2
    assert "a = 0" in texts(fig) and "a = 1" in texts(fig)
    assert "cpu:5\n(1, 0, 1)" in texts(fig)  # the full 3-D coordinate


def test_device_colors_are_the_same_everywhere():
    mesh_fig = draw_mesh(make_mesh((8,), ("data",)))
    cells = blocks_drawn(mesh_fig)
    assert [tuple(c.get_facecolor()[:3]) for c in cells] == [tuple(device_color(f"cpu:{i}")[:3]) for i in range(8)]
    assert device_color("cpu:3") == device_color(3)


def test_draw_placement_blocks_and_labels():
    p = planned_placement((32, 64), distribution.TensorLayout((None, "model"), make_mesh((2, 4), ("data", "model"))))
    fig = draw_placement(p)
    assert len(blocks_drawn(fig)) == 4
    text = texts(fig)
    assert "split over 'model' into 4" in text and "dim 0: 32, whole on every device" in text
    assert "cpu:0, cpu:4" in text  # a replicated block lists every device holding it


def test_draw_placement_high_rank_panels():
    mesh = make_mesh((2, 4), ("data", "model"))
    p = planned_placement((2, 3, 8, 4), distribution.TensorLayout((None, None, "model", "data"), mesh))
    fig = draw_placement(p)
    assert len(blocks_drawn(fig)) == 8
    assert "dim 0 in [0:2), dim 1 in [0:3)" in texts(fig)


def test_draw_batch_split():
    mesh = make_mesh((2, 4), ("data", "model"))
    layout_map = distribution.LayoutMap(mesh)
    fig = draw_batch_split((16, 10), distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data"))
    assert len(blocks_drawn(fig)) == 2
    assert "2 sub-batches of 8 rows" in texts(fig) and "cpu:0, cpu:1, cpu:2, cpu:3" in texts(fig)


def test_draw_model_caps_panels_and_totals_bytes():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,))] + [keras.layers.Dense(8, name=f"d{i}") for i in range(5)])
    fig = draw_model(model, distribution.DataParallel(device_mesh=make_mesh((8,), ("data",))), max_panels=4)
    assert "and 6 more not drawn" in fig.get_suptitle()
    bars = fig.axes[-1]
    assert len(bars.patches) == 8
    assert bars.patches[0].get_height() == 5 * (8 * 8 + 8) * 4


def test_figures_render_to_png_for_notebooks():
    from course_utils.viz import figure_png

    png = figure_png(draw_mesh(make_mesh((2, 4), ("data", "model"))))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_one_block_is_singular():
    p = planned_placement((4, 4), distribution.TensorLayout((None, None), make_mesh((8,), ("data",))))
    assert "1 block," in draw_placement(p).get_suptitle()
