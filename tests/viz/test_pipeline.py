"""The schedule figure: one box per pass, named by its label, coloured by micro-batch, the bubble shaded."""

import numpy as np
import pytest
from matplotlib.colors import to_hex, to_rgb

from course_utils import draw_schedule, schedule
from course_utils.viz import vision
from course_utils.viz.figures import BLOCK_GID
from course_utils.viz.palette import DEVICE_COLORS, MICRO_BATCH_COLORS, text_color
from course_utils.viz.pipeline import IDLE_COLOR, micro_batch_color


def test_every_pass_is_a_box_with_its_label_and_its_micro_batchs_colour():
    plan = schedule("GPipe", stages=4, micro_batches=4)
    fig = draw_schedule(plan)
    boxes = [p for p in fig.axes[0].patches if p.get_gid() == BLOCK_GID]
    assert len(boxes) == len(plan.slots) == 32
    for box, slot in zip(boxes, plan.slots):
        assert to_hex(box.get_facecolor()) == MICRO_BATCH_COLORS[slot.micro_batch]
        assert (box.get_x(), box.get_width()) == (slot.start, slot.end - slot.start)
        assert bool(box.get_hatch()) == (slot.pass_ == "backward")
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels.count("F3") == labels.count("B3") == 4
    assert [t for t in labels if t.startswith("keeps")] == ["keeps 4"] * 4
    idle = [p for p in fig.axes[0].patches if to_hex(p.get_facecolor()) == IDLE_COLOR]
    assert len(idle) == 4 and all(p.get_width() == plan.makespan for p in idle)
    assert "idle 42.9%" in fig.axes[0].get_title(loc="left")
    assert "not a device" in fig.texts[0].get_text()


def test_two_schedules_share_one_time_axis():
    fig = draw_schedule(schedule("GPipe", stages=4, micro_batches=8), schedule("1F1B", stages=4, micro_batches=8),
                        title="the same bubble")
    assert len(fig.axes) == 2 and fig.axes[0].get_xlim() == fig.axes[1].get_xlim()
    assert [t.get_text() for t in fig.axes[1].texts if t.get_text().startswith("keeps")] == \
        ["keeps 4", "keeps 3", "keeps 2", "keeps 1"]
    assert max(fig.axes[0].get_xticks()) <= 33


def test_micro_batch_colours_carry_black_labels_and_are_not_the_devices():
    assert all(text_color(c) == "black" for c in MICRO_BATCH_COLORS)
    assert not set(MICRO_BATCH_COLORS) & {c.lower() for c in DEVICE_COLORS}
    assert micro_batch_color(len(MICRO_BATCH_COLORS)) != micro_batch_color(0)  # grey beyond: the label names it
    for kind in vision.VISIONS:  # apart enough to help; the label, not the colour, names the micro-batch
        assert vision.closest_pair(np.array([to_rgb(c) for c in MICRO_BATCH_COLORS]), kind)[0] >= 7


def test_it_draws_schedules_only():
    with pytest.raises(TypeError, match="draws course_utils.pipeline.Schedule objects"):
        draw_schedule([schedule("GPipe", stages=2, micro_batches=2)])
    with pytest.raises(TypeError, match="Received: \\[\\]"):
        draw_schedule()
