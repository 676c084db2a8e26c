"""What a public entry point checks of the objects it is given, in one place: a model where a model goes (built,
compiled, laid out by the distribution), a mesh where a mesh goes, LayoutMap keys Keras can look up, a batch that
splits; each refused with what was received and how to make the right one (rather than an `AttributeError` or a
bare `re.error` from deep inside)."""

from __future__ import annotations

import re

from course_utils.keras_internals import layout_map_of


def require_model(model, what: str) -> None:
    """Raises TypeError unless `model` is a Keras model (`what` names the caller)."""
    import keras

    if not isinstance(model, keras.Model):
        raise TypeError(f"{what} needs a Keras model (a keras.Model, e.g. keras.Sequential([...]) or a keras-hub "
                        f"backbone). Received: {type(model).__name__} {model!r:.60}.")


def require_built(model, what: str) -> None:
    """Raises unless `model` is a Keras model with its variables (`what` names the caller)."""
    require_model(model, what)
    if not getattr(model, "built", False) or not model.variables:
        raise ValueError(f"{what} needs a built model; {model.name!r} has no variables yet. Build it first: give it "
                         f"a keras.Input, or call model.build(input_shape) (inside distribution.scope() to lay it "
                         f"out).")


def require_compiled(model, what: str) -> None:
    """Raises unless `model` is built and compiled, with an optimizer (`what` names the caller)."""
    require_built(model, what)
    if getattr(model, "optimizer", None) is None:
        raise ValueError(f"{what} needs a compiled model; {model.name!r} has no optimizer. "
                         f"Call model.compile(optimizer=..., loss=...) first.")


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


def require_valid_keys(layout_map, what: str) -> None:
    """Raises ValueError naming the first key of `layout_map` that is not a regular expression Keras can use.

    Keras's lookup compiles every key for every path it looks up, so one bad key
    fails every lookup with a bare `re.error` that names no key.
    """
    if layout_map is None:
        return
    for key in layout_map:
        try:
            re.compile(key)
        except (re.error, TypeError) as error:
            raise ValueError(
                f"{what} cannot look up layouts: the LayoutMap key {key!r} is not a regular expression "
                f"({type(error).__name__}: {error}). Escape special characters (re.escape) or fix the "
                f"pattern; check_layout_map(layout_map, model) lists every problem of a map.") from None


def require_laid_out(model, distribution, what: str) -> None:
    """Raises ValueError, with the fix, when `distribution` cannot lay `model` out as `what` needs:
    a LayoutMap key that is not a regular expression, or variables built outside its scope."""
    require_valid_keys(layout_map_of(distribution), what)
    outside = outside_the_mesh(model.variables, distribution)
    if outside:
        raise ValueError(
            f"{what} compiles the step the distribution lays out, but {len(outside)} of the model's "
            f"{len(model.variables)} variables (first: '{outside[0]}') live outside its mesh "
            f"{tuple(distribution.device_mesh.shape)}: the model was built outside distribution.scope(). Build and "
            f"compile it inside `with distribution.scope():`, then call {what} again.")


def outside_the_mesh(variables, distribution) -> list[str]:
    """Paths of the variables whose arrays live on devices outside `distribution`'s mesh.

    That happens to a model built outside `distribution.scope()`: its arrays sit
    on one device while the distribution plans them over the whole mesh.
    """
    if distribution is None:
        return []
    mesh_devices = {d.id for d in distribution.device_mesh.backend_mesh.devices.flat}
    found = []
    for variable in variables:
        sharding = getattr(getattr(variable, "value", None), "sharding", None)
        if sharding is not None and {d.id for d in sharding.device_set} != mesh_devices:
            found.append(variable.path)
    return found
