"""Training a model on one device or sharded, and comparing the runs.

`run_training` trains with Keras's own `fit` and records what a learner needs
to trust a sharded run: the loss of every step, the final weights, and step
times measured honestly (compilation excluded, the step's result ready before
the clock stops, the median over steps).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from course_utils._table import Table
from course_utils.devices import current_setup, scope_for
from course_utils.mesh import describe_distribution


@dataclass(frozen=True)
class TrainingRun:
    """What one training run produced.

    Attributes:
        label: What ran, e.g. "ModelParallel (2, 4)" or "single device".
        losses: The loss of every training step, in order.
        weights: Final weights by variable path, as NumPy arrays.
        step_seconds: Wall time of every step after the first (which compiles).
        simulated: True when the devices were simulated CPU devices.
        model: The trained Keras model.
    """

    label: str
    losses: np.ndarray
    weights: dict[str, np.ndarray]
    step_seconds: np.ndarray
    simulated: bool
    model: object = field(repr=False, compare=False)

    @property
    def median_step_seconds(self) -> float:
        return float(np.median(self.step_seconds)) if len(self.step_seconds) else float("nan")

    def __repr__(self) -> str:
        where = "simulated CPU devices, times say nothing about real speed-ups" if self.simulated else "real devices"
        if not len(self.losses):
            return f"TrainingRun({self.label}: no steps ran)"
        return (f"TrainingRun({self.label}: {len(self.losses)} steps, final loss {self.losses[-1]:.6f}, "
                f"median step {self.median_step_seconds * 1e3:.2f} ms on {where})")


def _step_recorder():
    """A Keras callback that records each step's loss and wall time."""
    import keras

    class StepRecorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.losses, self.times = [], []

        def on_epoch_begin(self, epoch, logs=None):
            self.seen, self.epoch_sum = 0, 0.0

        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            mean = float(logs["loss"])  # a Python float: the step's work has finished
            self.times.append(time.perf_counter() - self.start)
            # Keras reports the epoch's running mean; recover this step's own loss.
            self.losses.append(mean * (self.seen + 1) - self.epoch_sum)
            self.seen += 1
            self.epoch_sum = mean * self.seen

    return StepRecorder()


def run_training(build_model: Callable, data, *, distribution=None, epochs: int = 1, batch_size: int = 32,
                 seed: int = 0, label: str | None = None, verbose: int = 0) -> TrainingRun:
    """Builds a model under a distribution and trains it with Keras `fit`.

    Args:
        build_model: A function returning a compiled Keras model; it is
            called inside the distribution's scope, after seeding.
        data: `(x, y)` NumPy arrays.
        distribution: A `keras.distribution` distribution, or None for a
            single device.
        epochs: Passes over the data.
        batch_size: Global batch size (split over the batch axis).
        seed: Seeds Keras, NumPy and Python before the model is built.
        label: Names the run in tables; defaults to the distribution.
        verbose: Passed to `fit` (0 silent, 1 progress bar, 2 a line per epoch).

    Returns:
        A `TrainingRun`.

    Example:
        >>> single = run_training(build, (x, y), epochs=2, batch_size=64)
        >>> sharded = run_training(build, (x, y), distribution=dist, epochs=2, batch_size=64)
        >>> compare_runs(single, sharded).equivalent
        True
    """
    import keras

    x, y = _check_data(data, batch_size)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive whole number: a run with no steps has no loss to compare. "
                         f"Received: epochs={epochs!r}. Use for example epochs=1.")
    recorder = _step_recorder()
    with scope_for(distribution):
        keras.utils.set_random_seed(seed)
        model = build_model()
        if not getattr(model, "compiled", False):
            raise ValueError(f"build_model must return a compiled model; {model.name!r} is not compiled. "
                             f"Call model.compile(optimizer=..., loss=...) inside build_model.")
        model.fit(x, y, epochs=epochs, batch_size=batch_size, shuffle=False, verbose=verbose,
                  callbacks=[recorder])
    setup = current_setup()
    return TrainingRun(
        label=label or describe_distribution(distribution),
        losses=np.asarray(recorder.losses),
        weights={v.path: np.asarray(v.value) for v in model.weights},
        step_seconds=np.asarray(recorder.times[1:]),
        simulated=bool(setup and setup.simulated) or _uses_cpu(distribution),
        model=model,
    )


