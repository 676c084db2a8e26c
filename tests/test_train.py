"""run_training: Keras's own fit, each step's loss, the run's set-up, every sharded step replayed on one device."""

import dataclasses

import jax
import keras
import numpy as np
import pytest
from keras import distribution

from course_utils import compare_runs, make_layout_map, make_mesh, models, reordered_rows, run_training


ROWS, BATCH = 128, 32


def build():
    model = models.mlp(inputs=16, hidden=32, classes=4)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(ROWS, 16)).astype("float32"), rng.normal(size=(ROWS, 4)).astype("float32")


@pytest.fixture(scope="module")
def single(data):
    return run_training(build, data, epochs=2, batch_size=BATCH)


def model_parallel():
    layout_map = make_layout_map(make_mesh((2, 4), ("data", "model")), models.mlp_rules())
    return distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")


def test_single_run_records_every_step(single):
    assert len(single.losses) == 2 * ROWS // BATCH
    assert len(single.step_seconds) == len(single.losses) - 1  # the compiling step is left out
    assert np.all(single.step_seconds > 0) and single.median_step_seconds > 0
    assert list(single.weights) == ["mlp/d1/kernel", "mlp/d1/bias", "mlp/d2/kernel", "mlp/d2/bias"]
    assert single.losses[-1] < single.losses[0]


def test_per_step_losses_match_a_manual_loop(single, data):
    keras.utils.set_random_seed(0)
    with keras.device("cpu:0"):
        model = build()
        x, y = data
        manual = [float(model.train_on_batch(x[i:i + BATCH], y[i:i + BATCH])) for i in range(0, ROWS, BATCH)]
    np.testing.assert_allclose(single.losses[: len(manual)], manual, rtol=1e-5)


def test_a_single_run_builds_on_the_first_device_with_the_bits_of_an_explicit_device_scope(single, data):
    # run_training builds without a device scope when JAX's default device is already the first
    # course device (so its programs are shared with a distribution's builds); nothing else changes.
    assert all(v.value.devices() == {jax.devices()[0]} for v in single.model.weights)
    with keras.device("cpu:0"):
        keras.utils.set_random_seed(0)
        model = build()
        model.fit(*data, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    for v in model.weights:
        assert np.array_equal(np.asarray(v.value), single.weights[v.path]), v.path


def test_data_parallel_on_eight_is_equivalent(single, data):
    dp = distribution.DataParallel(device_mesh=make_mesh((8,), ("data",)))
    run = run_training(build, data, distribution=dp, epochs=2, batch_size=BATCH)
    comparison = compare_runs(single, run)
    assert comparison.equivalent, comparison
    assert run.model.get_layer("d1").kernel.value.sharding.mesh.shape["data"] == 8


def test_model_parallel_on_2x4_is_equivalent(single, data):
    run = run_training(build, data, distribution=model_parallel(), epochs=2, batch_size=BATCH)
    comparison = compare_runs(single, run)
    assert comparison.equivalent, comparison
    assert run.model.get_layer("d1").kernel.value.sharding.shard_shape((16, 32)) == (16, 8)
    assert "ModelParallel (2, 4)" in run.label and run.simulated


def test_a_different_seed_is_not_equivalent(single, data):
    other = run_training(build, data, epochs=2, batch_size=BATCH, seed=1)
    comparison = compare_runs(single, other)
    assert not comparison.equivalent
    assert "NOT equivalent: the runs differ before their first step" in repr(comparison)
    assert "other initial weights" in comparison.verdict()
    assert comparison.rows[1].max_abs > 1e-3


def test_a_sharded_run_replays_every_step_and_keeps_its_set_up(single, data):
    run = run_training(build, data, distribution=model_parallel(), epochs=2, batch_size=BATCH)
    assert single.replay is None and not single.sharded  # one device's steps are one device's
    assert run.sharded and len(run.replay) == len(run.losses) == 8
    assert run.replay.names[:4] == tuple(run.weights) and "adam" in run.replay.names[-1]
    assert np.all(run.replay.changes[:, :4] > 0)  # every weight moved in every step
    assert run.setup.batch_size == BATCH and run.setup.epochs == 2 and len(run.setup.batches) == ROWS // BATCH
    assert run.setup.optimizer["learning_rate"] == pytest.approx(1e-2) and "name" not in run.setup.optimizer
    for path, value in single.initial_weights.items():  # seeded alike: the same start, sharded or not
        np.testing.assert_array_equal(value, run.initial_weights[path])


def test_the_replay_changes_nothing_in_the_run_it_replays(data):
    kept = run_training(build, data, distribution=model_parallel(), epochs=1, batch_size=BATCH)
    plain = run_training(build, data, distribution=model_parallel(), epochs=1, batch_size=BATCH, replay=False)
    assert plain.replay is None
    np.testing.assert_array_equal(kept.losses, plain.losses)
    for path in kept.weights:
        np.testing.assert_array_equal(kept.weights[path], plain.weights[path])


def test_reordered_rows_keeps_every_batch_and_changes_each_order(data):
    x, y = reordered_rows(data, BATCH)
    for start in range(0, ROWS, BATCH):
        rows = slice(start, start + BATCH)
        assert not np.array_equal(x[rows], data[0][rows])
        assert sorted(map(bytes, x[rows])) == sorted(map(bytes, data[0][rows]))
        order = [int(np.flatnonzero((data[0][rows] == row).all(axis=1))[0]) for row in x[rows]]
        np.testing.assert_array_equal(y[rows], data[1][rows][order])  # each label stays with its row
    with pytest.raises(ValueError, match="multiple of batch_size"):
        reordered_rows((data[0][:100], data[1][:100]), BATCH)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(data=np.zeros((8, 2))), r"pair \(x, y\)"),
        (dict(data=(np.zeros((8, 16)), np.zeros((6, 4)))), r"Received: 8 and 6"),
        (dict(data=(np.zeros((100, 16)), np.zeros((100, 4))), batch_size=32), r"100 rows, batch_size=32.*first 96"),
        (dict(data=(np.zeros((64, 16)), np.zeros((64, 4))), batch_size=0), r"batch_size=0"),
        (dict(data=(np.zeros((0, 16)), np.zeros((0, 4)))), r"no rows.*Received: x of shape \(0, 16\), y of shape \(0, 4\)"),
        (dict(data=(np.zeros((64, 16)), np.zeros((64, 4))), epochs=0), r"Received: epochs=0\. Use for example epochs=1"),
        (dict(data=(np.zeros((64, 16)), np.zeros((64, 4))), epochs=1.5), r"Received: epochs=1.5"),
    ],
)
def test_bad_input(kwargs, message):
    kwargs.setdefault("batch_size", 32)
    with pytest.raises(ValueError, match=message):
        run_training(build, **kwargs)


def test_uncompiled_model_is_refused(data):
    with pytest.raises(ValueError, match="must return a compiled model"):
        run_training(lambda: keras.Sequential([keras.Input((16,)), keras.layers.Dense(4)]), data, batch_size=BATCH)


def test_a_run_without_steps_still_prints(single):
    empty = dataclasses.replace(single, losses=np.zeros(0), step_seconds=np.zeros(0))
    assert repr(empty) == "TrainingRun(single device: no steps ran)"
