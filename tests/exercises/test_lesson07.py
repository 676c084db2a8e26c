import keras
from keras import distribution

from course_utils import check, load_checkpoint, make_mesh, save_checkpoint


def build():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, name="d1"), keras.layers.Dense(10, name="d2")],
                            name="mlp")


def test_07_1():
    assert check("07.1", (64, 64)).ok
    wrong = check("07.1", (64, 32))
    assert wrong.status == "not yet" and "2 x 4" in wrong.message
    assert "columns" in check("07.1", (16, 128)).message
    assert check("07.1", ...).status == "not attempted"


def test_07_2(tmp_path):
    path = save_checkpoint(build(), tmp_path / "mlp.keras")
    assert check("07.2", load_checkpoint(path, distribution.DataParallel(device_mesh=make_mesh((8,), ("data",))))).ok
    on_one = check("07.2", load_checkpoint(path))
    assert on_one.status == "not yet" and "1 device(s)" in on_one.message
    layout_map = distribution.LayoutMap(make_mesh((2, 4), ("data", "model")))
    layout_map[".*d1/kernel"] = (None, "model")
    split = check("07.2", load_checkpoint(path, distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")))
    assert split.status == "not yet" and "split into 4 blocks" in split.message
    assert "received a str" in check("07.2", "model").message


def test_07_3():
    assert check("07.3", (64 * 128 * 4, 64 * 32 * 4)).ok
    assert "whole float32 kernel" in check("07.3", (64 * 32 * 4, 64 * 32 * 4)).message
    assert "column blocks" in check("07.3", (64 * 128 * 4, 64 * 128 * 4)).message
    assert "pair" in check("07.3", 5).message


def test_checkpoint_contents_lists_whole_arrays_and_no_mesh(tmp_path):
    """The lesson's claims about what the file holds read this summary."""
    from course_utils.exercises.lesson07 import _checkpoint_contents

    contents = _checkpoint_contents(save_checkpoint(build(), tmp_path / "mlp.keras"))
    assert sorted(contents["members"]) == ["config.json", "metadata.json", "model.weights.h5"]
    assert contents["metadata"]["keras_version"] == keras.__version__
    assert contents["h5_magic"] == b"\x89HDF\r\n\x1a\n"
    assert contents["datasets"]["layers/dense/vars/0"] == (64, 128)
    assert contents["attributes"]["layers/dense/vars"] == {"name": "d1"}
    assert "mesh" not in contents["config"]
