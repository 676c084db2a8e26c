"""Saving a model under one layout and restoring it under another.

Keras's own `model.save` gathers every sharded variable into whole arrays in
a `.keras` file; `keras.models.load_model` under a distribution creates each
variable with the new layout and lays the saved values out across the new
mesh. Nothing here re-implements that: these helpers name the steps.
"""

from __future__ import annotations

from pathlib import Path

from course_utils.devices import scope_for


def save_checkpoint(model, path) -> Path:
    """Saves a (possibly sharded) model with `model.save`.

    Args:
        model: The Keras model.
        path: A file path ending in `.keras`.

    Returns:
        The path written.
    """
    path = Path(path)
    if path.suffix != ".keras":
        raise ValueError(f"Keras saves whole models to files ending in .keras. Received: path='{path}'. "
                         f"Use for example '{path.with_suffix('.keras').name}'.")
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return path


def load_checkpoint(path, distribution=None):
    """Loads a saved model, laying its variables out under `distribution`.

    Args:
        path: A `.keras` file written by `save_checkpoint` or `model.save`.
        distribution: The distribution to restore under; None restores on
            the first device of the course.

    Returns:
        The restored Keras model, its variables laid out by `distribution`.
    """
    import keras

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No checkpoint at '{path}'. Save one first with save_checkpoint(model, '{path}').")
    with scope_for(distribution):
        return keras.models.load_model(path)
