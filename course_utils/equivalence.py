"""Is a sharded run the same training as one device? `compare_runs` says, and says why.

Two runs are the same training when they were set up the same (the same model and optimizer, the
same initial weights, the same batches) and each step computed the same mathematics. A step is
judged where nothing can amplify a difference yet: every step of a sharded run is replayed on one
device from the run's own state (`step_replay`), and must agree with it to float32 rounding, or
within one example's share where rounding flipped a decision. Whole runs are not judged by a
tolerance: training carries a step's rounding forward, by an amount that depends on the CPU and on
luck (the same one-device run with its batches' rows reordered drifts as far); the comparison shows
that drift beside the verdict, and beside a rounding-only run when one is given.

`compare_weights` compares two models' weights (a checkpoint restored on another mesh) with a
tolerance, by default exact equality: resharding copies, it never computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_utils._table import Table
from course_utils.step_replay import BEYOND, FLIPPED, ROUNDING, StepReplay, explain_bounds

# Two runs seeded alike start from the same weights; a different initialisation differs by far more.
INITIAL_TOLERANCE = 2.0**-20


@dataclass(frozen=True)
class Difference:
    """The largest difference between two runs (or models) for one quantity."""

    name: str
    max_abs: float
    max_rel: float
    within: bool


class Comparison(Table):
    """Largest differences between two models' weights, under a tolerance."""

    columns = ("quantity", "max |a - b|", "max relative", "within tolerance")

    def __init__(self, rows, *, title: str, rtol: float, atol: float):
        super().__init__(rows, title=title)
        self.rtol, self.atol = rtol, atol

    def cells(self, row: Difference) -> list[str]:
        return [row.name, f"{row.max_abs:.2e}", f"{row.max_rel:.2e}", "yes" if row.within else "NO"]

    @property
    def equivalent(self) -> bool:
        return all(r.within for r in self.rows)

    def notes(self) -> list[str]:
        verdict = "EQUIVALENT" if self.equivalent else "NOT equivalent"
        return [f"{verdict} (rtol={self.rtol:g}, atol={self.atol:g})"]


@dataclass(frozen=True)
class Drift:
    """How far one quantity of two whole runs lies apart.

    Attributes:
        name: "loss per step" or a weight's path (the first run's).
        max_abs: The largest |a - b| over the run's steps, or over the weight's entries.
        reference: The same for the first run and the rounding-only reference run, when given.
        step: The largest difference of any replayed step for this weight and its optimizer slots,
            relative to what the step changed (None for the losses, or when no step was replayed).
        noise: Whether a replayed step of this weight or its slots was rounding noise, and not judged
            (`step_replay.StepReplay.noise`).
    """

    name: str
    max_abs: float
    reference: float | None
    step: float | None
    noise: bool = False


class RunComparison(Table):
    """Two runs of one model compared: their set-up, every replayed step, and the drift of the whole run.

    Attributes:
        setup_differences: How the runs were set up differently, one line each (empty: the same).
        replays: The replayed steps of each sharded run, by label.
        reference_label: The rounding-only run the drift is shown beside, if any.
        steps: How many steps each run took.
    """

    def __init__(self, rows, *, title: str, setup_differences, replays, reference_label, steps: int,
                 reordered: bool, one_device: bool):
        super().__init__(rows, title=title)
        self.setup_differences = list(setup_differences)
        self.replays: dict[str, StepReplay] = dict(replays)
        self.reference_label, self.steps = reference_label, steps
        self.reordered, self.one_device = reordered, one_device
        self.columns = ("quantity", "whole run: max |a - b|",
                        *(("rounding alone: max |a - r|",) if reference_label else ()),
                        "each step vs one device")

    def cells(self, row: Drift) -> list[str]:
        reference = (f"{row.reference:.2e}",) if self.reference_label else ()
        step = "-" if row.step is None or np.isnan(row.step) else f"{row.step:.1e}"
        step = "rounding noise, not judged" if row.noise else step
        return [row.name, f"{row.max_abs:.2e}", *reference, step]

    @property
    def equivalent(self) -> bool:
        """The same set-up, and no replayed step beyond what rounding can do."""
        return not self.setup_differences and all(r.agrees for r in self.replays.values())

    @property
    def drift(self) -> float:
        """The largest difference of any final weight between the two whole runs."""
        return max((r.max_abs for r in self.rows[1:]), default=0.0)

    @property
    def loss_drift(self) -> float:
        """The largest difference of any step's loss between the two runs."""
        return self.rows[0].max_abs

    def notes(self) -> list[str]:
        return [self.verdict(), *self._drift_note()]

    def verdict(self) -> str:
        """The verdict line: EQUIVALENT or NOT equivalent, with what was compared."""
        if self.setup_differences:
            return ("NOT equivalent: the runs differ before their first step, so they do not train the same "
                    f"model: {'; '.join(self.setup_differences)}.")
        for label, replay in self.replays.items():
            if not replay.agrees:
                return _beyond(label, replay)
        same = "the same model, optimizer and initial weights, the same batches" + (
            " (the rows of each in another order)" if self.reordered else "")
        if not self.replays:
            return (f"EQUIVALENT: {same}, and both runs trained on one device: the same steps, "
                    f"computed in {'another' if self.reordered else 'the same'} order.")
        return f"EQUIVALENT: {same}; " + "; ".join(_agrees(label, r) for label, r in self.replays.items()) + "."

    def _drift_note(self) -> list[str]:
        if self.setup_differences:
            return []
        line = (f"Over the whole run of {self.steps} steps, the weights drift apart by up to {self.drift:.2e} "
                f"and the losses by up to {self.loss_drift:.2e}")
        if self.reference_label:
            reference = max((r.reference for r in self.rows[1:]), default=0.0)
            line += f" (rounding alone, {self.reference_label}: {reference:.2e} and {self.rows[0].reference:.2e})"
        if self.drift == 0:
            return [line + ": bit for bit the same."]
        return [line + ": each step's rounding, carried forward by training; a step is where it is judged."]


