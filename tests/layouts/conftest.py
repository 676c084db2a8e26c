"""What the layout tests that train for real share: a two-layer block and one batch of data."""

import numpy as np
import pytest


def _up_down():
    import keras

    keras.utils.set_random_seed(0)
    x = keras.Input((16,))
    y = keras.layers.Dense(8, name="down")(keras.layers.Dense(32, activation="relu", name="up")(x))
    model = keras.Model(x, y, name="block")
    model.compile(optimizer="adam", loss="mse")
    return model


@pytest.fixture
def up_down():
    """Builds a seeded, compiled block 16 -> up (32) -> down (8), its layers named: `up_down()` (inside a scope)."""
    return _up_down


@pytest.fixture
def sixteen_rows():
    """(x, y): 16 rows of 16 inputs and 8 targets, seeded."""
    return (np.random.default_rng(0).normal(size=(16, 16)).astype("float32"),
            np.random.default_rng(1).normal(size=(16, 8)).astype("float32"))
