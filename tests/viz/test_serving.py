"""The decode figure draws each clock as the line through its compiled points, and marks where they cross."""

import pytest

from course_utils import draw_decode
from course_utils.viz.serving import decode_lines

# (batch, compute s, memory s with the cache, memory s of the weights alone): two compiled programs
POINTS = [(16, 0.04e-3, 1.8e-3, 0.64e-3), (256, 0.64e-3, 18.6e-3, 0.64e-3)]


def test_each_clock_is_the_line_through_its_points_and_the_range_shows_the_crossover():
    data = decode_lines(POINTS, crossover=256)
    assert data["batch"][-1] == pytest.approx(256 * 1.2 * 1.05)
    slope = (0.64 - 0.04) / 240
    at = lambda b: 0.04 + (b - 16) * slope  # noqa: E731
    assert data["compute"][-1] == pytest.approx(at(data["batch"][-1]))
    assert data["weights"] == pytest.approx([0.64] * len(data["batch"]))
    assert data["memory_bound"] == (pytest.approx(8.0), pytest.approx(data["batch"][-1]))  # reading is longer throughout


def test_the_figure_names_every_line_and_the_crossover(overlapping_texts):
    fig = draw_decode(POINTS, crossover=256, title="a decode step")
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["reading weights and KV cache", "reading the weights alone", "computing",
                      "computing catches the weights at 256", "memory-bound: weights and cache take longer"]
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and "compiled programs" in ax.get_xlabel() and "estimated" in ax.get_ylabel()
    assert overlapping_texts(fig) == []


def test_a_line_needs_two_points():
    with pytest.raises(ValueError, match="two or more points. Received 1"):
        draw_decode(POINTS[:1])
