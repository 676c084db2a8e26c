"""Drawings are checked by the marks they contain (blocks, copies, names, sizes), read from their artists."""

import warnings

import keras
import matplotlib
import numpy as np
import pytest
from keras import distribution
from keras.distribution import DeviceMesh, TensorLayout
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Text

from course_utils import explain_layout, make_mesh, planned_placement
from course_utils.layouts.layout_map import make_layout_map
from course_utils.models import transformer_block, transformer_rules
from course_utils.placements import Block, Placement
from course_utils.viz import (BLOCK_GID, DEVICE_COLORS, draw_batch_split, draw_memory, draw_mesh, draw_model,
                              draw_placement, figure_png, projected_sizes)
from course_utils.viz.bars import BAR_GID
from course_utils.viz.blocks import COPIES_GID, LIT_GID, UNLIT_GID
from course_utils.viz.figures import MIN_PROJECTED_PT


def marks(fig, gid):
    return [a for a in fig.findobj() if getattr(a, "get_gid", lambda: None)() == gid]


def cells(fig, gid) -> int:
    """How many cells the small meshes marked `gid` draw (each small mesh: a collection of cells per gid)."""
    return sum(len(c.get_paths()) for c in marks(fig, gid))


def texts(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_visible())


def words(fig) -> str:
    """All the text, wrapped lines joined by single spaces."""
    return " ".join(texts(fig).split())


