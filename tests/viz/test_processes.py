"""The multi-process mesh figure."""

from matplotlib.figure import Figure

from course_utils import draw_process_mesh, process_ownership


def test_drawing_returns_a_figure():
    fig = draw_process_mesh(process_ownership((2, 4), processes=2))
    assert isinstance(fig, Figure)
    assert "over 2 processes" in fig.texts[0].get_text()
