"""Every private Keras attribute the course relies on, in one place.

Keras has no public way to ask for these: the state a training step takes,
the state `fit` holds between its steps, one step of the compiled training
function, the shardings of that state, every sub-layer of a model, the LayoutMap a
`ModelParallel` holds, the name scopes open now, the variables a
`StatelessScope` will allocate. Each is reached here and nowhere else, so a
Keras upgrade that renames one breaks one module, and `missing()` (run by the
test suite and by `python -m course_utils.course doctor`) names it at once: it checks
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
    ("keras.layers.Layer", "_flatten_layers"),
    ("keras.layers.Layer", "_layers"),
    ("keras.distribution.ModelParallel", "_layout_map"),
    ("keras.Model", "_symbolic_build"),
    ("keras.Model", "train_function"),
    ("keras.src.backend.common.global_state", "get_global_attribute"),
    ("keras.src.backend.common.global_state", "set_global_attribute"),
    ("keras.distribution.TensorLayout", "_validate_axes"),
    ("keras.Variable", "_layout"),
    ("keras.Variable", "_direct_assign"),
)


def state_after_step(model) -> tuple[list, list, list]:
    """Inside `fit` (a callback's `on_train_batch_end`): the state the step just returned.

    Keras's JAX trainer keeps it between steps without writing it back to the variables (a
    callback that reads `self.model` has it written back, every step). Returns host copies of the
    trainable, non-trainable and optimizer variables, in the model's order.
    """
    import numpy as np

    state = model._jax_state
    return tuple([np.array(value) for value in state[part]]
                 for part in ("trainable_variables", "non_trainable_variables", "optimizer_variables"))


def one_step(model, state: tuple[list, list, list], batch) -> tuple[list, list, list]:
    """One step of `model`'s own compiled training function from `state` on `batch` (`(x, y)`).

    Nothing of `model` changes: Keras's JAX training function takes the state and returns the
    next one. The metrics start from zero. Returns host copies, as `state_after_step` does.
    """
    import numpy as np

    if model.train_function is None:
        model._symbolic_build(data_batch=batch)
        model.make_train_function()
    metrics = [np.zeros(v.shape, v.dtype) for v in model.metrics_variables]
    _, (trainable, non_trainable, optimizer, _) = model.train_function((*state, metrics), iter([batch]))
    return tuple([np.array(value) for value in part] for part in (trainable, non_trainable, optimizer))


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


def is_shape_only(variable) -> bool:
    """Whether `variable` holds a shape and a dtype but no value (built under
    `keras.StatelessScope(initialize_variables=False)` and forgotten: see `forget_deferred`). Reads the
    variable's `_value`, which the behaviour "a shape-only variable ... stays unallocated" probes."""
    return getattr(variable, "_value", None) is None


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
    "fit keeps each step's state where state_after_step reads it, and one_step takes that step again",
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


def _steps_are_kept_and_repeatable() -> bool:
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, y = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
    seen = []
    model.optimizer.build(model.trainable_variables)
    before = tuple([np.array(v.value) for v in variables] for variables in
                   (model.trainable_variables, model.non_trainable_variables, model.optimizer.variables))

    class Keep(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(state_after_step(self._model))

    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[Keep()])
    again = one_step(model, before, (x, y))
    return (len(seen) == 1 and len(seen[0][0]) == len(again[0]) == 2
            and all(np.array_equal(a, b) for a, b in zip(seen[0][0], again[0])))


def layout_over_axes(axes, device_mesh):
    """A Keras `TensorLayout` whose entries may name several mesh axes each (`(("replica", "batch"), None)`), as JAX's
    `PartitionSpec` takes them; Keras's own check refuses a tuple entry. Each name is still checked against the
    mesh."""
    import keras

    from course_utils.layout_axes import axes_used

    class LayoutOverAxes(keras.distribution.TensorLayout):
        def _validate_axes(self):
            if self._device_mesh is None:
                return
            unknown = sorted(set(axes_used(self._axes)) - set(self._device_mesh.axis_names))
            if unknown:
                raise ValueError(f"Invalid axis names for Layout: {unknown} are not axes of the mesh "
                                 f"{tuple(self._device_mesh.axis_names)}.")

    return LayoutOverAxes(axes, device_mesh)


def relayout(variable, layout) -> None:
    """Lays a built variable out anew by `layout` (a `TensorLayout`), its value moved there: Keras sets a variable's
    layout when it is created, and `fit`'s step keeps each variable as its value is laid out."""
    variable._layout = layout
    variable._direct_assign(variable.value)


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
        "keras.distribution.TensorLayout": keras.distribution.TensorLayout((None,)),
        "keras.Variable": model.layers[0].kernel,
    }
    gone = [f"{owner}.{name}" for owner, name in ATTRIBUTES if not hasattr(owners[owner], name)]
    probes = (_deferred_stays_unallocated, _name_scope_is_seen, _steps_are_kept_and_repeatable)
    for behaviour, probe in zip(BEHAVIOURS, probes):
        try:
            works = probe()
        except Exception:  # a probe that breaks is a behaviour that is gone
            works = False
        if not works:
            gone.append(f"behaviour: {behaviour}")
    return gone
