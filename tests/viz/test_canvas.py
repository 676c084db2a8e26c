"""A Scene draws the same thing both ways: as a matplotlib Figure and as SVG."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from keras.distribution import TensorLayout
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from course_utils import make_mesh, planned_placement
from course_utils.viz.canvas import Box, Polygons, Scene, Words, text_size, to_figure, to_svg
from course_utils.viz.mesh import mesh_scene
from course_utils.viz.tensor import placement_scene

SVG = "{http://www.w3.org/2000/svg}"
MESH = make_mesh((2, 4), ("data", "model"))


def svg_texts(scene: Scene) -> list[str]:
    root = ET.fromstring(to_svg(scene))
    return ["\n".join(span.text or "" for span in text.iter(f"{SVG}tspan")) for text in root.iter(f"{SVG}text")]


@pytest.mark.parametrize("scene", [
    mesh_scene(MESH),
    placement_scene(planned_placement((32, 64), TensorLayout((None, "model"), MESH), name="kernel")),
    placement_scene(planned_placement((64, 4, 16), TensorLayout((None, "model", None), MESH), name="query")),
], ids=["mesh", "copies", "rank-3"])
def test_the_figure_and_the_svg_show_the_same_marks_and_words(scene):
    root = ET.fromstring(to_svg(scene))  # well-formed XML
    fig = to_figure(scene)
    words = sorted(t.get_text() for t in fig.findobj(Text) if t.get_text())
    assert sorted(svg_texts(scene)) == words == sorted(w.text for w in scene.items if isinstance(w, Words))
    boxes = sum(isinstance(item, Box) for item in scene.items)
    cells = sum(len(item.corners) for item in scene.items if isinstance(item, Polygons))
    assert len(root.findall(f"{SVG}rect")) == boxes + 1  # and the white page
    assert len(root.findall(f"{SVG}path")) == cells
    assert fig.get_size_inches() == pytest.approx((scene.width, scene.height))


def test_svg_places_items_in_points_from_the_top_left():
    scene = Scene(2.0, 1.0)
    scene.box(0.5, 0.25, 1.0, 0.5, face="#be4664", gid="block")
    scene.text(1.0, 0.5, "cpu:0\n(0, 0)", 9)
    root = ET.fromstring(to_svg(scene, px_per_inch=80))
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("160", "80", "0 0 144.00 72.00")
    rect = root.findall(f"{SVG}rect")[1]
    assert [float(rect.get(k)) for k in ("x", "y", "width", "height")] == [36.0, 18.0, 72.0, 36.0]
    first, second = root.iter(f"{SVG}tspan")
    assert float(first.get("x")) == 72.0 and float(second.get("y")) - float(first.get("y")) == pytest.approx(1.3 * 9)
    assert (float(first.get("y")) + float(second.get("y"))) / 2 == pytest.approx(36 + 0.36 * 9)  # centred


def test_text_fits_the_room_its_size_estimate_gives_it():
    """The layout trusts `text_size`; the font's real extents stay inside it."""
    scene = Scene(6.0, 2.0)
    samples = ["cpu:0, cpu:4", "2 copies\ncpu:0-7", "dim 1: 64, split over 'model' in 4", "(64, 4, 16) -> (64, 1, 16)"]
    for k, text in enumerate(samples):
        scene.text(0.2, 1.8 - 0.45 * k, text, 9, ha="left", va="top")
    fig = to_figure(scene)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    for artist, text in zip(fig.texts, samples):
        box = artist.get_window_extent(canvas.get_renderer())
        width, height = text_size(text, 9)
        assert box.width / fig.dpi <= width * 1.05 and box.height / fig.dpi <= height * 1.05, text


def test_polygons_take_one_colour_or_one_per_polygon():
    scene = Scene(1.0, 1.0)
    scene.polygons(np.zeros((3, 4, 2)), "#ffffff")
    scene.polygons(np.zeros((2, 4, 2)), ["#be4664", "#5f41aa"])
    assert [item.faces for item in scene.items] == [("#ffffff",) * 3, ("#be4664", "#5f41aa")]


def test_a_title_wraps_at_spaces_and_slashes_but_never_inside_a_shape():
    from course_utils.viz.figures import wrap

    text = wrap("decoder_block_0/attention/query/kernel (4, 64, 16) -> (1, 32, 16) per device", 16)
    assert any("(4, 64, 16)" in line for line in text.split("\n"))
    assert any("(1, 32, 16)" in line for line in text.split("\n"))
    assert text.split("\n")[0] == "decoder_block_0/"
