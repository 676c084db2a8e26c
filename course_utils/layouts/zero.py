"""ZeRO-2: the optimizer's state split over the batch axis, the weights whole on every device.

Data parallelism keeps a whole copy of Adam's two moments on every device: twice the weights' bytes in float32.
ZeRO (Rajbhandari et al., 2020) splits that state over the data-parallel devices: each device sums only its slice
of every gradient (a reduce-scatter, not an all-reduce), updates its slice of the weights with its slice of the
state, and gathers the updated weights (an all-gather). The two collectives send what the all-reduce sent, so the
step costs no more bytes than data parallelism's. Stage 1 keeps each whole gradient before summing its slice,
stage 2 keeps only the slice; in one compiled step XLA frees each gradient as soon as its slice is summed, so the
program is stage 2's. Stage 3 splits the weights too: that is FSDP.

Keras lays out each optimizer slot as its weight (`add_variable_from_reference` passes the weight's layout), and
has no rule for the state alone. `state_layout` is the rule: the weight's layout with the batch axis on the first
dimension it leaves whole and that divides. `split_optimizer_state(model)` re-lays a built model's optimizer state
by it, so `fit` runs ZeRO-2 (its step keeps each variable as laid out); `zero_parallel(layout_map)` is the
distribution the advisor compiles the same step under, shape-only.
"""

from __future__ import annotations

from course_utils.keras_internals import relayout
from course_utils.layout_axes import axes_used

DEFAULT_AXIS = "batch"


def state_layout(axes, shape, axis: str, axis_size: int) -> tuple:
    """A weight's layout `axes` with `axis` added on the first dimension it leaves whole and that divides into
    `axis_size` parts: the layout of its optimizer state under ZeRO. Unchanged where `axis` already splits the
    weight (FSDP) or no whole dimension divides (a small bias stays whole on every device)."""
    axes = tuple(axes) + (None,) * (len(shape) - len(axes))
    if axis in axes_used(axes):
        return axes
    for dim, (entry, size) in enumerate(zip(axes, shape)):
        if entry is None and size % axis_size == 0:
            return (*axes[:dim], axis, *axes[dim + 1:])
    return axes


def zero_parallel(layout_map, axis: str = DEFAULT_AXIS):
    """A Keras `ModelParallel` on `layout_map` (the batch over `axis`) whose optimizer state is split over `axis`
    as `state_layout` says: what the advisor compiles for ZeRO-2. For a real run use `split_optimizer_state`."""
    from keras import distribution

    names = tuple(layout_map.device_mesh.axis_names)
    if axis not in names:
        raise ValueError(f"axis names the mesh axis the batch and the optimizer state are split over, one of {names}. "
                         f"Received: axis={axis!r}.")
    size = layout_map.device_mesh.shape[names.index(axis)]

    class ZeroParallel(distribution.ModelParallel):
        """`ModelParallel` whose optimizer state is split over the batch axis (ZeRO-2)."""

        state_axis = axis

        def state_layout(self, weight_layout, shape):
            return distribution.TensorLayout(state_layout(weight_layout.axes, shape, axis, size), self.device_mesh)

    return ZeroParallel(layout_map=layout_map, batch_dim_name=axis)


def split_optimizer_state(model, axis: str = DEFAULT_AXIS) -> int:
    """Re-lays a built model's optimizer state over `axis` (ZeRO-2), under the distribution in scope; returns how
    many variables it split. Call it inside the distribution's scope, after `model.optimizer.build(
    model.trainable_variables)` and before `fit`.

    Example:
        >>> with distribution.scope():
        ...     model = build(); model.optimizer.build(model.trainable_variables)
        ...     split_optimizer_state(model)
        ...     model.fit(x, y)
    """
    from keras import distribution as keras_distribution

    from course_utils.layouts.layout_map import optimizer_owners

    dist = keras_distribution.distribution()
    if dist is None or axis not in dist.device_mesh.axis_names:
        raise ValueError(f"split_optimizer_state splits over a mesh axis of the distribution in scope; "
                         f"{'none is in scope' if dist is None else f'its axes are {dist.device_mesh.axis_names}'}. "
                         f"Received: axis={axis!r}. Call it inside `with distribution.scope():`.")
    optimizer = model.optimizer
    if optimizer is None or not optimizer.built:
        raise ValueError("The model's optimizer is not built yet: compile the model and call "
                         "model.optimizer.build(model.trainable_variables) first.")
    mesh = dist.device_mesh
    size = mesh.shape[list(mesh.axis_names).index(axis)]
    weights = {w.path: w for w in model.trainable_variables}
    slots = {v.path: v for v in optimizer.variables}
    split = 0
    for path, owner in optimizer_owners(optimizer.variables, model.trainable_variables).items():
        slot = slots[path]
        weight_axes = tuple(dist.get_variable_layout(weights[owner]).axes)
        axes = state_layout(weight_axes, tuple(slot.shape), axis, size)
        if axes != weight_axes + (None,) * (len(slot.shape) - len(weight_axes)):  # the batch axis added
            relayout(slot, keras_distribution.TensorLayout(axes, mesh))
            split += 1
    return split
