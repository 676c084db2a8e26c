"""A pipeline's schedule as plain data: which stage runs which micro-batch's forward or backward pass, and when.

Derived in notebook 12, where a GPipe schedule runs for real (`jax.shard_map` and `lax.ppermute` around
Keras blocks); this module keeps only the reusable part, the timetable, so that a figure can draw it and a
learner can measure what it costs without running anything.

A pipeline splits a model by depth into `stages`, one per device along a mesh axis, and a batch into
`micro_batches`. A stage runs micro-batch m's forward pass once the stage before it has, and its backward
pass once the stage after it has (the last stage: once its own forward pass is done). Each stage works
through its own order of passes; `schedule` places every pass as early as those two rules allow:
- "GPipe" (Huang et al., 2019): every forward pass, then every backward pass, the last micro-batch first;
- "1F1B" (PipeDream-Flush; Narayanan et al., 2021): stage s runs S - s forward passes first, then
  alternates one backward and one forward, so it holds at most S - s micro-batches' activations.
A backward pass takes `backward` time units to the forward pass's `forward` (2 to 1 by default: a
product of the forward pass is two in the backward pass, as lesson 10 counts FLOPs).

What a schedule costs: `idle_share`, the share of stage-time no pass runs (the **bubble**), which for both
is (S - 1) / (M + S - 1); and `kept`, the most micro-batches whose activations a stage holds at once.

Example:
    >>> plan = schedule("GPipe", stages=4, micro_batches=8)
    >>> round(plan.idle_share, 4), plan.kept
    (0.2727, (8, 8, 8, 8))
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils._table import Table

FORWARD, BACKWARD = "forward", "backward"
KINDS = ("GPipe", "1F1B")


@dataclass(frozen=True)
class Slot:
    """One pass of one micro-batch on one stage.

    Attributes:
        stage: The stage (its position along the mesh's stage axis) that runs it.
        micro_batch: Which micro-batch, from 0.
        pass_: `FORWARD` or `BACKWARD`.
        start, end: When it runs, in time units (a forward pass takes `Schedule.forward` of them).
    """

    stage: int
    micro_batch: int
    pass_: str
    start: float
    end: float

    @property
    def label(self) -> str:
        """"F3" for micro-batch 3's forward pass, "B3" for its backward pass."""
        return f"{self.pass_[0].upper()}{self.micro_batch}"


class Schedule(Table):
    """Every pass of a pipeline's step, placed in time: a timetable, and what it costs.

    Attributes:
        kind: "GPipe" or "1F1B".
        stages, micro_batches: S and M.
        forward, backward: Time units of one forward and one backward pass of one micro-batch on one stage.
        rows: The `Slot`s, by start time, then stage.
    """

    columns = ("stage", "busy", "idle", "activations kept (most at once)")

    def __init__(self, kind: str, stages: int, micro_batches: int, slots, *, forward: float, backward: float):
        super().__init__(sorted(slots, key=lambda s: (s.start, s.stage)),
                         title=f"{kind}: {stages} stages, {micro_batches} micro-batches")
        self.kind, self.stages, self.micro_batches = kind, stages, micro_batches
        self.forward, self.backward = forward, backward

    @property
    def slots(self) -> list[Slot]:
        return self.rows

    @property
    def makespan(self) -> float:
        """Time units from the first pass's start to the last pass's end: the step."""
        return max(s.end for s in self.rows)

    def busy(self, stage: int) -> float:
        """Time units stage `stage` runs a pass."""
        return sum(s.end - s.start for s in self.rows if s.stage == stage)

    @property
    def idle_share(self) -> float:
        """The share of all stages' time in the step when no pass runs: the bubble."""
        busy = sum(self.busy(stage) for stage in range(self.stages))
        return 1 - busy / (self.stages * self.makespan)

    @property
    def kept(self) -> tuple[int, ...]:
        """Per stage, the most micro-batches whose activations it holds at once: their forward pass has
        started and their backward pass has not ended."""
        return tuple(_most_held([s for s in self.rows if s.stage == stage]) for stage in range(self.stages))

    def cells(self, stage: int) -> list[str]:
        busy = self.busy(stage)
        return [str(stage), f"{busy:g}", f"{self.makespan - busy:g}", str(self.kept[stage])]

    def _grid(self) -> list[list[str]]:
        return [list(self.columns)] + [self.cells(stage) for stage in range(self.stages)]

    def notes(self) -> list[str]:
        return [f"Step: {self.makespan:g} time units (a forward pass {self.forward:g}, a backward pass "
                f"{self.backward:g}); idle share (the bubble): {self.idle_share:.1%}."]


def _most_held(slots: list[Slot]) -> int:
    """The most micro-batches held at once, from one stage's slots: +1 at a forward pass's start, -1 at
    its backward pass's end (at equal times the release first)."""
    events = sorted([(s.start, 1) for s in slots if s.pass_ == FORWARD] +
                    [(s.end, -1) for s in slots if s.pass_ == BACKWARD])
    held = most = 0
    for _, change in events:
        held += change
        most = max(most, held)
    return most


def schedule(kind: str, *, stages: int, micro_batches: int, forward: float = 1.0, backward: float = 2.0) -> Schedule:
    """The timetable of one training step of a pipeline.

    Args:
        kind: "GPipe" (all forward passes, then all backward passes) or "1F1B" (one forward, one backward).
        stages: S, the stages (devices along the stage axis), at least 1.
        micro_batches: M, the micro-batches the batch is cut into, at least 1.
        forward, backward: Time units of one pass of one micro-batch on one stage (default 1 and 2).

    Returns:
        A `Schedule`: its `slots`, `makespan`, `idle_share` and `kept`; a table of each stage.

    Example:
        >>> schedule("1F1B", stages=4, micro_batches=8).kept
        (4, 3, 2, 1)
    """
    _check(kind, stages, micro_batches, forward, backward)
    orders = [_order(kind, stage, stages, micro_batches) for stage in range(stages)]
    return Schedule(kind, stages, micro_batches, _placed(orders, forward, backward), forward=forward,
                    backward=backward)


def _check(kind, stages, micro_batches, forward, backward) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind is one of {KINDS}. Received: kind={kind!r}.")
    for name, value in (("stages", stages), ("micro_batches", micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} is a whole number, at least 1. Received: {name}={value!r}.")
    for name, value in (("forward", forward), ("backward", backward)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ValueError(f"{name} is the time one pass takes, a number above 0. Received: {name}={value!r}.")


def _order(kind: str, stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """The passes one stage runs, in its order."""
    if kind == "GPipe":
        return [(FORWARD, m) for m in range(micro_batches)] + \
               [(BACKWARD, m) for m in reversed(range(micro_batches))]
    warmup = min(stages - stage, micro_batches)  # forward passes before the first backward pass
    order = [(FORWARD, m) for m in range(warmup)]
    for m in range(micro_batches):
        order.append((BACKWARD, m))
        if warmup + m < micro_batches:
            order.append((FORWARD, warmup + m))
    return order


def _placed(orders: list[list[tuple[str, int]]], forward: float, backward: float) -> list[Slot]:
    """Each stage's passes in its order, each as early as its stage and its inputs allow."""
    stages = len(orders)
    done: dict[tuple[str, int, int], float] = {}  # (pass, stage, micro-batch) -> end
    free = [0.0] * stages
    slots, position = [], [0] * stages
    while any(position[s] < len(orders[s]) for s in range(stages)):
        placed = False
        for stage in range(stages):
            if position[stage] == len(orders[stage]):
                continue
            pass_, m = orders[stage][position[stage]]
            needs = [(FORWARD, stage - 1, m)] if pass_ == FORWARD and stage > 0 else []
            if pass_ == BACKWARD:
                needs = [(FORWARD, stage, m)] + ([(BACKWARD, stage + 1, m)] if stage < stages - 1 else [])
            if all(n in done for n in needs):
                start = max([free[stage]] + [done[n] for n in needs])
                end = start + (forward if pass_ == FORWARD else backward)
                slots.append(Slot(stage, m, pass_, start, end))
                done[pass_, stage, m] = free[stage] = end
                position[stage] += 1
                placed = True
        if not placed:  # cannot happen for the two orders above: each waits only on passes placed before it
            raise RuntimeError("The stages' orders wait on each other: no pass can run.")
    return slots
