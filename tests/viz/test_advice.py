"""The advisor's figures draw what the advice holds: a bar per candidate in its ranking, and a roofline."""

from matplotlib.figure import Figure

from course_utils import draw_advice, draw_roofline
from course_utils.advice.ranking import Advice, AdviceRow
from course_utils.advice.estimate import StepTime
from course_utils.advice.program import StepProgram
from course_utils.hardware import device_set
from course_utils.memory.compiled import StepMemory


def _row(layout, shape, compute, backward_comm, gib):
    program = StepProgram(StepMemory(int(gib * 2**30), 0, 0, 0), 1e12, ())
    time = StepTime({"forward": compute / 3, "backward": 2 * compute / 3},
                    {"forward": 0.0, "backward": backward_comm, "other": 0.0})
    return AdviceRow(layout, shape, program, time, "fits", tokens=1000)


def _advice():
    rows = [_row("data parallel", (8, 1), 0.3, 0.1, 20.0), _row("official map", (2, 4), 0.3, 0.5, 12.0),
            AdviceRow("tensor parallel", (1, 8), None, None, "cannot split", "2 kv heads over 8 devices")]
    return Advice(rows, devices=device_set("8xH100-80GB"), title="test advice", efficiency=1.0)


def test_each_candidate_is_a_bar_of_compute_and_the_communication_it_does_not_hide(overlapping_texts):
    fig = draw_advice(_advice())
    ax = fig.axes[0]
    bars = [(round(p.get_x(), 6), round(p.get_width(), 6)) for c in ax.containers for p in c]
    # compute 300 ms each; the official map's backward pass waits 500 - 200 = 300 ms more for its collectives
    assert sorted(bars) == [(0.0, 300.0), (0.0, 300.0), (300.0, 0.0), (300.0, 300.0)]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1. data parallel 8 x 1", "2. official map 2 x 4",
                                                             "3. tensor parallel 1 x 8"]
    texts = [t.get_text() for t in ax.texts]
    assert "20.0 GiB: fits" in texts and any("cannot split: 2 kv heads" in t for t in texts)
    assert "not measured" in ax.get_xlabel() and overlapping_texts(fig) == []


def test_the_roofline_marks_where_compute_and_communication_cross(overlapping_texts):
    fig = draw_roofline([(1000, 0.001, 0.002), (4000, 0.004, 0.002)], crossover=2000, title="one pass")
    assert isinstance(fig, Figure)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "they cross at 2,000 tokens per device" in legend and "communication-bound" in legend
    assert overlapping_texts(fig) == []


def test_no_candidate_draws_the_reason_not_a_blank_figure():
    empty = Advice([], devices=device_set("8xH100-80GB"), title="nothing to rank", efficiency=1.0,
                   empty="no layout applies to m on the mesh shapes [(2, 4)]")
    fig = draw_advice(empty)
    texts = [t.get_text().replace("\n", " ") for t in fig.axes[0].texts]
    assert texts == ["No candidate: no layout applies to m on the mesh shapes [(2, 4)]"]
