"""What each way of loading holds at its peak: the arithmetic from shapes, and each route's mechanism on a real load."""

import jax
import keras
import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

from keras import distribution  # noqa: E402

from course_utils import abstract_model, make_mesh, placement, without_axis  # noqa: E402
from course_utils.placements import per_device  # noqa: E402
from course_utils.serving import loading_peaks  # noqa: E402

GEMMA = dict(vocabulary_size=256, num_layers=1, num_query_heads=4, num_key_value_heads=4, hidden_dim=32,
             intermediate_dim=64, head_dim=8)


@pytest.fixture(scope="module")
def serving():
    mesh = make_mesh((2, 4), ("batch", "model"))
    return distribution.ModelParallel(
        layout_map=without_axis(keras_hub.models.GemmaBackbone.get_layout_map(mesh), "batch"), batch_dim_name="batch")


def _built(serving, *, compiled=False):
    with serving.scope():
        keras.utils.set_random_seed(0)
        model = keras_hub.models.GemmaBackbone(**GEMMA)
        if compiled:  # OrbaxCheckpoint saves the state tree of a compiled model
            model.compile(optimizer="adam", loss="mse")
    return model


def test_the_peaks_add_up_the_blocks_and_the_largest_weight(serving):
    real = _built(serving)
    peaks = loading_peaks(abstract_model(keras_hub.models.GemmaBackbone, GEMMA), serving)
    held = max(per_device([placement(v) for v in real.weights]).values())
    assert peaks.blocks == held == peaks.blocks_into_shape_only
    assert (peaks.largest_path, peaks.largest) == ("token_embedding/embeddings", 256 * 32 * 4)
    assert peaks.whole_then_split == held + 256 * 32 * 4 and peaks.blocks_into_a_built_model == 2 * held
    assert [peak for _, peak in peaks.rows()] == [peaks.whole_then_split, 2 * held, held]


@pytest.mark.parametrize("route", ["from_preset", "load_weights"])
def test_a_weights_h5_value_reaches_its_variable_whole_on_the_default_device(route, serving, tmp_path, monkeypatch):
    """`from_preset`'s route (a preset saved here, nothing downloaded), and the `load_weights` of a `.weights.h5`
    file it ends in: each saved value is assigned whole, made a whole array on one device, then split."""
    source = _built(serving)
    source.save_to_preset(str(tmp_path / "preset"))
    variable_class = type(source.weights[0])
    seen = []
    assign = variable_class._direct_assign

    def watched(self, value):
        seen.append((self.path, tuple(value.shape), value.sharding))
        return assign(self, value)

    if route == "load_weights":
        target = _built(serving)
        monkeypatch.setattr(variable_class, "_direct_assign", watched)
        target.load_weights(tmp_path / "preset" / "model.weights.h5")
    else:
        monkeypatch.setattr(variable_class, "_direct_assign", watched)
        with serving.scope():
            target = keras_hub.models.GemmaBackbone.from_preset(str(tmp_path / "preset"))
    monkeypatch.undo()
    loaded = {path: (shape, sharding) for path, shape, sharding in seen if path in {v.path for v in target.weights}}
    assert set(loaded) == {v.path for v in target.weights}
    assert all(loaded[v.path][0] == tuple(v.shape) for v in target.weights)  # each value whole
    assert all(sharding.device_set == {jax.devices()[0]} for _, sharding in loaded.values())  # on one device
    assert all(np.array_equal(a, b) and a.value.sharding == b.value.sharding
               for a, b in zip(source.weights, target.weights))  # then split as the layout says


def test_load_weights_of_an_orbax_folder_holds_the_blocks_twice_at_its_peak(serving, tmp_path, monkeypatch):
    """Keras's route for an Orbax folder: the blocks are read into new arrays while the model holds its own."""
    pytest.importorskip("orbax.checkpoint")
    source = _built(serving, compiled=True)
    saver = keras.callbacks.OrbaxCheckpoint(tmp_path / "ckpt", save_weights_only=True, save_on_background=False)
    saver.set_model(source)
    saver.on_epoch_end(0)
    saver.on_train_end()
    target = _built(serving, compiled=True)
    blocks = {d: n for d, n in per_device([placement(v) for v in target.weights]).items()}
    held = {}
    set_state_tree = type(target).set_state_tree

    def watched(self, state):
        loaded = jax.tree_util.tree_leaves(state)
        for device in jax.devices():
            mine = [s.data.nbytes for a in [*loaded, *(v.value for v in self.weights)]
                    for s in a.addressable_shards if s.device == device]
            held[f"cpu:{device.id}"] = sum(mine)
        return set_state_tree(self, state)

    monkeypatch.setattr(type(target), "set_state_tree", watched)
    with serving.scope():  # under a distribution, Keras asks Orbax for each array in its layout
        target.load_weights(tmp_path / "ckpt")
    monkeypatch.undo()
    assert held == {d: 2 * n for d, n in blocks.items()}
    assert all(np.array_equal(a, b) for a, b in zip(source.weights, target.weights))
    assert all(a.value.sharding == b.value.sharding for a, b in zip(source.weights, target.weights))
