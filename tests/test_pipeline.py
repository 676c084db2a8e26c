"""A pipeline's schedule as data: every pass placed once, in an order its inputs allow, and what it costs."""

import pytest

from course_utils import Schedule, schedule
from course_utils.pipeline import BACKWARD, FORWARD


def bubble(stages, micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)


@pytest.mark.parametrize("kind", ["GPipe", "1F1B"])
@pytest.mark.parametrize("stages, micro_batches", [(1, 1), (1, 5), (2, 1), (4, 1), (4, 3), (4, 4), (4, 8), (8, 2),
                                                   (3, 16)])
@pytest.mark.parametrize("forward, backward", [(1, 1), (1, 2), (1.5, 4)])
def test_every_pass_runs_once_after_its_inputs_and_the_bubble_is_the_formula(kind, stages, micro_batches, forward,
                                                                            backward):
    plan = schedule(kind, stages=stages, micro_batches=micro_batches, forward=forward, backward=backward)
    assert isinstance(plan, Schedule)
    passes = {(s.pass_, s.stage, s.micro_batch): s for s in plan.slots}
    assert len(passes) == len(plan.slots) == 2 * stages * micro_batches
    for (pass_, stage, m), slot in passes.items():
        assert slot.end - slot.start == (forward if pass_ == FORWARD else backward)
        if pass_ == FORWARD and stage > 0:
            assert slot.start >= passes[FORWARD, stage - 1, m].end
        if pass_ == BACKWARD:
            assert slot.start >= passes[FORWARD, stage, m].end
            if stage < stages - 1:
                assert slot.start >= passes[BACKWARD, stage + 1, m].end
    for stage in range(stages):  # a stage runs one pass at a time
        mine = sorted((s.start, s.end) for s in plan.slots if s.stage == stage)
        assert all(a[1] <= b[0] for a, b in zip(mine, mine[1:]))
    assert plan.idle_share == pytest.approx(bubble(stages, micro_batches), abs=1e-12)
    assert plan.makespan == pytest.approx((forward + backward) * (micro_batches + stages - 1))


def test_gpipe_keeps_every_micro_batch_and_1f1b_at_most_the_stages_left():
    assert schedule("GPipe", stages=4, micro_batches=8).kept == (8, 8, 8, 8)
    assert schedule("1F1B", stages=4, micro_batches=8).kept == (4, 3, 2, 1)
    assert schedule("1F1B", stages=4, micro_batches=2).kept == (2, 2, 2, 1)  # never more than M
    gpipe = schedule("GPipe", stages=3, micro_batches=2)
    assert [(s.label, s.start) for s in gpipe.slots if s.stage == 0] == [("F0", 0), ("F1", 1), ("B1", 8), ("B0", 10)]


def test_a_schedule_reads_as_a_table():
    plan = schedule("GPipe", stages=2, micro_batches=2)
    text = repr(plan)
    assert text.startswith("GPipe: 2 stages, 2 micro-batches")
    assert "idle share (the bubble): 33.3%" in text
    assert plan.cells(0) == ["0", "6", "3", "2"]
    assert "<table" in plan._repr_html_()


@pytest.mark.parametrize("arguments, message", [
    (dict(kind="Interleaved", stages=4, micro_batches=4), "kind is one of ('GPipe', '1F1B'). Received: kind='Interleaved'"),
    (dict(kind="GPipe", stages=0, micro_batches=4), "stages is a whole number, at least 1. Received: stages=0"),
    (dict(kind="GPipe", stages=4, micro_batches=2.5), "Received: micro_batches=2.5"),
    (dict(kind="GPipe", stages=True, micro_batches=2), "Received: stages=True"),
    (dict(kind="1F1B", stages=2, micro_batches=2, backward=0), "a number above 0. Received: backward=0"),
    (dict(kind="1F1B", stages=2, micro_batches=2, forward=float("nan")), "Received: forward=nan"),
])
def test_what_it_refuses_says_what_it_received(arguments, message):
    kind = arguments.pop("kind")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        schedule(kind, **arguments)
