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
    owner = next(c for c in type(models.mlp()).__mro__ if "_get_state_sharding_spec" in vars(c))
    monkeypatch.delattr(owner, "_get_state_sharding_spec")
    assert keras_internals.missing() == ["keras.Model._get_state_sharding_spec"]


def test_missing_names_a_behaviour_that_is_gone(monkeypatch):
    # as if Keras had renamed the global-state keys the course reads: no attribute is missing, both behaviours are
    monkeypatch.setattr(keras_internals, "DEFERRED_KEY", "pending_variables")
    monkeypatch.setattr(keras_internals, "NAME_SCOPE_KEY", "scopes")
    assert keras_internals.missing() == [f"behaviour: {b}" for b in keras_internals.BEHAVIOURS]


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
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    trainable, non_trainable, optimizer, metrics = keras_internals.training_state(model)
    assert [v.shape for v in trainable] == [tuple(v.shape) for v in model.trainable_variables]
    assert len(keras_internals.state_shardings(model)) == 4