def _agrees(label: str, replay: StepReplay) -> str:
    step, tensor, worst = replay.worst()
    text = (f"each of the {len(replay)} steps of {label}, replayed on one device from its own state, agrees "
            f"with it to float32 rounding (largest difference {worst:.1e} of what a step changed, in step "
            f"{step}, {tensor}; rounding's bound {ROUNDING:.1e})")
    noise = replay.noise_only()
    if noise:
        text += f"; {_unjudged(noise)}"
    flipped = replay.steps_where(FLIPPED)
    if flipped:
        listed = ", ".join(map(str, flipped[:6])) + (" ..." if len(flipped) > 6 else "")
        text = text.replace("agrees with it to float32 rounding", "agrees with it to float32 rounding, "
                            f"or within one example's share (1/{replay.rows}) where rounding flipped a "
                            f"decision (step{'s' * (len(flipped) > 1)} {listed})")
    return text


def _unjudged(names: list[str], most: int = 4) -> str:
    listed = ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
    return (f"not judged, as rounding noise: {listed} (each moved by more than one example's share of what the "
            f"step changed when every float32 weight moved by one unit in its last place, as a gradient that is "
            f"zero in exact arithmetic does, e.g. attention's key bias's)")


def _beyond(label: str, replay: StepReplay) -> str:
    beyond = replay.steps_where(BEYOND)
    first = beyond[0]
    relative = replay.relative[first - 1]
    tensor = replay.names[int(np.argmax(relative))]
    worst = float(relative.max())
    size = f"{worst:.0f} times what the step changed" if worst >= 2 else f"{worst:.0%} of what the step changed"
    return (f"NOT equivalent: step {first} of {label}, replayed on one device from its own state, differs in "
            f"{tensor} by {size} ({worst / ROUNDING:,.0f} times rounding's bound, "
            f"beyond one example's share, 1/{replay.rows}), and {len(beyond)} of its {len(replay)} steps do. "
            f"That is not rounding: the sharded step computes something else. Check what each device is fed "
            f"and that every gradient is averaged over the batch axis ({explain_bounds(replay.rows)})."
            + (f" Also {_unjudged(noise)}." if (noise := replay.noise_only()) else ""))


def compare_runs(a, b, *, reference=None) -> RunComparison:
    """Compares two runs of the same model: their set-up, each replayed step, the whole run's drift.

    The verdict is EQUIVALENT when both runs were set up alike (the same model and optimizer, the
    same initial weights, the same batches, whatever the order of the rows inside each) and every
    step of a sharded run, replayed on one device from its own state, agrees with that one-device
    step to float32 rounding (or within one example's share of the batch where rounding flipped a
    decision: a ReLU at zero, an expert's choice). How far the whole runs drift apart is shown beside
    the verdict, not judged: training carries each step's rounding forward by an amount that depends
    on the CPU and on luck.

    Args:
        a, b: `TrainingRun`s of the same model and data, e.g. one device and a distribution.
        reference: Optionally a third run, trained on one device on the same batches with a change
            only rounding can see (`reordered_rows`): the drift it shows from `a` is printed beside.

    Returns:
        A `RunComparison` (a table, the verdict under it); `.equivalent`, `.drift`, `.replays`.

    Example:
        >>> compare_runs(single, sharded).equivalent
        True
    """
    _check_alignment(a, b)
    if reference is not None:
        _check_alignment(a, reference)
    replays = {run.label: run.replay for run in (a, b) if run.replay is not None}
    rows = [Drift("loss per step", _max_abs(a.losses, b.losses),
                  None if reference is None else _max_abs(a.losses, reference.losses), None)]
    ref_weights = list(reference.weights.values()) if reference is not None else [None] * len(a.weights)
    for (path, wa), wb, wr in zip(a.weights.items(), b.weights.values(), ref_weights):
        replayed = [(replay, _path_in(run, path, a)) for run, replay in ((a, a.replay), (b, b.replay)) if replay]
        steps = [replay.largest_for(run_path) for replay, run_path in replayed]
        rows.append(Drift(path, _max_abs(wa, wb), None if wr is None else _max_abs(wa, wr),
                          max(steps) if steps else None,
                          noise=any(replay.noise_for(run_path) for replay, run_path in replayed)))
    return RunComparison(
        rows, title=f"{a.label} vs {b.label}", setup_differences=setup_differences(a, b), replays=replays,
        reference_label=reference.label if reference is not None else None, steps=len(a.losses),
        reordered=bool(a.setup and b.setup and a.setup.ordered != b.setup.ordered),
        one_device=not (a.sharded or b.sharded))


