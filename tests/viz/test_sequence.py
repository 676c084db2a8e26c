"""The sequence figures draw what their data holds: a block's memory by sequence length, and the ring's steps."""

from matplotlib.figure import Figure

from course_utils import draw_block_memory, draw_ring, ring_schedule
from course_utils.sequence import BlockMemory
from course_utils.viz.figures import BLOCK_GID
from course_utils.viz.palette import COPY_COLOR, device_color

GIB = 2**30


def test_each_length_stacks_the_scores_on_the_s_x_d_arrays_beside_xlas_pass(overlapping_texts):
    rows = [BlockMemory(1024, 1, 3 * GIB, 1 * GIB, 2 * GIB), BlockMemory(2048, 1, 8 * GIB, 4 * GIB, 4 * GIB)]
    fig = draw_block_memory(rows, title="one block")
    ax = fig.axes[0]
    tops = sorted(round(p.get_y() + p.get_height(), 6) for bars in ax.containers for p in bars)
    assert tops == [2.0, 3.0, 3.0, 4.0, 8.0, 8.0]  # s x d; s x d + scores; XLA's pass, for each length
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1,024 tokens", "2,048 tokens"]
    assert sorted(t.get_text() for t in ax.texts) == ["3.00", "3.00", "8.00", "8.00"]  # the GiB, 2 decimals as printed
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("s x s scores" in t for t in legend) and any("s x d" in t for t in legend)
    assert isinstance(fig, Figure) and overlapping_texts(fig) == []


def test_the_ring_names_every_block_each_device_holds_in_its_first_devices_colour(overlapping_texts):
    fig = draw_ring(ring_schedule(4), title="a ring of 4")
    ax = fig.axes[0]
    cells = [p for p in ax.patches if p.get_gid() == BLOCK_GID]
    assert len(cells) == 16
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("kv 0") == 4 and texts.count("(kv 3)") == 3  # masked: 3 devices see nothing of block 3
    colors = {(round(p.get_x()), round(p.get_y())): p.get_facecolor() for p in cells}
    from matplotlib.colors import to_rgba
    assert colors[0, 3] == to_rgba(device_color(0))  # device 0 (top row), step 0: its own block 0
    assert colors[1, 3] == to_rgba(COPY_COLOR)  # device 0, step 1: block 3, masked
    assert [t.get_text() for t in ax.get_yticklabels()][0] == "cpu:0  (queries 0)"
    assert overlapping_texts(fig) == []