def rendered(fig) -> bytes:
    """Renders like a notebook does; any layout warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return figure_png(fig)


def assert_projected_legibly(fig):
    sizes = projected_sizes(fig)
    smallest = min(sizes, key=lambda pair: pair[1])
    assert smallest[1] >= MIN_PROJECTED_PT, f"{smallest[0]!r} shows at {smallest[1]:.1f} pt on a 1280 px projector"


MESH = make_mesh((2, 4), ("data", "model"))


def test_a_fully_replicated_kernel_is_one_stack_of_copies_not_a_split():
    fig = draw_placement(planned_placement((64, 128), TensorLayout((None, None), MESH)))
    assert len(marks(fig, BLOCK_GID)) == 1
    assert len(marks(fig, COPIES_GID)) == 2  # the cards behind the block
    assert cells(fig, LIT_GID) == 8 and cells(fig, UNLIT_GID) == 0  # the small mesh: every device lit
    block = marks(fig, BLOCK_GID)[0]
    assert block.get_facecolor()[3] == 0  # no device's colour on the block itself
    assert "8 copies" in texts(fig) and "cpu:0-7" in texts(fig)
    assert "the same block copied on N devices, not a split" in words(fig)


def test_a_split_fills_each_block_with_its_device_colour():
    fig = draw_placement(planned_placement((16, 32), TensorLayout(("data", "model"), MESH)))
    blocks = marks(fig, BLOCK_GID)
    assert len(blocks) == 8 and not marks(fig, COPIES_GID)
    assert sorted(to_hex(b.get_facecolor()) for b in blocks) == sorted(DEVICE_COLORS)
    assert cells(fig, LIT_GID) == 8 and cells(fig, UNLIT_GID) == 8 * 7
    lit = [to_hex(face) for mesh in marks(fig, LIT_GID) for face in mesh.get_facecolor()]
    assert sorted(lit) == sorted(DEVICE_COLORS)  # each block's small mesh lights its holder, in its colour
    assert "Pale stack" not in words(fig)  # the legend names only the marks the figure uses


def test_column_blocks_copied_on_two_devices_name_both_holders():
    fig = draw_placement(planned_placement((32, 64), TensorLayout((None, "model"), MESH)))
    assert len(marks(fig, BLOCK_GID)) == 4 and len(marks(fig, COPIES_GID)) == 4
    text = texts(fig)
    assert text.count("2 copies") == 4 and "cpu:0, cpu:4" in text and "cpu:3, cpu:7" in text
    assert "split over 'model' in 4" in text and "dim 0: 32, whole" in text


@pytest.mark.parametrize("shape, axes", [
    ((64, 4, 16), (None, "model", None)),
    ((2, 3, 8, 4), (None, None, "model", "data")),
    ((8, 4, 8, 2), ("data", None, "model", None)),
])
def test_every_dimension_is_drawn_or_named(shape, axes):
    fig = draw_placement(planned_placement(shape, TensorLayout(axes, MESH)))
    text = texts(fig)
    for dim, size in enumerate(shape):
        assert f"dim {dim}: {size}" in text or f"dim {dim} ({size})" in text, f"dim {dim} is not in the figure"


def test_draw_model_names_the_dimension_a_3d_kernel_does_not_draw():
    dist = distribution.ModelParallel(layout_map=make_layout_map(MESH, transformer_rules()), batch_dim_name="data")
    with dist.scope():
        model = transformer_block(heads=4, width=64)
    fig = draw_model(explain_layout(model, dist, optimizer=False))
    query = next(" ".join(t.get_text().split()) for t in fig.texts if t.get_text().startswith("attn/query/kernel"))
    assert "(64, 4, 16)" in query and "dim 0 (64): whole, not drawn" in query  # wrapped to its panel: words compared


def test_draw_model_takes_a_report_and_pages_instead_of_shrinking():
    dist = distribution.ModelParallel(layout_map=make_layout_map(MESH, transformer_rules()), batch_dim_name="data")
    with dist.scope():
        model = transformer_block()
    report = explain_layout(model, dist)
    first, second = draw_model(report, per_page=12), draw_model(report, per_page=12, page=1)
    assert "page 1 of 2" in first.texts[0].get_text() and "draw_model(..., page=1)" in first.texts[0].get_text()
    assert first.get_size_inches()[0] <= 13.0
    heights = np.array([bar.get_height() for bar in marks(first, BAR_GID)])
    totals = np.array([report.bytes_per_device[f"cpu:{i}"] for i in range(8)])
    np.testing.assert_allclose(heights / heights.max(), totals / totals.max())  # bar i is device i's bytes
    assert [to_hex(bar.get_facecolor()) for bar in marks(first, BAR_GID)] == list(DEVICE_COLORS)
    assert f"largest: {totals.max():,}" in texts(first)
    assert "variables 13-18 of 18" in second.texts[0].get_text()
    with pytest.raises(ValueError, match="page=0 to 1"):
        draw_model(report, page=2)


def _mlp_under_megatron():
    from course_utils.models import mlp, mlp_rules
    from course_utils.widgets.model import built_under

    dist = distribution.ModelParallel(layout_map=make_layout_map(MESH, mlp_rules()), batch_dim_name="data")
    keras.utils.set_random_seed(0)
    return built_under(mlp(hidden=128), dist), dist  # lesson 03's MLP: d1 (64, 128), d2 (128, 10)


def test_draw_model_draws_a_panel_to_scale_or_says_it_is_not():
    from course_utils.viz.model import BLOCKS, MAX_RATIO, SCALE_RULE, _panel

    model, dist = _mlp_under_megatron()
    rows = {r.path: r for r in explain_layout(model, dist).rows}
    view, title, (w, h) = _panel(rows["mlp/d1/kernel"])
    assert h / w == pytest.approx(64 / 128) and "not to scale" not in title  # wide enough to draw as it is
    view, title, (w, h) = _panel(rows["mlp/d2/kernel"])
    assert "not to scale (really 12.8\u00d7 taller)" in " ".join(title.split())  # 128 x 10: no room for the names
    assert h > w and h <= MAX_RATIO * BLOCKS + 1e-9  # still taller than wide, and within a panel's box
    fig = draw_model(explain_layout(model, dist, optimizer=False))
    assert "not to scale (really 12.8\u00d7 taller)" in words(fig) and " ".join(SCALE_RULE.split()) in words(fig)
    assert words(fig).count("not to scale (really") == 1
    assert_projected_legibly(fig)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    boxes = [t.get_window_extent(canvas.get_renderer()) for t in fig.texts if t.get_text()]
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


def test_a_panel_drawn_to_scale_keeps_every_mark_it_shows_in_the_whole_box():
    from course_utils.viz.panels import label_marks, panel_views, scaled_panel

    box = (2.65, 2.12)
    for shape, axes, to_scale in [((64, 128), (None, "model"), True), ((64, 64), ("model", None), True),
                                  ((128, 10), ("model", None), False), ((4, 64), ("model", "data"), False)]:
        p = planned_placement(shape, TensorLayout(axes, MESH))
        view = panel_views(p)[0]
        w, h, scaled = scaled_panel(p, view, box, compact=True)
        assert scaled == to_scale, shape
        assert w <= box[0] + 1e-9 and h <= box[1] + 1e-9
        assert label_marks(p, view, (w, h), compact=True) == label_marks(p, view, box, compact=True)
        assert (h > w) == (shape[0] > shape[1])  # squashed or not, a tall tensor is drawn tall


def test_draw_placement_says_when_it_squashes_a_long_tensor():
    assert "not to scale (really 64\u00d7 taller)" in texts(draw_placement(
        planned_placement((640, 10), TensorLayout(("model", None), MESH))))
    assert "not to scale" not in texts(draw_placement(planned_placement((32, 64), TensorLayout((None, "model"), MESH))))


def test_long_paths_of_a_real_model_never_collide():
    keras_hub = pytest.importorskip("keras_hub")
    mesh = make_mesh((2, 4), ("batch", "model"))
    dist = distribution.ModelParallel(layout_map=keras_hub.models.GemmaBackbone.get_layout_map(mesh),
                                      batch_dim_name="batch")
    with dist.scope():
        model = keras_hub.models.GemmaBackbone(vocabulary_size=128, num_layers=2, num_query_heads=4,
                                               num_key_value_heads=4, hidden_dim=64, intermediate_dim=128,
                                               head_dim=16)
    assert len(model.weights) >= 20
    fig = draw_model(explain_layout(model, dist, optimizer=False))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.texts if t.get_text()]
    overlaps = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
    assert not overlaps
    assert_projected_legibly(fig)


def fake_mesh(shape, names):
    return DeviceMesh(shape, names, [f"cpu:{i}" for i in range(int(np.prod(shape)))])


@pytest.mark.parametrize("shape, names", [
    ((8, 8), ("data", "model")), ((8, 64), ("data", "model")), ((8, 8, 8), ("host", "data", "model")),
    ((512,), ("data",)),
])
def test_big_meshes_draw_without_layout_warnings_and_with_ranges(shape, names):
    fig = draw_mesh(fake_mesh(shape, names))
    rendered(fig)
    assert_projected_legibly(fig)
    cells = marks(fig, BLOCK_GID)
    assert len(cells) == np.prod(shape)
    assert len({to_hex(c.get_facecolor()) for c in cells}) <= len(DEVICE_COLORS)
    text = texts(fig)
    assert "colour = " in words(fig) and "labels name the devices" in words(fig)
    if np.prod(shape) >= 512:
        assert "cpu:511\n" not in text  # no per-device labels: ranges instead
        assert "cpu:448-511" in text or "cpu:504-511" in text or "cpu:480" in text


def test_a_placement_on_a_512_device_mesh_draws():
    devices = tuple(f"cpu:{i}" for i in range(512))
    index = tuple((d, ((64 * (i // 64), 64 * (i // 64) + 64), (8 * (i % 64) // 8 * 8, 8 * (i % 64) // 8 * 8 + 8)))
                  for i, d in enumerate(devices))
    p = Placement(shape=(512, 512), dtype="float32", shard_shape=(64, 8), mesh_shape=(8, 64),
                  axis_names=("data", "model"), dim_axes=(("data",), ("model",)), device_index=index,
                  device_bytes=tuple((d, 64 * 8 * 4) for d in devices), name="big")
    assert len(p.blocks) == 512 and isinstance(p.blocks[0], Block)
    fig = draw_placement(p)
    rendered(fig)
    assert len(marks(fig, BLOCK_GID)) == 512 and cells(fig, LIT_GID) == 0  # no mini meshes of 512 specks
    assert "mesh row ('data' index)" in words(fig)


def test_small_meshes_label_every_device_with_its_full_coordinate():
    fig = draw_mesh(make_mesh((2, 2, 2), ("host", "data", "model")))
    text = texts(fig)
    assert "cpu:6\n(1, 1, 0)" in text and "host = 1: cpu:4-7" in text
    assert "axis 'data' (size 2)" in text and "colour = device" in words(fig)
    cells = marks(fig, BLOCK_GID)
    assert [to_hex(c.get_facecolor()) for c in cells] == list(DEVICE_COLORS)


def test_lesson_figures_are_legible_projected():
    mp = distribution.ModelParallel(layout_map=distribution.LayoutMap(MESH), batch_dim_name="data")
    dp = distribution.DataParallel(device_mesh=make_mesh((8,), ("data",)))
    figures = [draw_mesh(MESH), draw_mesh(make_mesh((8,), ("data",))), draw_mesh(make_mesh((1, 8), ("data", "model"))),
               draw_placement(planned_placement((32, 64), TensorLayout((None, "model"), MESH), name="dense kernel")),
               draw_batch_split((16, 10), mp), draw_batch_split((64, 64), dp)]
    for fig in figures:
        assert isinstance(fig, Figure)
        assert_projected_legibly(fig)


def test_draw_batch_split_and_memory():
    mp = distribution.ModelParallel(layout_map=distribution.LayoutMap(MESH), batch_dim_name="data")
    fig = draw_batch_split((16, 10), mp)
    assert len(marks(fig, BLOCK_GID)) == 2 and "2 sub-batches of 8 rows" in words(fig)
    assert "cpu:0-3" in texts(fig) and "4 copies" in texts(fig)
    keras.utils.set_random_seed(0)
    from course_utils.widgets.model import built_under
    from course_utils import memory_report
    from course_utils.models import mlp
    memory = memory_report(built_under(mlp(), mp), mp)
    fig = draw_memory(memory)
    assert_projected_legibly(fig)
    bars = marks(fig, BAR_GID)
    assert len(bars) == 3 * 8 and {b.get_hatch() or "" for b in bars} == {"", "//", ".."}
    weights = np.array([b.get_height() for b in bars[0::3]])  # each device: weights, gradients, optimizer
    expected = np.array([r.weights for r in memory.rows])
    np.testing.assert_allclose(weights / weights.max(), expected / expected.max())


def test_draw_memory_by_compares_the_fullest_device_of_each_layout_in_the_palette(overlapping_texts):
    from course_utils import memory_report
    from course_utils.models import mlp
    from course_utils.viz import draw_memory_by
    from course_utils.viz.palette import MEMORY_COLORS
    from course_utils.widgets.model import built_under

    reports = {}
    for label, dist in [("replicated", distribution.DataParallel(devices=distribution.list_devices())),
                        ("2 x 4", distribution.ModelParallel(layout_map=distribution.LayoutMap(MESH),
                                                              batch_dim_name="data"))]:
        keras.utils.set_random_seed(0)
        reports[label] = memory_report(built_under(mlp(), dist), dist)
    fig = draw_memory_by(reports, title="Two layouts")
    assert_projected_legibly(fig)
    bars = marks(fig, BAR_GID)
    assert len(bars) == 3 * 2
    assert [matplotlib.colors.to_hex(b.get_facecolor()) for b in bars[:3]] == list(MEMORY_COLORS.values())
    heights = np.array([sum(b.get_height() for b in bars[k:k + 3]) for k in (0, 3)])
    totals = np.array([r.max_total for r in reports.values()])
    np.testing.assert_allclose(heights / heights.max(), totals / totals.max())
    assert "replicated" in texts(fig) and "2 x 4" in texts(fig)
    assert f"Two layouts (largest: {totals.max():,} bytes)" in texts(fig)
    # the legend sits under the title's line: a long title never hides it (it did in lessons 03 and 05)
    long = draw_memory_by(reports, title="Training state per device, every device holding the same amount")
    assert overlapping_texts(long) == []
    with pytest.raises(ValueError, match="at least one report"):
        draw_memory_by({})


def test_figures_render_to_png_for_notebooks():
    png = figure_png(draw_mesh(MESH))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_a_png_says_its_smallest_text_and_a_notebook_shows_it_at_half_its_pixels():
    import io

    from PIL import Image

    from course_utils.viz.figures import notebook_png, smallest_text_pt, smallest_text_px

    fig = draw_mesh(MESH)
    smallest = smallest_text_pt(fig)
    assert smallest == min(t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip())
    assert smallest_text_px(figure_png(fig, dpi=100)) == pytest.approx(smallest / 72 * 100, abs=0.01)
    png, metadata = notebook_png(fig)
    assert smallest_text_px(png) == pytest.approx(smallest / 72 * 200, abs=0.01)  # drawn at 200 dpi
    assert metadata == {"width": round(Image.open(io.BytesIO(png)).width / 2)}  # shown at 100
    assert smallest_text_px(figure_png(Figure())) is None  # no text: nothing said


def test_a_figure_explains_only_the_marks_it_shows():
    replicated = words(draw_placement(planned_placement((16, 32), TensorLayout((None, None), MESH))))
    assert "Filled block" not in replicated and "Pale stack" in replicated  # every block has copies
    split = words(draw_placement(planned_placement((16, 32), TensorLayout(("data", "model"), MESH))))
    assert "Filled block" in split and "Pale stack" not in split and "Small grid in a block" in split
    mesh_1x8 = make_mesh((1, 8), ("data", "model"))
    narrow = draw_placement(planned_placement((64, 128), TensorLayout((None, "model"), mesh_1x8)))
    assert not marks(narrow, LIT_GID)  # blocks too narrow for their small mesh...
    assert "Small grid" not in words(narrow)  # ...and the legend does not speak of one
    model, dist = _mlp_under_megatron()  # every block of every weight held by 2 devices or more
    drawn = words(draw_model(explain_layout(model, dist, optimizer=False)))
    assert "Filled block" not in drawn and "Pale stack" in drawn


def test_a_square_tensor_drawn_squashed_says_so_in_words():
    from course_utils.viz.panels import panel_views, scale_note

    p = planned_placement((64, 64), TensorLayout((None, "model"), MESH))
    assert scale_note(p, panel_views(p)[0]) == "not to scale (really square)"  # not "1x taller"


def test_draw_bytes_draws_one_bar_per_device_in_its_colour():
    from course_utils.viz import draw_bytes

    model, dist = _mlp_under_megatron()
    report = explain_layout(model, dist)
    fig = draw_bytes(report)
    heights = np.array([bar.get_height() for bar in marks(fig, BAR_GID)])
    totals = np.array([report.bytes_per_device[f"cpu:{i}"] for i in range(8)])
    np.testing.assert_allclose(heights / heights.max(), totals / totals.max())
    assert [to_hex(bar.get_facecolor()) for bar in marks(fig, BAR_GID)] == list(DEVICE_COLORS)
    with pytest.raises(ValueError, match=r"draw_bytes draws a LayoutReport with rows: pass explain_layout\(model, "
                                          r"distribution\).*Received: Sequential"):
        draw_bytes(model)
    with pytest.raises(ValueError, match="draw_model draws a LayoutReport with rows.*Received: Sequential"):
        draw_model(model)  # drawing never lays a model out itself


def test_draw_collectives_by_draws_each_axis_bytes_per_step():
    from course_utils import communication_report
    from course_utils.models import mlp, mlp_rules
    from course_utils.viz import draw_collectives_by
    from course_utils.widgets.model import built_under

    steps = {}
    for shape in ((8, 1), (2, 4)):
        dist = distribution.ModelParallel(layout_map=make_layout_map(make_mesh(shape, ("data", "model")),
                                                                     mlp_rules()), batch_dim_name="data")
        keras.utils.set_random_seed(0)
        steps[str(shape)] = communication_report(built_under(mlp(hidden=128), dist), dist, (64, 64))
    fig = draw_collectives_by(steps, labels={"data": "gradients, over 'data'"})
    heights = [bar.get_height() for bar in marks(fig, BAR_GID)]  # (8, 1): data, model; (2, 4): data, model
    wanted = [steps[s].bytes_by_axis()[a] for s in steps for a in ("data", "model")]
    np.testing.assert_allclose(np.array(heights) / max(heights), np.array(wanted) / max(wanted))
    assert wanted[1] == 0 and wanted[2] > 0 and wanted[3] > 0  # nothing over 'model' on (8, 1)
    assert "gradients, over 'data'" in texts(fig) and "over 'model'" in texts(fig) and "mesh (data, model)" in texts(fig)
    with pytest.raises(ValueError, match="at least one report"):
        draw_collectives_by({})


def test_importing_viz_changes_no_display_and_its_extension_shows_figures():
    import subprocess
    import sys

    code = ("from IPython.core.interactiveshell import InteractiveShell\nfrom matplotlib.figure import Figure\n"
            "shell = InteractiveShell.instance()\npng = shell.display_formatter.formatters['image/png']\n"
            "import course_utils.viz\nprint(Figure in png.type_printers)\n"
            "shell.run_line_magic('load_ext', 'course_utils.viz')\n"
            "print(png.type_printers[Figure].__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "notebook_png"], done.stderr