def setup_differences(a, b) -> list[str]:
    """How two runs were set up differently, one line each; empty when alike."""
    lines = []
    if a.setup is None or b.setup is None:
        return ["one of them was not made by run_training, which records what a run was set up with"]
    for (path, (shape, trains_a)), (_, trains_b) in zip(zip(a.weights, a.setup.weights), b.setup.weights):
        if trains_a != trains_b:
            lines.append(f"{path} trains in {a.label if trains_a else b.label} only")
    if a.setup.optimizer != b.setup.optimizer:
        changed = [f"{k} {_value(a.setup.optimizer.get(k))} vs {_value(b.setup.optimizer.get(k))}"
                   for k in dict.fromkeys([*a.setup.optimizer, *b.setup.optimizer])
                   if a.setup.optimizer.get(k) != b.setup.optimizer.get(k)]
        lines.append(f"their optimizers differ ({', '.join(changed)})")
    if a.setup.batches != b.setup.batches:
        first = next(i for i, (p, q) in enumerate(zip(a.setup.batches, b.setup.batches)) if p != q)
        lines.append(f"they train on other data (batch {first + 1} holds other rows)")
    for (path, wa), wb in zip(a.initial_weights.items(), b.initial_weights.values()):
        gap = _max_abs(wa, wb)
        if gap > INITIAL_TOLERANCE * max(float(np.abs(wa).max(initial=0)), 1.0):
            lines.append(f"they start from other initial weights ({path} differs by up to {gap:.2g}: seed both "
                         f"runs alike, e.g. run_training(..., seed=0))")
            break
    return lines


def _value(value) -> str:
    """An optimizer setting as a person writes it: 0.001, not 0.0010000000474974513 (float32 kept it so)."""
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def _check_alignment(a, b) -> None:
    if len(a.losses) != len(b.losses) or len(a.weights) != len(b.weights):
        raise ValueError(f"The runs differ in shape: {len(a.losses)} vs {len(b.losses)} steps, "
                         f"{len(a.weights)} vs {len(b.weights)} weights. Compare runs of the same model and data.")
    for (path, x), y in zip(a.weights.items(), b.weights.values()):
        if x.shape != y.shape:
            raise ValueError(f"Weight {path!r} has shape {x.shape} in one run and {y.shape} in the other. "
                             f"Compare runs of the same model.")


def _path_in(run, path: str, first) -> str:
    """The path in `run` of the weight at `path` in `first` (weights match by order: names may differ)."""
    return list(run.weights)[list(first.weights).index(path)]


def _max_abs(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max(initial=0))


def compare_weights(a, b, *, rtol: float = 0.0, atol: float = 0.0) -> Comparison:
    """Compares every weight of two models (e.g. before saving and after restoring).

    Args:
        a, b: Keras models with the same weights in the same order.
        rtol, atol: Tolerances; the defaults ask for exact equality.
    """
    wa = {v.path: np.asarray(v.value) for v in a.weights}
    wb = {v.path: np.asarray(v.value) for v in b.weights}
    if len(wa) != len(wb):
        raise ValueError(f"The models have {len(wa)} and {len(wb)} weights; compare models of the same architecture.")
    rows = []
    for (path, x), y in zip(wa.items(), wb.values()):
        if x.shape != y.shape:
            raise ValueError(f"Weight {path!r} has shape {x.shape} in one and {y.shape} in the other.")
        rows.append(_difference(path, x, y, rtol, atol))
    return Comparison(rows, title=f"{a.name} vs {b.name}", rtol=rtol, atol=atol)


def _difference(name, a, b, rtol, atol) -> Difference:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    gap = np.abs(a - b)
    rel = gap / np.maximum(np.abs(a), np.finfo(np.float32).tiny)
    return Difference(name, float(gap.max(initial=0)), float(rel.max(initial=0)),
                      bool(np.allclose(a, b, rtol=rtol, atol=atol)))
