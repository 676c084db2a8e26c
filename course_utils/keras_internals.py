"""Every private Keras attribute the course relies on, in one place.

Keras has no public way to ask for these: the state a training step takes,
the shardings of that state, every sub-layer of a model, the LayoutMap a
`ModelParallel` holds, the name scopes open now, the variables a
`StatelessScope` will allocate. Each is reached here and nowhere else, so a
Keras upgrade that renames one breaks one module, and `missing()` (run by the
test suite and by `python -m course_utils doctor`) names it at once: it checks
that every attribute exists and, for the global-state keys, that the
behaviour the course relies on still holds (`BEHAVIOURS`), since a renamed
key fails silently: sizing Gemma 7B would allocate 34 GB, and every
collective would be blamed on "(training step)".

Checked against Keras `CHECKED_WITH`.
"""

from __future__ import annotations

CHECKED_WITH = "3.15.1"
# Keras's global-state keys the course reads: a rename would fail silently (see `BEHAVIOURS`).
NAME_SCOPE_KEY = "name_scope_stack"
DEFERRED_KEY = "uninitialized_variables"

# (what owns it, attribute): the private names used below.
ATTRIBUTES = (
    ("keras.Model", "_get_jax_state"),
    ("keras.Model", "_get_state_sharding_spec"),
    ("keras.layers.Layer", "_flatten_layers"),
    ("keras.layers.Layer", "_layers"),
    ("keras.distribution.ModelParallel", "_layout_map"),
    ("keras.Model", "_symbolic_build"),
    ("keras.src.backend.common.global_state", "get_global_attribute"),
    ("keras.src.backend.common.global_state", "set_global_attribute"),
)


def training_state(model) -> tuple:
    """The state `model.train_step` takes under JAX: trainable, non-trainable, optimizer, metrics."""
    return model._get_jax_state(True, True, True, True)


def state_shardings(model):
    """The shardings of `training_state(model)`, as Keras's JAX trainer passes them to `jax.jit`."""
    return model._get_state_sharding_spec()


def all_layers(model, *, include_self: bool = True) -> list:
    """Every layer inside `model`, nested ones included, in Keras's own order."""
    return list(model._flatten_layers(include_self=include_self))


def is_leaf(layer) -> bool:
    """True when `layer` holds no sub-layers of its own (a Dense, not a block of them)."""
    return not layer._layers


def layout_map_of(distribution):
    """The `LayoutMap` a `ModelParallel` was built with; None for `DataParallel` (or None)."""
    return getattr(distribution, "_layout_map", None)


def symbolic_build(model, batch) -> None:
    """Builds what `fit` builds before its first step (metrics, loss, optimizer) from a batch's shapes.

    `batch` is `(x, y)` or `(x, y, sample_weight)`; its leaves need only `.shape` and `.dtype`.
    """
    model._symbolic_build(data_batch=batch)


def name_scope_path() -> str:
    """The open Keras name scopes joined by "/": the JAX name stack of the ops traced now.

    Unlike `current_path()` (a layer's Keras path) this ignores the parent
    path a layer remembers, so it names the scopes exactly as JAX records them.
    """
    from keras.src.backend.common import global_state

    stack = global_state.get_global_attribute(NAME_SCOPE_KEY) or []
    return "/".join(entry.name for entry in stack)


def forget_deferred(variables) -> None:
    """Takes shape-only variables off the list Keras initializes when a StatelessScope closes.

    Variables created inside `keras.StatelessScope(initialize_variables=False)`
    hold a shape, a dtype and a path but no value; Keras remembers them and
    allocates them all when the next outermost StatelessScope closes (Keras
    opens one whenever it infers a shape). Forgotten, they are never allocated.
    """
    from keras.src.backend.common import global_state

    gone = {id(v) for v in variables}
    pending = global_state.get_global_attribute(DEFERRED_KEY) or []
    global_state.set_global_attribute(DEFERRED_KEY, [v for v in pending if id(v) not in gone])


# What the course relies on beyond names, each probed by `missing()`.
BEHAVIOURS = (
    "a shape-only variable, once forgotten, stays unallocated when the next StatelessScope closes",
    "name_scope_path() names the Keras name scopes open now",
)


def _deferred_stays_unallocated() -> bool:
    import keras

    with keras.StatelessScope(initialize_variables=False):
        variable = keras.Variable(initializer="zeros", shape=(2, 3), name="course_probe")
    forget_deferred([variable])
    with keras.StatelessScope():
        pass
    return getattr(variable, "_value", None) is None


def _name_scope_is_seen() -> bool:
    import keras

    with keras.name_scope("course_probe"):
        with keras.name_scope("inner"):
            return name_scope_path() == "course_probe/inner"


def missing() -> list[str]:
    """What this Keras no longer offers: attributes as "owner.attribute", broken behaviours by `BEHAVIOURS`.

    Attributes set in `__init__` are looked for on a small real instance. Empty: all present and working.
    """
    import importlib

    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    mesh = keras.distribution.DeviceMesh((1,), ("model",), keras.distribution.list_devices()[:1])
    owners = {
        "keras.Model": model,
        "keras.layers.Layer": model.layers[0],
        "keras.distribution.ModelParallel": keras.distribution.ModelParallel(
            layout_map=keras.distribution.LayoutMap(mesh), batch_dim_name="model"),
        "keras.src.backend.common.global_state": importlib.import_module("keras.src.backend.common.global_state"),
    }
    gone = [f"{owner}.{name}" for owner, name in ATTRIBUTES if not hasattr(owners[owner], name)]
    for behaviour, probe in zip(BEHAVIOURS, (_deferred_stays_unallocated, _name_scope_is_seen)):
        try:
            works = probe()
        except Exception:  # a probe that breaks is a behaviour that is gone
            works = False
        if not works:
            gone.append(f"behaviour: {behaviour}")
    return gone