def _uses_cpu(distribution) -> bool:
    return distribution is not None and str(distribution.device_mesh.devices.flat[0]).startswith("cpu")


def _check_data(data, batch_size: int):
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError(f"data must be a pair (x, y) of arrays. Received: {type(data).__name__}.")
    x, y = (np.asarray(a) for a in data)
    if x.ndim == 0 or len(x) == 0:
        raise ValueError(f"data has no rows to train on. Received: x of shape {x.shape}, y of shape {y.shape}. "
                         f"Pass at least one full batch of rows.")
    if len(x) != len(y):
        raise ValueError(f"x and y must have the same number of rows. Received: {len(x)} and {len(y)}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive whole number. Received: batch_size={batch_size!r}.")
    if len(x) % batch_size:
        raise ValueError(
            f"Use a number of rows that is a multiple of batch_size, so every step has a full batch "
            f"that splits evenly over the devices. Received: {len(x)} rows, batch_size={batch_size}; "
            f"keep the first {len(x) // batch_size * batch_size} rows."
        )
    return x, y


@dataclass(frozen=True)
class Difference:
    """The largest difference between two runs for one quantity."""

    name: str
    max_abs: float
    max_rel: float
    within: bool


class Comparison(Table):
    """Largest differences between two runs, losses first, then every weight."""

    columns = ("quantity", "max |a - b|", "max relative", "within tolerance")

    def __init__(self, rows, *, title: str, rtol: float, atol: float):
        super().__init__(rows, title=title)
        self.rtol, self.atol = rtol, atol

    def cells(self, row: Difference) -> list[str]:
        return [row.name, f"{row.max_abs:.2e}", f"{row.max_rel:.2e}", "yes" if row.within else "NO"]

    @property
    def equivalent(self) -> bool:
        return all(r.within for r in self.rows)

    def __repr__(self) -> str:
        verdict = "EQUIVALENT" if self.equivalent else "NOT equivalent"
        return f"{super().__repr__()}\n{verdict} (rtol={self.rtol:g}, atol={self.atol:g})"


def compare_runs(a: TrainingRun, b: TrainingRun, *, rtol: float = 1e-4, atol: float = 1e-5) -> Comparison:
    """Compares the losses and final weights of two runs of the same model.

    Weights are matched in order (their paths may differ by the model's
    name). The default tolerance suits float32: sharding changes the order
    of sums, which moves results by a few units in the last place.

    Returns:
        A `Comparison`; `.equivalent` is True when everything is within tolerance.
    """
    if len(a.losses) != len(b.losses) or len(a.weights) != len(b.weights):
        raise ValueError(f"The runs differ in shape: {len(a.losses)} vs {len(b.losses)} steps, "
                         f"{len(a.weights)} vs {len(b.weights)} weights. Compare runs of the same model and data.")
    rows = [_difference("loss per step", a.losses, b.losses, rtol, atol)]
    rows += _weight_differences(a.weights, b.weights, rtol, atol)
    return Comparison(rows, title=f"{a.label} vs {b.label}", rtol=rtol, atol=atol)


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
    return Comparison(_weight_differences(wa, wb, rtol, atol), title=f"{a.name} vs {b.name}", rtol=rtol, atol=atol)


def _weight_differences(wa: dict, wb: dict, rtol: float, atol: float) -> list[Difference]:
    rows = []
    for (path, x), y in zip(wa.items(), wb.values()):
        if x.shape != y.shape:
            raise ValueError(f"Weight {path!r} has shape {x.shape} in one and {y.shape} in the other.")
        rows.append(_difference(path, x, y, rtol, atol))
    return rows


def _difference(name, a, b, rtol, atol) -> Difference:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    gap = np.abs(a - b)
    rel = gap / np.maximum(np.abs(a), np.finfo(np.float32).tiny)
    return Difference(name, float(gap.max(initial=0)), float(rel.max(initial=0)),
                      bool(np.allclose(a, b, rtol=rtol, atol=atol)))
