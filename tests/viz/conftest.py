"""What the figure tests share: which pieces of a figure's text overlap, as drawn."""

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text


def _overlapping_texts(fig) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty texts of `fig` (titles, labels, ticks, legends, notes) whose drawn boxes overlap."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.figure is fig]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]


@pytest.fixture
def overlapping_texts():
    """`overlapping_texts(fig)`: the pairs of a figure's texts that overlap where they are drawn."""
    return _overlapping_texts
