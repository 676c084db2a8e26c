"""The multi-process mesh figure."""

from matplotlib.figure import Figure

from course_utils import draw_process_mesh, process_ownership


def test_drawing_returns_a_figure():
    fig = draw_process_mesh(process_ownership((2, 4), processes=2))
    assert isinstance(fig, Figure)
    assert "over 2 processes" in fig.texts[0].get_text()


def test_colours_mark_processes_and_the_figure_says_so():
    """Lesson 00 promises a device keeps its colour; this figure colours by process, and says it under the mesh."""
    from matplotlib.colors import to_hex

    from course_utils.viz.figures import BLOCK_GID
    from course_utils.viz.palette import device_color, process_color

    ownership = process_ownership((2, 4), processes=2)
    fig = draw_process_mesh(ownership)
    drawn = [to_hex(p.get_facecolor()) for p in fig.axes[0].patches if p.get_gid() == BLOCK_GID]
    assert drawn == [process_color(o) for row in ownership.owner for o in row]
    assert not any(c == device_color(d) for c, d in zip(drawn, range(8)))
    footer = " ".join(t.get_text() for t in fig.texts)
    assert "Colour = owning process, not device" in footer
    assert [t.get_text() for t in fig.axes[0].texts][4] == "device 4\np1"


def test_beyond_four_processes_cells_are_grey_and_named():
    fig = draw_process_mesh(process_ownership((2, 4), processes=8))
    assert "Grey: more processes than colours" in " ".join(t.get_text() for t in fig.texts)
