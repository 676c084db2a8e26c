"""Sharded runs that are right and sharded runs with a bug planted, each judged by `compare_runs`.

`judge()` trains every case and returns, per case, whether `compare_runs` called it equivalent, its
verdict line and the largest replayed step difference. Run as a script in a fresh process, so that
`XLA_FLAGS` (e.g. `--xla_cpu_max_isa=AVX`) can choose the instruction set XLA compiles for before
JAX starts, it prints them as one JSON object.

The bugs are planted where a sharded run goes wrong in practice, and only under a distribution, so
the one-device twin that replays each step computes the right step:
- a dropped gradient: the first layer learns nothing (its input's gradient is stopped);
- a lost shard of the batch: the loss counts half the rows (as if half the devices' rows were lost);
- a gradient summed instead of averaged over the 8 devices (the loss scaled by 8; Adam's update
  divides it out, its moments do not);
- data fed twice: every batch's second half replaced by its first (two processes feeding one shard);
- another learning rate, another seed: set-ups that differ before the first step.

The lessons' small transformer (`models.transformer_block`) is judged too, right and with its gradient summed
over the devices: its attention's key bias has a gradient that is zero in exact arithmetic, so its steps are
rounding noise, which the right run must not be failed for and the wrong one must not be passed by.
"""

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

from course_utils import setup_devices  # noqa: E402

setup_devices(8)

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import distribution  # noqa: E402

from course_utils import compare_runs, make_layout_map, make_mesh, models, run_training  # noqa: E402

ROWS, BATCH = 128, 32


class Bug(keras.layers.Layer):
    """Identity on one device; under a distribution, `kind` plants its bug."""

    def __init__(self, kind="", **kwargs):
        super().__init__(**kwargs)
        self.kind = kind

    def call(self, x):
        if distribution.distribution() is None or not self.kind:
            return x
        if self.kind == "dropped gradient":
            return keras.ops.stop_gradient(x)
        return x


class Model(keras.Model):
    """A functional MLP whose loss, under a distribution, can lose half the batch or be summed over devices."""

    def __init__(self, *args, loss_bug="", **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_bug = loss_bug

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if distribution.distribution() is not None and self.loss_bug == "lost shard":
            half = keras.ops.shape(y)[0] // 2
            return super().compute_loss(x[:half], y[:half], y_pred[:half], None, training)
        loss = super().compute_loss(x, y, y_pred, sample_weight, training)
        if distribution.distribution() is not None and self.loss_bug == "summed over devices":
            return loss * 8
        return loss


def build(bug="", lr=1e-2):
    inputs = keras.Input((16,))
    hidden = keras.layers.Dense(32, activation="relu", name="d1")(inputs)
    hidden = Bug(bug if bug == "dropped gradient" else "", name="bug")(hidden)
    outputs = keras.layers.Dense(4, name="d2")(hidden)
    model = Model(inputs, outputs, name="mlp", loss_bug=bug)
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="mse")
    return model


def build_transformer(bug=""):
    base = models.transformer_block(seq=8, width=32, heads=4, mlp_width=64, classes=4)
    model = Model(base.inputs, base.outputs, name="transformer", loss_bug=bug)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def judge_transformer() -> dict:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(ROWS, 8, 32)).astype("float32"), rng.integers(0, 4, ROWS).astype("int32")
    dp = distribution.DataParallel(device_mesh=make_mesh((8,), ("data",)))
    single = run_training(build_transformer, data, epochs=1, batch_size=BATCH, label="one device")
    cases = {"transformer, data parallel": dict(distribution=dp),
             "transformer, summed over devices": dict(distribution=dp,
                                                      build=lambda: build_transformer("summed over devices"))}
    return {name: _verdict(single, run_training(case.get("build", build_transformer), data,
                                                distribution=case["distribution"], epochs=1, batch_size=BATCH,
                                                label=name))
            for name, case in cases.items()}


def _verdict(single, run) -> dict:
    comparison = compare_runs(single, run)
    return {"equivalent": comparison.equivalent, "verdict": comparison.verdict(),
            "worst": run.replay.worst()[2] if run.replay is not None else None,
            "noise": run.replay.noise_only() if run.replay is not None else []}


def judge() -> dict:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(ROWS, 16)).astype("float32"), rng.normal(size=(ROWS, 4)).astype("float32")
    twice = (x.copy(), y.copy())
    for start in range(0, ROWS, BATCH):
        half = BATCH // 2
        twice[0][start + half:start + BATCH] = x[start:start + half]
        twice[1][start + half:start + BATCH] = y[start:start + half]
    dp = distribution.DataParallel(device_mesh=make_mesh((8,), ("data",)))
    mp = distribution.ModelParallel(layout_map=make_layout_map(make_mesh((2, 4), ("data", "model")),
                                                               models.mlp_rules()), batch_dim_name="data")
    single = run_training(build, (x, y), epochs=2, batch_size=BATCH, label="one device")
    cases = {
        "data parallel": dict(distribution=dp),
        "model parallel": dict(distribution=mp),
        "dropped gradient": dict(distribution=dp, build=lambda: build("dropped gradient")),
        "lost shard": dict(distribution=mp, build=lambda: build("lost shard")),
        "summed over devices": dict(distribution=dp, build=lambda: build("summed over devices")),
        "data fed twice": dict(distribution=dp, data=twice),
        "another learning rate": dict(distribution=dp, build=lambda: build(lr=8e-2)),
        "another seed": dict(distribution=mp, seed=1),
    }
    verdicts = {}
    for name, case in cases.items():
        run = run_training(case.get("build", build), case.get("data", (x, y)), distribution=case["distribution"],
                           epochs=2, batch_size=BATCH, seed=case.get("seed", 0), label=name)
        verdicts[name] = _verdict(single, run)
    return {**verdicts, **judge_transformer()}


if __name__ == "__main__":
    print(json.dumps({"xla_flags": os.environ.get("XLA_FLAGS", ""), "cases": judge()}))
    sys.exit(0)
