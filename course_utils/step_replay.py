"""Every step of a sharded run, replayed on one device from the run's own state.

A sharded step and a one-device step from the same state compute the same mathematics in another
order of sums, so they agree to float32 rounding: nothing has had time to amplify the difference.
A whole run is another matter: each step starts from the last one's slightly different state, and
training carries the differences forward (Adam divides small gradients by their own size; a ReLU
whose input sits within rounding of zero switches on in one run and off in the other). How far two
whole runs drift apart depends on the CPU's instruction set and on luck, so a whole run cannot be
judged by a tolerance. Each of its steps can: a `StepReplayer` replays every step of a sharded run on
a one-device twin of the model, from the state the sharded step started from, and keeps how far
the two results lie apart.

A step's difference is measured per state tensor (every weight, every optimizer slot, every other
variable), normwise, relative to what the step changed in it: `|s_sharded - s_one| / |s_one - s_0|`,
where `s_0` is the state before the step, once the last bit of the stored result is taken off. The optimizer's slots hold the gradient (Adam's first
moment moves by a tenth of it), so a gradient summed instead of averaged shows even where Adam's
update, which divides it by its own size, would hide it.

Two bounds judge it, both derived from float32 (`explain_bounds`):
- `ROUNDING`, 2**-12: a float32 sum of n terms can move by n units in the last place (u = 2**-24)
  of the terms' size; a step's result passes through sums of a few hundred terms in each layer,
  forward and backward, a few thousand in all, so rounding moves it by at most 2**12 u.
- one example's share of the batch, 1 / rows: rounding can also flip a decision whose input lies
  within rounding of its threshold (a ReLU at zero, the choice of an expert). Such a flip moves
  how one example contributes to the gradient, never more than that example's share.
A step within the first agrees to rounding; within the second, rounding flipped a decision; beyond
both, the sharded step computed something else.

Both bounds measure against what the step changed, which is the size of the terms rounding works on
only when the terms do not cancel. Some gradients are zero in exact arithmetic, so that float32 gives
rounding noise: attention's key bias adds the same amount to every score of a query, which the
softmax ignores, and its gradient is a sum of terms that cancel. Its optimizer slots then move by
noise, and a sharded step, whose sums run in another order, moves them by other noise (67 % of the
step in one run of the small transformer of `models`, up to several times it in others). So a step
that is beyond both bounds is computed once more on one device, from its state with every float32
weight moved by one unit in its last place (a change only rounding sees: a gradient that is not
noise moves by a few units of rounding, or by one example's share where it flips a decision). A
tensor whose step this moves by more than one example's share of what the step changed is rounding
noise (`noise_only`): no order of sums reproduces it, so it is not judged, and the verdict says
which. Every other tensor is judged as before: a gradient summed instead of averaged still moves its
slots by several times the step. The line has a cost: a nudge that flips two decisions or more (an
expert's choice in a small batch) can mark a tensor that is not noise; that happens only in a step
already beyond both bounds, and the verdict names every tensor it left unjudged.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

UNIT_ROUNDOFF = 2.0**-24  # float32: half the distance from 1 to the next float32
ROUNDING = 2.0**12 * UNIT_ROUNDOFF  # what rounding can do to a step (see the module's docstring)
AGREES, FLIPPED, BEYOND = "rounding", "a flipped decision", "beyond rounding"


@dataclass(frozen=True)
class StepReplay:
    """How far each step of a sharded run lay from the same step on one device.

    Attributes:
        names: The state tensors compared, by path (weights, then other variables, then the
            optimizer's: its step counter, learning rate and slots).
        differences: Per step and tensor, `|s_sharded - s_one|` (normwise).
        changes: Per step and tensor, what the one-device step changed, `|s_one - s_0|`.
        sizes: Per step and tensor, `|s_one|`.
        rows: The batch size: one example's share of a step is `1 / rows`.
        nudged: Per step and tensor, how far the same step on one device moves when every float32
            weight it starts from moves by one unit in its last place (the step, the nudge itself taken
            off); measured only for a step beyond both bounds without it, 0 elsewhere (None: never measured).
    """

    names: tuple[str, ...]
    differences: np.ndarray
    changes: np.ndarray
    sizes: np.ndarray
    rows: int
    nudged: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.differences)

    @property
    def relative(self) -> np.ndarray:
        """Per step and tensor: the difference relative to what the step changed.

        Each result is itself rounded to float32 once more when it is stored, by up to half a unit
        in its last place: that part of the difference (`2 * UNIT_ROUNDOFF * |s|` at most) says
        nothing about the step and is taken off first. A tensor the step left alone reads 0 when it
        stayed put in both runs, and infinity when it moved in one only. A tensor whose step is
        rounding noise (`noise`) reads 0: it is not judged.
        """
        relative = self._against_changes(self.differences)
        return relative if self.nudged is None else np.where(self.noise, 0.0, relative)

    @property
    def noise(self) -> np.ndarray:
        """Per step and tensor: True where the step is rounding noise, moving by more than one example's share
        of what it changed when every float32 weight it starts from moves by one unit in its last place."""
        if self.nudged is None:
            return np.zeros(self.differences.shape, bool)
        return self._against_changes(self.nudged) > self.flip_bound

    def noise_only(self) -> list[str]:
        """The tensors whose step was rounding noise in some step, by path, in the model's order."""
        return [name for name, noise in zip(self.names, self.noise.any(axis=0)) if noise]

    def _against_changes(self, differences: np.ndarray) -> np.ndarray:
        beyond_storage = np.maximum(differences - 2 * UNIT_ROUNDOFF * self.sizes, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = beyond_storage / self.changes
        return np.where(beyond_storage == 0, 0.0, relative)

    @property
    def flip_bound(self) -> float:
        """One example's share of a step: what a decision flipped by rounding can move at most."""
        return 1.0 / self.rows

    def worst(self) -> tuple[int, str, float]:
        """(step, tensor, relative difference) of the largest difference of the run; steps count from 1."""
        relative = self.relative
        step, tensor = np.unravel_index(int(np.argmax(relative)), relative.shape)
        return int(step) + 1, self.names[int(tensor)], float(relative[step, tensor])

    def kinds(self) -> list[str]:
        """Per step: `AGREES`, `FLIPPED` or `BEYOND`, from its largest relative difference."""
        return [classify(value, self.flip_bound) for value in self.relative.max(axis=1, initial=0.0)]

    def steps_where(self, kind: str) -> list[int]:
        """The steps (counted from 1) whose largest difference is of `kind`."""
        return [i + 1 for i, k in enumerate(self.kinds()) if k == kind]

    @property
    def agrees(self) -> bool:
        """True when no step went beyond what rounding can do (decisions it flips included)."""
        return BEYOND not in self.kinds()

    def largest_for(self, path: str) -> float:
        """The largest relative difference over all steps of a weight and of its optimizer slots."""
        columns = self._columns_of(path)
        return float(self.relative[:, columns].max(initial=0.0)) if columns else float("nan")

    def noise_for(self, path: str) -> bool:
        """Whether a weight's step, or one of its optimizer slots', was rounding noise and not judged."""
        return bool(self.noise[:, self._columns_of(path)].any())

    def _columns_of(self, path: str) -> list[int]:
        slot = path.replace("/", "_")
        return [i for i, name in enumerate(self.names)
                if name == path or name.rsplit("/", 1)[-1].startswith(slot + "_")]


def classify(relative: float, flip_bound: float) -> str:
    """`AGREES` within `ROUNDING`, `FLIPPED` within one example's share (`flip_bound`), else `BEYOND`."""
    if relative <= ROUNDING:
        return AGREES
    return FLIPPED if relative <= flip_bound else BEYOND


def explain_bounds(rows: int) -> str:
    """The two bounds a replayed step is judged by, in one sentence."""
    return (f"float32 rounding moves a step by at most {ROUNDING:.1e} of what it changes (2**12 units of "
            f"rounding: sums of a few thousand terms in all); a decision it flips (a ReLU at zero, an expert "
            f"choice) moves one example's share at most, 1/{rows}")


def state_names(model) -> tuple[str, ...]:
    """The paths of every variable a training step reads and writes: the model's, then the optimizer's."""
    variables = [*model.trainable_variables, *model.non_trainable_variables, *model.optimizer.variables]
    return tuple(v.path for v in variables)


@contextlib.contextmanager
def no_distribution():
    """No distribution in force while the block runs (not even a scope's), the one before restored after."""
    from keras import distribution

    before = distribution.distribution()
    distribution.set_distribution(None)
    try:
        yield
    finally:
        distribution.set_distribution(before)


def one_device_twin(build_model):
    """A second model from `build_model`, on one device, its optimizer built: the replays' program."""
    from course_utils.devices import scope_for

    with no_distribution(), scope_for(None):
        twin = build_model()
        twin.optimizer.build(twin.trainable_variables)
    return twin


class StepReplayer:
    """Replays each step of the model `fit` trains on `twin`, on one device.

    The training loop calls `start(model)` before the first step and `after(model)` after each.
    `start` copies the model's whole training state to the host; `after` copies the state the step
    returned, runs `twin`'s own compiled training step once from the state before the step on the
    same batch (with no distribution in force: the one-device program), and keeps how far the two
    results lie apart. The state after one step is the state before the next. Nothing of the
    sharded run changes: its state is read where Keras keeps it between steps, never written back.
    Read the result with `replay()`.
    """

    def __init__(self, twin, x: np.ndarray, y: np.ndarray, batch_size: int):
        self.twin, self.x, self.y, self.batch_size = twin, x, y, batch_size
        self.names: tuple[str, ...] = ()
        self.step, self.rows, self.nudged, self._before = 0, [], [], None

    def start(self, model) -> None:
        self.names = state_names(model)
        parts = (model.trainable_variables, model.non_trainable_variables, model.optimizer.variables)
        twins = (self.twin.trainable_variables, self.twin.non_trainable_variables, self.twin.optimizer.variables)
        if [[tuple(v.shape) for v in p] for p in parts] != [[tuple(v.shape) for v in p] for p in twins]:
            raise ValueError("build_model built two different models: a step cannot be replayed on one "
                             "device. Make build_model return the same architecture on every call.")
        self._before = tuple([np.array(v.value) for v in part] for part in parts)

    def after(self, model) -> None:
        from course_utils import keras_internals

        sharded = keras_internals.state_after_step(model)
        start = self.step * self.batch_size % len(self.x)
        batch = (self.x[start:start + self.batch_size], self.y[start:start + self.batch_size])
        one = self._on_one_device(self._before, batch)
        row = _distances(_flat(self._before), _flat(sharded), _flat(one))
        self.rows.append(row)
        judged = StepReplay(self.names, *(np.array([part], np.float64) for part in row), rows=self.batch_size)
        self.nudged.append([0.0] * len(self.names) if judged.agrees else self._nudged(batch, one))
        self._before, self.step = sharded, self.step + 1

    def _nudged(self, batch, one) -> list[float]:
        """Per tensor, how far the same step on one device moves when every float32 (or float64) weight it starts
        from moves by one unit in its last place, up or down at random (the same draw on every CPU): the step
        measured, `|(s_nudged - s0_nudged) - (s_one - s0)|`, so a weight's own nudge is not counted. Weights of a
        narrower type are left as they are: their unit in the last place (2**-8 of a bfloat16) is no rounding of a
        float32 step, and would move every tensor as far as a real difference does."""
        trainable, non_trainable, optimizer = self._before
        rng = np.random.default_rng(self.step)
        nudged = [np.nextafter(w, np.where(rng.random(w.shape) < 0.5, -np.inf, np.inf).astype(w.dtype))
                  if w.dtype in (np.float32, np.float64) else w for w in map(np.asarray, trainable)]
        other = self._on_one_device((nudged, non_trainable, optimizer), batch)
        starts = _flat((nudged, non_trainable, optimizer))
        as64 = lambda t: np.asarray(t, np.float64)
        return [float(np.linalg.norm((as64(a) - as64(a0)) - (as64(b) - as64(b0))))
                for a, a0, b, b0 in zip(_flat(other), starts, _flat(one), _flat(self._before))]

    def _on_one_device(self, state, batch):
        """The twin's own compiled step from `state` on `batch`, with no distribution in force."""
        from course_utils import keras_internals
        from course_utils.xla_settings import keyed_without_names

        # only run, never read: the program may be shared with any model of these shapes
        with no_distribution(), keyed_without_names():
            return keras_internals.one_step(self.twin, state, batch)

    def replay(self) -> StepReplay:
        table = np.array(self.rows, dtype=np.float64).reshape(len(self.rows), 3, len(self.names))
        nudged = np.array(self.nudged, dtype=np.float64).reshape(len(self.rows), len(self.names))
        return StepReplay(self.names, table[:, 0], table[:, 1], table[:, 2], rows=self.batch_size, nudged=nudged)


def _flat(state) -> list:
    return [value for part in state for value in part]


def _distances(before, sharded, one) -> list[list[float]]:
    """Per tensor: |sharded - one|, |one - before|, |one| (float64 norms)."""
    rows = [[], [], []]
    for b, s, o in zip(before, sharded, one):
        b, s, o = (np.asarray(t, np.float64) for t in (b, s, o))
        rows[0].append(float(np.linalg.norm(s - o)))
        rows[1].append(float(np.linalg.norm(o - b)))
        rows[2].append(float(np.linalg.norm(o)))
    return rows
