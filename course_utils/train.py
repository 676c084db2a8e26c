"""Training a model on one device or sharded.

`run_training` trains with Keras's own `fit` and records what a learner needs
to trust a sharded run: the loss of every step, the weights it started from and
ended with, what the run was set up with (optimizer, batches), every step
replayed on one device (`step_replay`), and step times measured honestly
(compilation excluded, the step's result ready before the clock stops, the
median over steps). `compare_runs` (in `equivalence`) reads all of it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from course_utils.xla_settings import keyed_without_names
from course_utils.devices import current_setup, scope_for
from course_utils.mesh import describe_distribution
from course_utils.step_replay import StepReplay, StepReplayer, one_device_twin


@dataclass(frozen=True)
class RunSetup:
    """What a run was set up with: two runs set up differently do not train the same model.

    Attributes:
        weights: Per weight, in the model's order: its shape and whether it trains.
        optimizer: The optimizer's configuration (`get_config()`, without its name).
        batch_size, epochs: As `fit` was called.
        batches: Per batch of an epoch, a digest of its rows whatever their order.
        ordered: Per batch, a digest of its rows in their order.
    """

    weights: tuple[tuple[tuple[int, ...], bool], ...]
    optimizer: dict
    batch_size: int
    epochs: int
    batches: tuple[str, ...]
    ordered: tuple[str, ...]


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
        initial_weights: The weights before the first step, by path.
        setup: What the run was set up with (`RunSetup`).
        replay: Every step replayed on one device (`step_replay.StepReplay`); None for a run that
            trained on one device (its steps are one device's) or was asked not to replay.
    """

    label: str
    losses: np.ndarray
    weights: dict[str, np.ndarray]
    step_seconds: np.ndarray
    simulated: bool
    model: object = field(repr=False, compare=False)
    initial_weights: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    setup: RunSetup | None = field(default=None, repr=False, compare=False)
    replay: StepReplay | None = field(default=None, repr=False, compare=False)
    sharded: bool = False

    @property
    def median_step_seconds(self) -> float:
        return float(np.median(self.step_seconds)) if len(self.step_seconds) else float("nan")

    def __repr__(self) -> str:
        where = "simulated CPU devices, times say nothing about real speed-ups" if self.simulated else "real devices"
        if not len(self.losses):
            return f"TrainingRun({self.label}: no steps ran)"
        return (f"TrainingRun({self.label}: {len(self.losses)} steps, final loss {self.losses[-1]:.6f}, "
                f"median step {self.median_step_seconds * 1e3:.2f} ms on {where})")


def _step_recorder(replayer: StepReplayer | None = None):
    """A Keras callback that records each step's loss and wall time, and has `replayer` replay it.

    The replayer reads the state before the first step and replays each step after the clock
    stops, so the step times hold the step alone.
    """
    import keras

    class StepRecorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.losses, self.times = [], []

        def on_train_begin(self, logs=None):
            if replayer:
                replayer.start(self._model)  # not self.model: reading it writes fit's state back every step

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
            if replayer:
                replayer.after(self._model)

    return StepRecorder()


def run_training(build_model: Callable, data, *, distribution=None, epochs: int = 1, batch_size: int = 32,
                 seed: int = 0, label: str | None = None, verbose: int = 0, replay: bool = True) -> TrainingRun:
    """Builds a model under a distribution and trains it with Keras `fit`.

    Under a distribution, every step is also replayed on one device (`replay=True`): before the
    step the run's whole training state is copied, and after it a one-device twin of the model
    (a second `build_model()`) takes one step from that copy on the same batch; how far the two
    results lie apart is kept in `.replay`, which `compare_runs` judges. The replays run between
    the steps, outside the step times.

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
        replay: Replay every step of a sharded run on one device (see above); ignored without a
            distribution.

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
    with scope_for(distribution):
        keras.utils.set_random_seed(seed)
        model = build_model()
        if not getattr(model, "compiled", False):
            raise ValueError(f"build_model must return a compiled model; {model.name!r} is not compiled. "
                             f"Call model.compile(optimizer=..., loss=...) inside build_model.")
    initial = {v.path: np.array(v.value) for v in model.weights}
    replayer = StepReplayer(one_device_twin(build_model), x, y, batch_size) if distribution is not None and replay else None
    recorder = _step_recorder(replayer)
    # Its programs are only run, never read: a run of another model of the same shapes may share them.
    with scope_for(distribution), keyed_without_names():
        model.fit(x, y, epochs=epochs, batch_size=batch_size, shuffle=False, verbose=verbose, callbacks=[recorder])
    devices = current_setup()
    return TrainingRun(
        label=label or describe_distribution(distribution),
        losses=np.asarray(recorder.losses),
        weights={v.path: np.asarray(v.value) for v in model.weights},
        step_seconds=np.asarray(recorder.times[1:]),
        simulated=bool(devices and devices.simulated) or _uses_cpu(distribution),
        model=model,
        initial_weights=initial,
        setup=_setup_of(model, x, y, batch_size, epochs),
        replay=replayer.replay() if replayer else None,
        sharded=distribution is not None,
    )


def reordered_rows(data, batch_size: int, *, seed: int = 1):
    """The same batches with the rows of each in another order: a change only rounding can see.

    A batch's loss is the mean over its rows, so the order of the rows inside a batch changes
    nothing in the mathematics of a step, only the order of its sums, as sharding does. Training
    on them shows how far rounding alone moves a one-device run.

    Args:
        data: `(x, y)` arrays whose number of rows is a multiple of `batch_size`.
        batch_size: The batch size the run will use.
        seed: Chooses the orders.

    Returns:
        `(x, y)`, reordered inside each batch.
    """
    x, y = _check_data(data, batch_size)
    rng = np.random.default_rng(seed)
    order = np.concatenate([start + rng.permutation(batch_size) for start in range(0, len(x), batch_size)])
    return x[order], y[order]


def _setup_of(model, x, y, batch_size: int, epochs: int) -> RunSetup:
    config = {k: v for k, v in model.optimizer.get_config().items() if k != "name"}
    rows = [hashlib.blake2b(np.ascontiguousarray(x[i]).tobytes() + np.ascontiguousarray(y[i]).tobytes(),
                            digest_size=16).digest() for i in range(len(x))]
    batches = [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    digest = lambda parts: hashlib.blake2b(b"".join(parts), digest_size=16).hexdigest()
    return RunSetup(
        weights=tuple((tuple(v.shape), bool(v.trainable)) for v in model.weights),
        optimizer=config, batch_size=batch_size, epochs=epochs,
        batches=tuple(digest(sorted(b)) for b in batches), ordered=tuple(digest(b) for b in batches))


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
