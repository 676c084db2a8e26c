"""What a public entry point checks of the objects it is given, in one place: a model where a model goes, a mesh
where a mesh goes, each refused with what was received and how to make the right one (rather than an
`AttributeError` from deep inside)."""

from __future__ import annotations


def require_model(model, what: str) -> None:
    """Raises TypeError unless `model` is a Keras model (`what` names the caller)."""
    import keras

    if not isinstance(model, keras.Model):
        raise TypeError(f"{what} needs a Keras model (a keras.Model, e.g. keras.Sequential([...]) or a keras-hub "
                        f"backbone). Received: {type(model).__name__} {model!r:.60}.")


def require_mesh(mesh, what: str) -> None:
    """Raises TypeError unless `mesh` reads as a `DeviceMesh` (its devices, shape and axis names)."""
    if not all(hasattr(mesh, name) for name in ("devices", "shape", "axis_names")):
        raise TypeError(f"{what} needs a keras.distribution.DeviceMesh. Received: {type(mesh).__name__} "
                        f"{mesh!r:.60}. Make one with make_mesh((2, 4), ('data', 'model')).")


def require_batch_splits(batch, distribution, what: str) -> None:
    """Raises ValueError unless every leaf of `batch` splits its first dimension evenly over the batch axis, as
    `fit` splits it (JAX's own error, an `IndivisibleError`, names neither the batch nor a size that works)."""
    import jax

    axis = distribution.batch_dim_name
    names = list(distribution.device_mesh.axis_names)
    if axis not in names:
        return
    size = distribution.device_mesh.shape[names.index(axis)]
    rows = {int(leaf.shape[0]) for leaf in jax.tree.leaves(batch) if len(leaf.shape)}
    uneven = sorted(r for r in rows if r % size)
    if uneven:
        raise ValueError(f"{what}: the batch's first dimension must split evenly over the mesh axis {axis!r} "
                         f"({size} devices), as fit splits it. Received: a batch of {uneven[0]} rows. Use a multiple "
                         f"of {size}, e.g. {size}, {2 * size}, {3 * size}.")
