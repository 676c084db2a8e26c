"""A checkpoint saved under one layout restores under another with identical weights."""

import numpy as np
import pytest
from keras import distribution

from course_utils import compare_weights, load_checkpoint, make_layout_map, make_mesh, models, placement, run_training, save_checkpoint



def build():
    model = models.mlp(inputs=16, hidden=32, classes=4)
    model.compile(optimizer="adam", loss="mse")
    return model


def model_parallel():
    layout_map = make_layout_map(make_mesh((2, 4), ("data", "model")), models.mlp_rules())
    return distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")


@pytest.fixture(scope="module")
def trained():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(64, 16)).astype("float32"), rng.normal(size=(64, 4)).astype("float32")
    return run_training(build, data, distribution=model_parallel(), epochs=1, batch_size=32).model


def test_model_parallel_to_data_parallel(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    dp = distribution.DataParallel(device_mesh=make_mesh((8,), ("data",)))
    restored = load_checkpoint(path, dp)
    assert placement(trained.get_layer("d1").kernel).shard_shape == (16, 8)
    after = placement(restored.get_layer("d1").kernel)
    assert after.shard_shape == (16, 32) and after.replication == 8
    comparison = compare_weights(trained, restored)
    assert comparison.equivalent and all(r.max_abs == 0 for r in comparison.rows)


def test_model_parallel_to_one_device_and_back(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    single = load_checkpoint(path)
    assert placement(single.get_layer("d1").kernel).devices == ("cpu:0",)
    assert compare_weights(trained, single).equivalent
    again = load_checkpoint(save_checkpoint(single, tmp_path / "again.keras"), model_parallel())
    assert placement(again.get_layer("d2").kernel).shard_shape == (8, 4)
    assert compare_weights(trained, again).equivalent


def test_a_changed_weight_is_caught(trained, tmp_path):
    restored = load_checkpoint(save_checkpoint(trained, tmp_path / "mlp.keras"))
    bias = restored.get_layer("d2").bias
    bias.assign(bias.value + 1e-3)
    comparison = compare_weights(trained, restored)
    assert not comparison.equivalent
    assert [r.name for r in comparison.rows if not r.within] == ["mlp/d2/bias"]


def test_bad_paths(trained, tmp_path):
    with pytest.raises(ValueError, match=r"ending in .keras. Received: path='.*mlp.h5'"):
        save_checkpoint(trained, tmp_path / "mlp.h5")
    with pytest.raises(FileNotFoundError, match="No checkpoint at"):
        load_checkpoint(tmp_path / "missing.keras")
