"""A checkpoint saved under one layout restores under another with identical weights."""

import errno
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest
from keras import distribution

from course_utils.checkpoints import CheckpointError
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
    with pytest.raises(FileNotFoundError, match=r"No checkpoint at '.*missing.keras': nothing is there"):
        load_checkpoint(tmp_path / "missing.keras")
    (tmp_path / "folder.keras").mkdir()
    with pytest.raises(ValueError, match=r"'.*folder.keras' is a folder"):
        save_checkpoint(trained, tmp_path / "folder.keras")


def weights_of(model):
    return [np.asarray(v.value) for v in model.weights]


class Unsaveable(keras.layers.Layer):
    """A layer whose config cannot be written: Keras fails partway through model.save."""

    def get_config(self):
        raise TypeError("this layer's config cannot be serialised")


def test_a_failed_save_leaves_the_old_checkpoint_whole(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    before = path.read_bytes()
    broken = keras.Sequential([keras.Input((16,)), Unsaveable(), keras.layers.Dense(4)], name="broken")
    with pytest.raises(TypeError, match="cannot be serialised"):
        save_checkpoint(broken, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.keras"]  # no half-written file beside it
    assert compare_weights(trained, load_checkpoint(path)).equivalent


KILLED_SAVE = """
import sys
from course_utils import setup_devices, save_checkpoint
setup_devices(1)
import keras
model = keras.Sequential([keras.Input((4096,)), keras.layers.Dense(4096), keras.layers.Dense(4096)], name="big")
print("saving", flush=True)
save_checkpoint(model, sys.argv[1])
print("saved", flush=True)
"""


@pytest.mark.processes
def test_a_save_killed_midway_leaves_the_old_checkpoint_loadable(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    temporary = tmp_path / "tmp"  # the killed process's TMPDIR: Keras writes a folder there as it saves
    temporary.mkdir()
    env = {**os.environ, "KERAS_BACKEND": "jax", "COURSE_PLATFORM": "cpu", "TMPDIR": str(temporary)}
    saver = subprocess.Popen([sys.executable, "-c", KILLED_SAVE, str(path)], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert saver.stdout.readline() == "saving\n"
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".mlp.keras.*")) and time.monotonic() < deadline:
            time.sleep(0.002)
        partials = list(tmp_path.glob(".mlp.keras.*"))
        saver.send_signal(signal.SIGKILL)  # midway: the new file is being written
    finally:
        saver.kill()
        output = saver.communicate()[0]
    assert partials and "saved" not in output and saver.returncode == -signal.SIGKILL
    assert list(temporary.iterdir()) == []  # Keras's temporary folder went beside the target, not into TMPDIR
    temporary.rmdir()
    restored = load_checkpoint(path)
    assert [w.shape for w in weights_of(restored)] == [(16, 32), (32,), (32, 4), (4,)]
    assert all(np.array_equal(a, b) for a, b in zip(weights_of(trained), weights_of(restored)))
    save_checkpoint(restored, path)  # the next save clears what the killed one left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.keras"]


@pytest.mark.parametrize("cut, message", [
    (lambda data: b"", r"'.*bad.keras' is empty \(0 bytes\)"),
    (lambda data: data[: len(data) // 2], r"'.*bad.keras' is truncated: .*its end is missing \(\d+ bytes on disk\)"),
    (lambda data: b"HDF5 weights, not a zip", r"'.*bad.keras' is not a .keras archive .*starts with b'HDF5'"),
    (lambda data: data[:100] + bytes([data[100] ^ 0xFF]) + data[101:], r"'.*bad.keras' is corrupt: .*fails its checksum"),
])
def test_a_damaged_file_is_named_and_explained(trained, tmp_path, cut, message):
    data = save_checkpoint(trained, tmp_path / "good.keras").read_bytes()
    (tmp_path / "bad.keras").write_bytes(cut(data))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tmp_path / "bad.keras")


def test_a_zip_that_is_not_a_checkpoint(tmp_path):
    with zipfile.ZipFile(tmp_path / "notes.keras", "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(CheckpointError, match=r"not a Keras checkpoint: it lacks \['config.json', 'model.weights.h5'\]"):
        load_checkpoint(tmp_path / "notes.keras")


def test_a_weight_the_mesh_cannot_divide_is_named(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    layout_map = make_layout_map(make_mesh((1, 8), ("data", "model")), {".*d2/kernel": (None, "model")})
    target = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path, target)
    message = str(caught.value)
    assert "mlp.keras' cannot be laid out under ModelParallel on the mesh {'data': 1, 'model': 8}" in message
    # Keras builds the restored variables without the model's name in their paths: 'd2/kernel'.
    assert "variable 'd2/kernel' of shape (32, 4) with layout (None, 'model')" in message
    assert "Dimension 1 has size 4" in message and "8 equal parts along model" in message
    assert "d1" not in message  # only the variable that does not divide


def test_a_symbolic_link_is_followed_and_kept(trained, tmp_path):
    target = save_checkpoint(trained, tmp_path / "real.keras")
    old = target.read_bytes()
    (tmp_path / "link.keras").symlink_to(target)
    trained.get_layer("d2").bias.assign(trained.get_layer("d2").bias.value + 1.0)
    try:
        assert save_checkpoint(trained, tmp_path / "link.keras") == target
    finally:
        trained.get_layer("d2").bias.assign(trained.get_layer("d2").bias.value - 1.0)
    assert (tmp_path / "link.keras").is_symlink()  # it used to be replaced by a file, the target left old
    assert target.read_bytes() != old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.keras", "real.keras"]


def test_a_home_folder_path_is_expanded(trained, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    written = save_checkpoint(trained, "~/saved/mlp.keras")
    assert written == tmp_path / "saved" / "mlp.keras" and written.is_file()
    assert not Path("~").exists()  # no folder named '~' in the working directory
    assert compare_weights(trained, load_checkpoint("~/saved/mlp.keras")).equivalent


def test_arguments_in_the_wrong_order_or_of_the_wrong_kind(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    with pytest.raises(TypeError, match=r"path must be a file path .* Received: <Sequential.*Check the order"):
        load_checkpoint(trained, "dp")
    with pytest.raises(TypeError, match=r"Received: distribution='dp' \(str\)\. Build one first"):
        load_checkpoint(path, "dp")
    with pytest.raises(TypeError, match=r"saves a Keras model. Received: model='mlp.keras' \(str\)"):
        save_checkpoint("mlp.keras", path)


def test_what_is_there_instead_of_a_file_is_named(tmp_path):
    os.mkfifo(tmp_path / "pipe.keras")
    with pytest.raises(FileNotFoundError, match=r"'.*pipe.keras': it is a named pipe \(FIFO\), not a file"):
        load_checkpoint(tmp_path / "pipe.keras")
    (tmp_path / "folder.keras").mkdir()
    with pytest.raises(FileNotFoundError, match=r"'.*folder.keras': it is a folder, not a file"):
        load_checkpoint(tmp_path / "folder.keras")


def _rewrite(source: Path, target: Path, member: str, change) -> None:
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for name in archive.namelist():
            data = archive.read(name)
            out.writestr(name, change(data) if name == member else data)


@pytest.mark.parametrize("under", [None, "model parallel"])
def test_a_damaged_config_is_named(trained, tmp_path, under):
    _rewrite(save_checkpoint(trained, tmp_path / "good.keras"), tmp_path / "bad.keras", "config.json",
             lambda data: data[:40])
    with pytest.raises(CheckpointError, match=r"'.*bad.keras' holds a config.json that is not valid JSON"):
        load_checkpoint(tmp_path / "bad.keras", model_parallel() if under else None)


@keras.saving.register_keras_serializable(package="course_tests")
class Doubler(keras.layers.Layer):
    def call(self, x):
        return 2 * x


def test_a_layer_keras_does_not_know_is_named_with_the_fix(tmp_path, monkeypatch):
    model = keras.Sequential([keras.Input((4,)), Doubler(name="doubler")], name="custom")
    path = save_checkpoint(model, tmp_path / "custom.keras")
    from keras.src.saving import object_registration

    monkeypatch.setattr(object_registration, "GLOBAL_CUSTOM_OBJECTS", {})  # as in a session that never defined it
    with pytest.raises(CheckpointError, match=r"uses 'Doubler', which Keras does not know.*"
                                              r"custom_objects=\{'course_tests>Doubler': Doubler\}"):
        load_checkpoint(path)
    restored = load_checkpoint(path, custom_objects={"course_tests>Doubler": Doubler})  # the fix it names works
    assert float(restored(np.ones((1, 4), "float32"))[0, 0]) == 2.0


def test_a_key_that_is_not_a_regular_expression_is_named_on_load(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    layout_map = distribution.LayoutMap(make_mesh((2, 4), ("data", "model")))
    layout_map["d1/kernel("] = (None, "model")
    with pytest.raises(ValueError, match=r"the LayoutMap key 'd1/kernel\(' is not a regular expression"):
        load_checkpoint(path, distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data"))


@pytest.mark.lesson_runs("learner", "solved")
@pytest.mark.parametrize("solved", [False, True], ids=["as a learner finds it", "solved"])
def test_lesson_07_leaves_nothing_in_the_temporary_folder(lesson_runs, solved):
    path = Path(__file__).resolve().parents[1] / "notebooks" / "07_saving_and_resharding.ipynb"
    run = lesson_runs.solved(path) if solved else lesson_runs.learner(path)
    cleanup = next(c for c in run.notebook.cells if c.cell_type == "code" and "scratch.cleanup()" in c.source)
    assert cleanup.outputs[0]["data"]["text/plain"] == "False"
    tmp = lesson_runs.tmpdir[path.stem, solved]  # the kernel's tempfile folder
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("tmp")) == []


def test_rules_that_match_none_of_the_checkpoints_variables_are_refused(trained, tmp_path):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    layout_map = make_layout_map(make_mesh((2, 4), ("data", "model")), {".*attention/query/kernel": (None, "model")})
    other = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")  # rules of another model
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path, other)
    message = str(caught.value)
    assert "None of the layout rules of the ModelParallel given to load_checkpoint matches a variable of" in message
    assert "every variable would be restored whole on each of the 8 devices" in message
    assert "'.*attention/query/kernel'" in message and "'d1/kernel'" in message
    assert "or restore under DataParallel(...) to replicate on purpose" in message
    restored = load_checkpoint(path, model_parallel())  # rules that match: restored, split
    assert placement(restored.get_layer("d1").kernel).shard_shape == (16, 8)


class _FullDisk:
    """A model whose save meets a full disk, as Keras meets it: the first bytes written, then ENOSPC
    (h5py's OSError carries no errno, only its message)."""

    def __init__(self, h5py_style: bool):
        self.h5py_style = h5py_style

    def save(self, path):
        Path(path).write_bytes(b"PK\x03\x04 the start")
        if self.h5py_style:
            raise OSError("Unable to synchronously create file (file write failed: errno = 28, error message = "
                          "'No space left on device')")
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("h5py_style", [False, True], ids=["zip", "h5py"])
def test_a_save_onto_a_full_disk_names_the_checkpoint_and_keeps_the_old_one(trained, tmp_path, h5py_style):
    path = save_checkpoint(trained, tmp_path / "mlp.keras")
    before = path.read_bytes()
    with pytest.raises(OSError) as caught:
        save_checkpoint(_FullDisk(h5py_style), path)
    message = str(caught.value)
    assert caught.value.errno == errno.ENOSPC
    assert f"save_checkpoint could not write '{path}': the disk holding '{tmp_path}' is full" in message
    assert "MB free). Free some space there, or save on another disk" in message
    assert "The checkpoint already there is unchanged." in message
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["mlp.keras"]


def test_a_save_into_a_read_only_folder_names_it_and_the_fix(trained, tmp_path, monkeypatch):
    real_mkdir = os.mkdir

    def read_only(path, *args, **kwargs):  # as root everything is writable: the file system says no here
        if str(path).endswith(".saving"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only)
    with pytest.raises(OSError) as caught:
        save_checkpoint(trained, tmp_path / "mlp.keras")
    assert caught.value.errno == errno.EROFS
    assert str(caught.value) == (f"[Errno 30] save_checkpoint could not write '{tmp_path / 'mlp.keras'}': the folder "
                                 f"'{tmp_path}' is on a read-only file system. Save it in a folder you can write to, "
                                 f"e.g. '~/checkpoints/mlp.keras'. Nothing was written.")


@pytest.mark.parametrize("under", ["a-file/mlp.keras", "a-file/deeper/mlp.keras"])
def test_a_save_under_a_path_that_is_a_file_names_the_file(trained, tmp_path, under):
    (tmp_path / "a-file").write_text("notes")
    with pytest.raises(OSError) as caught:  # FileExistsError or NotADirectoryError, as before, now explained
        save_checkpoint(trained, tmp_path / under)
    message = str(caught.value)
    assert f"save_checkpoint could not write '{tmp_path / under}': '{tmp_path / 'a-file'}' is a file, not a folder" \
        in message
    assert f"Save under another folder (e.g. '{tmp_path / 'checkpoints' / 'mlp.keras'}'), or move that file" in message
    assert (tmp_path / "a-file").read_text() == "notes"
