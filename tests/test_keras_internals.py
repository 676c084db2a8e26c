"""The private Keras attributes the course uses still exist, and each helper reads the real thing."""

import keras
from keras import distribution

from course_utils import keras_internals, make_layout_map, make_mesh, models


def test_every_private_attribute_still_exists():
    missing = keras_internals.missing()
    assert not missing, (
        f"Keras {keras.__version__} no longer has {missing}; course_utils/keras_internals.py was "
        f"checked against Keras {keras_internals.CHECKED_WITH}. Update the helper that uses it.")


def test_missing_names_an_attribute_that_is_gone(monkeypatch):
    # as if Keras had dropped an attribute the course reads (one fit itself does not need, so no behaviour breaks)
    monkeypatch.setattr(keras_internals, "ATTRIBUTES", (*keras_internals.ATTRIBUTES, ("keras.Model", "_gone_in_3_16")))
    assert keras_internals.missing() == ["keras.Model._gone_in_3_16"]


def test_missing_names_a_behaviour_that_is_gone(monkeypatch):
    # as if Keras had renamed the global-state keys the course reads, and the attribute where fit keeps its
    # state between steps: no attribute the course looks up is missing, every behaviour is
    monkeypatch.setattr(keras_internals, "DEFERRED_KEY", "pending_variables")
    monkeypatch.setattr(keras_internals, "NAME_SCOPE_KEY", "scopes")
    real = keras_internals.state_after_step
    monkeypatch.setattr(keras_internals, "state_after_step", lambda model: real(type("Renamed", (), {
        "_jax_state": {k: [] for k in ("trainable_variables", "non_trainable_variables", "optimizer_variables")}})))
    assert keras_internals.missing() == [f"behaviour: {b}" for b in keras_internals.BEHAVIOURS]


def test_a_step_read_between_fit_s_steps_is_taken_again_by_one_step():
    import numpy as np

    model = models.mlp(inputs=4, hidden=8, classes=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    model.optimizer.build(model.trainable_variables)
    parts = (model.trainable_variables, model.non_trainable_variables, model.optimizer.variables)
    start = tuple([np.array(v.value) for v in part] for part in parts)
    seen = []

    class Keep(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(keras_internals.state_after_step(self._model))

    x, y = np.ones((16, 4), "float32"), np.zeros((16, 2), "float32")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[Keep()])
    again = keras_internals.one_step(model, seen[0], (x[8:], y[8:]))  # the second step, from the first's state
    for done, redone in zip(seen[1], again):
        for a, b in zip(done, redone):
            np.testing.assert_array_equal(a, b)
    first = keras_internals.one_step(model, start, (x[:8], y[:8]))
    assert int(first[2][0]) == 1 and not np.array_equal(first[0][0], start[0][0])  # one step, from the start


def test_helpers_read_the_model_and_distribution():
    model = models.mlp()
    layout_map = make_layout_map(make_mesh((2, 4), ("data", "model")), models.mlp_rules())
    dist = distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    assert keras_internals.layout_map_of(dist) is layout_map
    assert keras_internals.layout_map_of(distribution.DataParallel()) is None
    paths = [layer.path for layer in keras_internals.all_layers(model, include_self=False) if layer.path]
    assert paths == ["mlp/d1", "mlp/d2"]
    assert all(keras_internals.is_leaf(layer) for layer in model.layers)
    assert not keras_internals.is_leaf(model)
